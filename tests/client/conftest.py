"""Shared fixtures for client unit tests: a clean launcher environment."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No launcher variables leak in from the developer's shell."""
    import os

    for name in list(os.environ):
        if name.startswith("CORTEX_") or name == "ARCTIC_RL_BACKEND":
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _no_guarded_jobs_leak() -> Iterator[None]:
    """A client a test leaves open would be cancelled at interpreter exit: cancel it when
    the test ends instead, so the exit guard's registry never carries over."""
    yield
    from client import exit_guard

    exit_guard.cancel_guarded()


@pytest.fixture(scope="module")
def fakes() -> Iterator[Any]:
    """The integration replays' fakes (``integration_support.Fakes``), one module's worth."""
    pytest.importorskip("torch")
    from contextlib import ExitStack

    from integration_support import Fakes

    with ExitStack() as stack:
        yield Fakes(stack)
