"""The e2e harness: a real fake on a free loopback port and its admin API over HTTP.

Nothing sits between the client and the fake but a socket: settings go in through
``FakeSettings``, faults and state through the fake's own ``/_fake/`` admin API. The fake
answers in the any dialect (every form the spec allows, chosen per answer) unless a test
names another: the kit-dialect answers are the suite's everywhere else.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from client.config import ClientConfig
from fake_gs.testing.admin_api import AdminApi

#: Client timing for loopback: tiny poll and back-off waits, short job start.
FAST: dict[str, Any] = {
    "poll_first_s": 0.002,
    "poll_factor": 1.5,
    "poll_cap_s": 0.02,
    "backoff_first_s": 0.002,
    "backoff_cap_s": 0.01,
    "job_start_timeout_s": 20.0,
    "poll_timeout_s": 20.0,
    "read_timeout_s": 20.0,
    "call_timeout_s": 30.0,
}


@dataclass
class Fake:
    """A running fake: its base URL and its admin API (``fake_gs.testing.admin_api``)."""

    url: str
    admin: AdminApi

    def config(self, **overrides: Any) -> ClientConfig:
        # max_seq_len: the tests' 3000-token frames must fit (the fake refuses longer ones).
        return ClientConfig(base_url=self.url, **{**FAST, "max_seq_len": 4096, **overrides})


def test_seed() -> int:
    """A seed of the running test's own (its node id), so each test sees its forms, again
    on every run."""
    node = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    return int.from_bytes(hashlib.blake2b(node.encode(), digest_size=4).digest(), "big")


@contextmanager
def running_fake(**settings: Any) -> Iterator[Fake]:
    """A fake answering in any form the spec allows (``--dialect any``, seeded by the test)
    unless the test asks for a dialect: the client must take every one of them."""
    from fake_gs import FakeSettings, serve_in_background

    settings = {"dialect": "any", "seed": test_seed(), **settings}
    with serve_in_background(FakeSettings(**settings)) as url:
        admin = AdminApi(url)
        try:
            yield Fake(url, admin)
        finally:
            admin.close()

