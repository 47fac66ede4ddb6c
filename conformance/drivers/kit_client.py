"""The client-transport driver: the same ops through the kit's client.

Properties run through it to check that the client and the server agree (the client
decodes every delivery form and status dialect to results that satisfy the shape rules),
and the client-subject clauses are judged through it. Its HTTP session is recorded like
the raw driver's, and the bodies it sends are kept so properties can inspect them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from conformance.drivers.answer_bounds import mount_route_bounds
from conformance.inputs import valid_bodies
from conformance.reporting.cost import COST
from conformance.reporting.recorder import RECORDER, sent_body
from conformance.target import Target
from contract.errors import REQUEST_ID_HEADER
from contract.routes import route_of


@dataclass(frozen=True)
class Sent:
    method: str
    url: str
    content_type: str
    body: bytes
    #: The answer's status and x-snowflake-request-id header (None: it carried none).
    status: int = 0
    request_id_header: str | None = None

    def calls(self, name: str) -> bool:
        """Whether this request is a call of the route ``name`` (contract.routes)."""
        found = route_of(self.method, self.url)
        return found is not None and found.name == name


class ClientDriver:
    """A ``CortexTransport`` attached to a job on ``target`` (created when ``job_id`` is None)."""

    via = "client"

    def __init__(
        self,
        target: Target,
        job_id: str | None,
        *,
        model: str,
        token: str | None = None,
        sleep: Callable[[float], None] | None = None,
        open_job: bool = True,
        **config: Any,
    ) -> None:
        from client.config import ClientConfig
        from client.rest import CortexRestClient
        from client.transports.cortex import CortexTransport

        self.target = target
        self.sent: list[Sent] = []
        # Under the route's bound already when the recorder's hook reads a streamed answer
        # (before the client's own bounded read sees it).
        self.session = COST.attach(RECORDER.attach(mount_route_bounds(requests.Session())))
        self.session.hooks["response"].append(self._keep_request)
        fast = target.embedded
        values: dict[str, Any] = dict(
            base_url=target.base_url,
            database=target.database,
            schema_name=target.schema,
            endpoint=target.endpoint,
            pat=token if token is not None else target.token,
            job_id=job_id,
            model=model,
            max_seq_len=512,
            training_gpus=1,
            sampling_gpus=1,
            poll_first_s=0.005 if fast else 0.5,
            poll_factor=1.25,
            poll_cap_s=0.1 if fast else 6.0,
            backoff_first_s=0.01 if fast else 0.5,
            backoff_cap_s=0.2 if fast else 6.0,
            forward_no_grad_route="operation" if target.profile == "current" else "proposed",
            cancel_on_shutdown=False,
        )
        values.update(config)
        if not values.get("pat"):
            values.pop("pat")
        self.config = ClientConfig(**values)
        kwargs: dict[str, Any] = {"session": self.session}
        if sleep is not None:
            kwargs["sleep"] = sleep
        self.rest = CortexRestClient(self.config, **kwargs)
        self.transport = CortexTransport(self.config, self.rest)
        self.ids = self.transport.open() if open_job else None

    def _keep_request(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        req = response.request
        sent = sent_body(req.body)
        body = sent.encode() if isinstance(sent, str) else sent or b""
        self.sent.append(
            Sent(req.method or "", req.url or "", req.headers.get("Content-Type", ""), body,
                 response.status_code, response.headers.get(REQUEST_ID_HEADER))
        )

    @property
    def job_id(self) -> str:
        assert self.ids is not None
        return self.ids.job_id

    def call(self, op: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        from client.transports.base import Request

        return self.transport.call(Request(op, self.job_id, dict(body or {})))

    def close(self, cancel: bool = False) -> None:
        self.transport.close(cancel=cancel)


class ClientOps:
    """The :class:`conformance.drivers.ops.Ops` surface through the client transport."""

    via = "client"

    def __init__(self, driver: ClientDriver) -> None:
        self.c = driver

    def fwd_bwd(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.c.call("fwd-bwd", body)

    def forward(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.c.call("fwd-no-grad", body)

    def step(self, learning_rate: float | None = None) -> dict[str, Any]:
        return self.c.call("step", valid_bodies.step(learning_rate))

    def save(
        self, checkpoint_id: str | None = None, checkpoint_type: str | None = None
    ) -> dict[str, Any]:
        return self.c.call("save-checkpoint", valid_bodies.save(checkpoint_id, checkpoint_type))

    def load(self, checkpoint_id: str) -> dict[str, Any]:
        return self.c.call("load-checkpoint", {"checkpoint_id": checkpoint_id})

    def generate(self, request: dict[str, Any]) -> dict[str, Any]:
        return self.c.call("generate", request)

    def weight_sync(self) -> dict[str, Any]:
        return self.c.call("sync-weights", {})

    def tail_logs(self) -> dict[str, Any]:
        return self.c.call("tail-logs", {"max_lines": 10})
