"""The quickstart example runs end to end (it starts its own in-process fake)."""

from __future__ import annotations

import pytest
from example_loader import load_example


def test_quickstart_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    module = load_example("client_quickstart")
    monkeypatch.setattr("sys.argv", ["client_quickstart.py"])
    module.main()
    out = capsys.readouterr().out
    assert "loss" in out and "saved global_step1" in out
