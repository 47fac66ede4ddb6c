"""One op surface over both drivers, so a property can run the same call raw or through
the client and judge the results with the same shape rules.

``RawOps`` speaks HTTP itself and raises :class:`Refused` / :class:`Failed` carrying the
server's answer; ``ClientOps`` goes through ``client.transports.cortex.CortexTransport``
and lets the client's typed errors through.
"""

from __future__ import annotations

import base64
from typing import Any, Protocol

from conformance.drivers.raw import Answer, RawDriver, Settled, encode
from conformance.inputs import valid_bodies
from contract.routes import OCTET
from contract.states import RequestState


class Refused(AssertionError):
    """The server refused a call the property expected it to take."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(f"server refused: {answer}")
        self.answer = answer


class Failed(AssertionError):
    """An accepted request ended failed or cancelled (or never ended)."""

    def __init__(self, settled: Settled) -> None:
        body = settled.final_body
        super().__init__(
            f"request {settled.request_id} ended {body.get('status')!r}: {body.get('error')!r}"
        )
        self.settled = settled


class Ops(Protocol):
    via: str

    def fwd_bwd(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def forward(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def step(self, learning_rate: float | None = None) -> dict[str, Any]: ...
    def save(
        self, checkpoint_id: str | None = None, checkpoint_type: str | None = None
    ) -> dict[str, Any]: ...
    def load(self, checkpoint_id: str) -> dict[str, Any]: ...
    def generate(self, request: dict[str, Any]) -> dict[str, Any]: ...
    def weight_sync(self) -> dict[str, Any]: ...
    def tail_logs(self) -> dict[str, Any]: ...


class JobIds(Protocol):
    """What :class:`RawOps` reads of its job: the ids it addresses (the session's
    :class:`~conformance.jobs.SharedJob`, or a :class:`~conformance.judging.variants.JobRef` to
    another job)."""

    @property
    def job_id(self) -> str: ...
    @property
    def training(self) -> str | None: ...
    @property
    def sampling(self) -> str | None: ...


class RawOps:
    """The op surface over raw HTTP; every answer is also kept in ``self.last``."""

    via = "raw"

    def __init__(self, driver: RawDriver, job: JobIds) -> None:
        self.d = driver
        self.job = job
        self.last: Settled | None = None

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def settled(self) -> Settled:
        """The request the last op settled (an op that returned settled one: it raises on
        a refusal or a request that did not end done)."""
        if self.last is None:
            raise LookupError("no op of this surface has settled a request yet")
        return self.last

    def _settled(self, answers: list[Answer], settled: Settled | None) -> Any:
        if settled is None:
            raise Refused(answers[-1])
        self.last = settled
        if settled.status != RequestState.DONE:
            raise Failed(settled)
        return settled.decoded()

    def _json(self, name: str, body: dict[str, Any]) -> Any:
        ans, settled = self.d.run_json(name, self.job_id, body)
        return self._settled([ans], settled)

    def fwd_bwd(self, body: dict[str, Any], chunk_bytes: int | None = None) -> dict[str, Any]:
        answers, settled = self.d.run_frame(
            "forward_backward", self.job_id, body, chunk_bytes=chunk_bytes
        )
        return dict(self._settled(answers, settled))

    def forward_no_grad(
        self, body: dict[str, Any], chunk_bytes: int | None = None
    ) -> dict[str, Any]:
        answers, settled = self.d.run_frame(
            "forward_no_grad", self.job_id, body, chunk_bytes=chunk_bytes
        )
        return dict(self._settled(answers, settled))

    def forward_op(self, body: dict[str, Any], sub_job_id: str | None = None) -> dict[str, Any]:
        envelope: dict[str, Any] = {
            "operation_type": "forward",
            "payload": {
                "payload_b64": base64.b64encode(encode(body)).decode("ascii"),
                "content_type": OCTET,
            },
        }
        if sub_job_id:
            envelope["sub_job_id"] = sub_job_id
        if self.d.target.embedded or self.d.target.profile != "current":
            return dict(self.operation(envelope))
        try:
            return dict(self.operation(envelope))
        except (Refused, Failed) as exc:
            # Properties use forward to get a tensor result to judge; spec §7.1 says today's
            # forward is not end-to-end, so on a real server that is not a violation.
            import pytest

            pytest.skip(
                f"needs a working forward operation for a tensor result (spec §7.1 does not "
                f"promise one today): {str(exc)[:160]}"
            )

    def forward(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.d.target.profile == "current":
            return self.forward_op(body)
        return self.forward_no_grad(body)

    def operation(self, envelope: dict[str, Any]) -> Any:
        ans = self.d.operation(self.job_id, envelope)
        if not ans.ok:
            raise Refused(ans)
        rid = ans.field("request_id")
        if isinstance(rid, str) and rid:
            return self._settled([ans], self.d.settle(self.job_id, rid))
        return ans.body

    def step(self, learning_rate: float | None = None) -> dict[str, Any]:
        return dict(self._json("step", valid_bodies.step(learning_rate)))

    def save(
        self, checkpoint_id: str | None = None, checkpoint_type: str | None = None
    ) -> dict[str, Any]:
        return dict(self._json("save", valid_bodies.save(checkpoint_id, checkpoint_type)))

    def load(self, checkpoint_id: str, **extra: Any) -> dict[str, Any]:
        return dict(self._json("load", {"checkpoint_id": checkpoint_id, **extra}))

    def generate(self, request: dict[str, Any]) -> dict[str, Any]:
        answers, settled = self.d.run_frame("generate", self.job_id, request, force_chunk=False)
        return dict(self._settled(answers, settled))

    def weight_sync(self) -> dict[str, Any]:
        payload: dict[str, Any] = {}
        if self.job.training:
            payload["source_sub_job_id"] = self.job.training
        if self.job.sampling:
            payload["target_sub_job_ids"] = [self.job.sampling]
        route = {"sub_job_id": self.job.training} if self.job.training else {"sub_job_type": "training"}
        body = {"operation_type": "weight-sync", "payload": payload, **route}
        return dict(self.operation(body) or {})

    def tail_logs(self) -> dict[str, Any]:
        return dict(self.operation({"operation_type": "tail-logs", "payload": {"max_lines": 10}}))

    def log_probs(self, body: dict[str, Any]) -> Any:
        return self._json("log_probs", body)
