"""e2e fixtures: skip without torch or the fake; fresh or shared fakes per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

pytest.importorskip("torch")
pytest.importorskip("fake_gs")

from e2e_fake import Fake, running_fake  # noqa: E402


@pytest.fixture
def make_fake() -> Callable[..., AbstractContextManager[Fake]]:
    """``with make_fake(profile="current") as fake:`` - a fresh fake per use."""
    return running_fake


@pytest.fixture(scope="module")
def shared_fake() -> Iterator[Fake]:
    """One default fake for tests that neither inject faults nor change settings."""
    with running_fake() as fake:
        yield fake
