"""Shared fixtures for client unit tests: a clean launcher environment."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No launcher variables leak in from the developer's shell."""
    import os

    for name in list(os.environ):
        if name.startswith("CORTEX_") or name == "ARCTIC_RL_BACKEND":
            monkeypatch.delenv(name, raising=False)
