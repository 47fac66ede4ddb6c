"""e2e fixtures: skip without torch or the fake; fresh or shared fakes per test; every fake
(in this process or a child) answers in the any dialect unless a test names another."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

pytest.importorskip("torch")
pytest.importorskip("fake_gs")

from e2e_fake import Fake, running_fake  # noqa: E402


@pytest.fixture(autouse=True)
def _any_dialect(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default dialect of every fake an e2e test starts, examples and CLIs included:
    every form the spec allows, chosen per answer (the client must take them all)."""
    from fake_gs.settings import DIALECT_ENV

    monkeypatch.setenv(DIALECT_ENV, "any")


@pytest.fixture
def make_fake() -> Callable[..., AbstractContextManager[Fake]]:
    """``with make_fake(profile="current") as fake:`` - a fresh fake per use."""
    return running_fake


@pytest.fixture(scope="module")
def shared_fake() -> Iterator[Fake]:
    """One default fake for tests that neither inject faults nor change settings."""
    with running_fake() as fake:
        yield fake
