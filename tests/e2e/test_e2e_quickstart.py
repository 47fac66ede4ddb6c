"""The quickstart example runs end to end (it starts its own in-process fake)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "client_quickstart.py"


def test_quickstart_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("client_quickstart", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr("sys.argv", ["client_quickstart.py"])
    module.main()
    out = capsys.readouterr().out
    assert "loss" in out and "saved global_step1" in out
