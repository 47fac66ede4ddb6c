"""The kit's own client, as each load user drives it: ``ArcticRLClient`` over the Cortex
transport over :class:`CheckedRest`, whose HTTP session is the load meter. Retries,
idempotency keys, chunked uploads and polling are the shipped ones; the meter and the
judge only watch.
"""

from __future__ import annotations

from typing import Any

from client.rest import CortexRestClient
from client.rl import ArcticRLClient
from client.transports.cortex import CortexTransport
from conformance.judge.answers import RESULT_CLAUSES, Judge
from conformance.load.jobs import Target
from conformance.load.measure.meter import MeteredSession, Report


class CheckedRest(CortexRestClient):
    """The REST client, showing each decoded result to the judge before handing it on."""

    def __init__(self, config: Any, judge: Judge, session: MeteredSession) -> None:
        super().__init__(config, session=session)
        self.judge = judge
        self._operation_type: str | None = None

    def operation(self, job_id: str, operation_type: str, payload: Any = None, **hints: Any) -> Any:
        self._operation_type = operation_type
        return super().operation(job_id, operation_type, payload, **hints)

    def wait(self, job_id: str, request_id: str, *, route_name: str = "get_request") -> Any:
        result = super().wait(job_id, request_id, route_name=route_name)
        op = f"op:{self._operation_type}" if route_name == "operation" else route_name
        if op in RESULT_CLAUSES:
            self.judge.result(op, job_id, result)
        return result


def kit_client(target: Target, job_id: str, judge: Judge, report: Report,
               fields: dict[str, Any]) -> ArcticRLClient:
    """An RL client reattached to ``job_id`` (it never creates or cancels a job), whose every
    try is metered; ``fields``: ClientConfig fields of the profile and the user."""
    config = target.client_config(job_id=job_id, **fields)
    rest = CheckedRest(config, judge, MeteredSession(judge, report))
    return ArcticRLClient(config, CortexTransport(config, rest))
