"""A transport that records every request and answers canned results, for tests.

It stands where the Cortex transport would, so tests can pin exactly which op and body
each integration call pattern produces, with no server and no network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from client.transports.base import JobIds, Request

Response = Mapping[str, Any] | Callable[[Request], Mapping[str, Any]]

DEFAULT_IDS = JobIds(
    job_id="rec-job",
    training="rec-job:training:0",
    sampling="rec-job:sampling:0",
    log_prob=None,
    created=True,
)


class RecordingTransport:
    """Records ``Request``s; answers ``responses[op]`` (a dict or a callable) or ``{}``."""

    def __init__(self, responses: Mapping[str, Response] | None = None,
                 ids: JobIds = DEFAULT_IDS) -> None:
        self.responses: dict[str, Response] = dict(responses or {})
        self.ids = ids
        self.calls: list[Request] = []
        self.opened = 0
        self.closed: list[bool] = []

    def open(self) -> JobIds:
        self.opened += 1
        return self.ids

    def call(self, request: Request) -> dict[str, Any]:
        self.calls.append(request)
        answer = self.responses.get(request.op, {})
        if callable(answer):
            answer = answer(request)
        return dict(answer)

    def close(self, *, cancel: bool) -> None:
        self.closed.append(cancel)

    @property
    def ops(self) -> list[str]:
        return [c.op for c in self.calls]

    def last(self, op: str | None = None) -> Request:
        """The latest request (of ``op`` when given)."""
        for request in reversed(self.calls):
            if op is None or request.op == op:
                return request
        raise LookupError(f"no {op or 'request'} recorded")
