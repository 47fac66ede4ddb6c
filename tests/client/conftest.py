"""Shared fixtures for client unit tests: fast timing so nothing waits on real back-off."""

from __future__ import annotations

import pytest

FAST: dict[str, float] = {
    "backoff_first_s": 0.001,
    "backoff_cap_s": 0.005,
    "poll_first_s": 0.001,
    "poll_cap_s": 0.005,
    "connect_timeout_s": 2.0,
    "read_timeout_s": 5.0,
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No launcher variables leak in from the developer's shell."""
    import os

    for name in list(os.environ):
        if name.startswith("CORTEX_") or name == "ARCTIC_RL_BACKEND":
            monkeypatch.delenv(name, raising=False)
