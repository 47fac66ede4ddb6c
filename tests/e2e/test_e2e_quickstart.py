"""The quickstart example runs end to end (it starts its own in-process fake)."""

from __future__ import annotations

import re

import pytest
from example_loader import load_example


def test_quickstart_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    module = load_example("client_quickstart")
    monkeypatch.setattr("sys.argv", ["client_quickstart.py"])
    module.main()
    out = capsys.readouterr().out
    # the checkpoint the server named (spec §6.3: the result's id; the kit's global_step1)
    assert "loss" in out and re.search(r"saved \S*step1\b", out), out
