"""A client team's fixtures on top of the ``fake_gs`` plugin: one RL client per test, on
the test's own account of the session's fake (so the tests can run under ``-n 4``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from client import create_client


@pytest.fixture(scope="session")
def fake_gs_settings() -> dict[str, Any]:
    """Every fake of this session: the spec's enum spelling of statuses."""
    return {"status_style": "enum"}


@pytest.fixture
def rl_client(fake_gs: Any) -> Iterator[Any]:
    """The client under test; leaving the block cancels the job it created."""
    config = fake_gs.client_config(training_gpus=1, sampling_gpus=1, max_seq_len=512, poll_first_s=0.02)
    with create_client(config) as client:
        yield client
