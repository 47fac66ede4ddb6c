"""The e2e harness: a real fake on a free loopback port and its admin API over HTTP.

Nothing sits between the client and the fake but a socket: settings go in through
``FakeSettings``, faults and state through the fake's own ``/_fake/`` admin API.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import requests

from client.config import ClientConfig

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
    """A running fake: its base URL and its admin API."""

    url: str

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        response = requests.request(method, f"{self.url}/_fake{path}", json=body, timeout=10)
        response.raise_for_status()
        return response.json()

    def state(self) -> dict[str, Any]:
        return dict(self.admin("GET", "/state"))

    def faults(self, *rules: dict[str, Any]) -> None:
        self.admin("PUT", "/faults", list(rules))

    def force(self, job_id: str, status: str, reason: str = "") -> None:
        self.admin("POST", f"/jobs/{job_id}/state", {"status": status, "reason": reason})

    def config(self, **overrides: Any) -> ClientConfig:
        # max_seq_len: the tests' 3000-token frames must fit (the fake refuses longer ones).
        return ClientConfig(base_url=self.url, **{**FAST, "max_seq_len": 4096, **overrides})


@contextmanager
def running_fake(**settings: Any) -> Iterator[Fake]:
    from fake_gs import FakeSettings, serve_in_background

    with serve_in_background(FakeSettings(**settings)) as url:
        yield Fake(url)

