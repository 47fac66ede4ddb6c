"""Jobs on embedded-fake variants and the delivery forms properties ask for.

Several properties need the server in a particular setting (results forced into small
chunks, inline, slow start-up); on the embedded fake a variant with that setting is
started, against a real server the target itself is used and the property skips when the
form it needs is not reached at the size it sends.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.drivers.ops import RawOps
from conformance.drivers.raw import RawDriver, Settled
from conformance.inputs import valid_bodies
from conformance.inputs.strategies import tensor
from contract.models.catalog import TRAINING_MODELS
from contract.wire import CHUNK_HEADER_ALLOWANCE

#: Small result chunks so a modest forward result spans many pages.
CHUNK_BYTES = CHUNK_HEADER_ALLOWANCE + 256


class JobRef:
    """The ids of another job than the session's, for :class:`~conformance.drivers.ops.RawOps`."""

    def __init__(
        self, job_id: str, training: str | None = None, sampling: str | None = None
    ) -> None:
        self.job_id = job_id
        self.training = training
        self.sampling = sampling


def variant_job(target: Any, seed: int = 7) -> tuple[RawDriver, RawOps]:
    """A fresh running job (training + sampling, fixed seed) on ``target``."""
    driver = RawDriver(target)
    body = valid_bodies.job(valid_bodies.training(TRAINING_MODELS[0]), valid_bodies.sampling(TRAINING_MODELS[0]))
    for sub in body["sub_job_configs"]:
        sub["seed"] = seed
    job_id = driver.create_job(body).field("job_id")
    driver.wait_job(job_id, timeout_s=30)
    return driver, RawOps(driver, JobRef(job_id))


def forward_body(batch: int, seq: int) -> dict[str, Any]:
    return {"args": [], "kwargs": {"input_ids": tensor((batch, seq), "int64", 3)}, "meta": {}}


def forward_request(ops: RawOps, body: dict[str, Any]) -> Settled:
    ops.forward_op(body)
    return ops.settled


def source(target: Any, variant: Any, ops: Any, form: str) -> tuple[RawDriver, RawOps]:
    """(driver, ops) whose results come ``inline`` or in ``chunks``."""
    if not target.embedded:
        return ops.d, ops
    if form == "inline":
        return variant_job(variant("inline", result_delivery="inline"))
    return variant_job(
        variant("chunks-small", result_delivery="chunks", result_chunk_bytes=CHUNK_BYTES)
    )


def need(ops: RawOps, form: str) -> None:
    """Skip when the last result came in another form than the property judges."""
    if ops.last is not None and ops.last.form != form:
        pytest.skip(
            f"the server delivered this result {ops.last.form}; {form} delivery is not reached "
            "at this size (the embedded fake's variants force it)"
        )
