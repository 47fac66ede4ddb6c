"""OP: the operation envelope: routing hints, every operation type, inline vs polled."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.drivers.ops import RawOps
from conformance.drivers.raw import Answer, RawDriver
from conformance.fixtures import Variant, Via
from conformance.inputs import valid_bodies
from conformance.inputs.strategies import forward_payloads
from conformance.jobs import SharedJob
from conformance.judging.checks import kit_form, names_field, refused
from conformance.reporting.violations import Soft, expect
from conformance.runtime import prop
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.models import OPERATION_TYPES
from contract.models.catalog import TRAINING_MODELS
from contract.shapes import check_forward_result
from contract.states import JobState, RequestState, normalize_job_state, normalize_request_state

VIA = ["raw", "client"]


def op(
    gs_raw: RawDriver, job_id: str, operation_type: str, payload: dict | None = None, **hints: Any
) -> Answer:
    return gs_raw.operation(
        job_id, {"operation_type": operation_type, "payload": payload or {}, **hints}
    )


def inline(ans: Answer, soft: Soft, cid: str) -> dict:
    soft.expect(cid, ans.ok, f"{ans}")
    soft.expect(
        cid,
        not ans.field("request_id"),
        f"expected an inline result, got a request id: {ans.body!r}",
    )
    return ans.body if isinstance(ans.body, dict) else {}


@checks("OP-UNKNOWN-1")
@prop(scale=0.3)
@given(kind=st.text(min_size=1, max_size=20).filter(lambda t: t not in OPERATION_TYPES))
def test_unknown_operation(gs_raw: RawDriver, gs_job: SharedJob, kind: str) -> None:
    """An operation_type the contract does not list answers 400 unknown_operation_type."""
    soft = Soft()
    refused(
        op(gs_raw, gs_job.job_id, kind),
        soft,
        "OP-UNKNOWN-1",
        codes=[ErrorCode.UNKNOWN_OPERATION_TYPE],
        statuses=[400],
    )
    soft.check()


@checks("OP-ROUTE-1")
@pytest.mark.parametrize("kind", ["tail-logs", "reset-prefix-cache"])
def test_conflicting_hints(gs_raw: RawDriver, gs_job: SharedJob, kind: str) -> None:
    """sub_job_id and sub_job_type naming different sub-jobs answer 400 routing_conflict."""
    soft = Soft()
    ans = op(gs_raw, gs_job.job_id, kind, sub_job_id=gs_job.training, sub_job_type="sampling")
    refused(ans, soft, "OP-ROUTE-1", codes=[ErrorCode.ROUTING_CONFLICT], statuses=[400])
    soft.check()


@checks("OP-ROUTE-2")
@pytest.mark.parametrize(
    "kind,sub_type", [("reset-prefix-cache", "sampling"), ("tail-logs", "training")]
)
def test_type_hint_routes(gs_raw: RawDriver, gs_job: SharedJob, kind: str, sub_type: str) -> None:
    """sub_job_type alone routes when the job has exactly one sub-job of that type."""
    soft = Soft()
    inline(op(gs_raw, gs_job.job_id, kind, sub_job_type=sub_type), soft, "OP-ROUTE-2")
    soft.check()


@checks("OP-ROUTE-3")
@pytest.mark.parametrize(
    "sub", ["{job}:training:7", "{job}:sampling:3", "nope", "{other}:training:0"]
)
def test_unknown_sub_job(gs_raw: RawDriver, gs_job: SharedJob, sub: str) -> None:
    """An unknown sub_job_id answers 400 or 404 with the envelope."""
    sub_id = sub.format(job=gs_job.job_id, other="00000000-0000-4000-8000-000000000001")
    soft = Soft()
    refused(
        op(gs_raw, gs_job.job_id, "tail-logs", sub_job_id=sub_id),
        soft,
        "OP-ROUTE-3",
        statuses=[400, 404],
    )
    soft.check()


@checks("OP-FORWARD-2")
@prop(scale=0.5)
@given(payload=forward_payloads())
def test_forward_operation(gs_ops: RawOps, payload: dict[str, Any]) -> None:
    """forward: base64 frame in, request id out, model_outputs.logprobs [B, S] when done
    (proposed: spec §7.1 says today's forward is not end-to-end)."""
    result = gs_ops.forward_op(payload)
    soft = Soft()
    soft.extend("OP-FORWARD-2", check_forward_result(payload, result))
    soft.check()


@checks("OP-FORWARD-1")
def test_forward_over_60_mib_is_refused(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """A forward whose frame is over 60 MiB (a valid DSSST1 frame: a small batch plus a
    60 MiB + 1 byte blob) is refused with a 4xx, with no request to poll."""
    ans = gs_raw.call(
        "operation", job_id=gs_job.job_id, data=oversize_forward_body(), content_type="application/json"
    )
    soft = Soft()
    refused(ans, soft, "OP-FORWARD-1")
    soft.expect("OP-FORWARD-1", not ans.field("request_id"), f"it was scheduled: {ans.body!r}")
    soft.check()


def oversize_forward_body() -> bytes:
    """The JSON operation envelope around a base64 DSSST1 frame of just over 60 MiB."""
    import base64
    import json

    import torch

    from contract import wire
    from contract.limits import MAX_BODY_BYTES

    batch = {
        "args": (),
        "kwargs": {"input_ids": torch.ones(1, 4, dtype=torch.int64)},
        "blob": torch.zeros(MAX_BODY_BYTES + 1, dtype=torch.uint8),
    }
    frame = wire.dumps(batch, metadata=wire.standard_request_metadata())
    head = json.dumps({"operation_type": "forward", "payload": {
        "content_type": "application/octet-stream", "payload_b64": "@"}}).encode()
    before, after = head.split(b"@")
    return before + base64.b64encode(frame) + after


@checks("OP-WSYNC-1")
@pytest.mark.parametrize("via", VIA)
def test_weight_sync(gs_raw: RawDriver, gs_job: SharedJob, gs_via: Via, via: str) -> None:
    """weight-sync answers a request id and resolves to completion metadata (an object)."""
    soft = Soft()
    if via == "raw":
        ans = op(
            gs_raw,
            gs_job.job_id,
            "weight-sync",
            {"source_sub_job_id": gs_job.training, "target_sub_job_ids": [gs_job.sampling]},
            sub_job_id=gs_job.training,
        )
        rid = ans.field("request_id")
        soft.expect("OP-WSYNC-1", ans.ok and isinstance(rid, str), f"weight-sync answered {ans}")
        soft.check()
        settled = gs_raw.settle(gs_job.job_id, rid)
        soft.expect(
            "OP-WSYNC-1", settled.status == RequestState.DONE, f"weight-sync ended {settled.raw_status}"
        )
        soft.expect("OP-WSYNC-1", isinstance(settled.decoded(), dict), f"result {settled.result!r}")
    else:
        result = gs_via(via).weight_sync()
        soft.expect("OP-WSYNC-1", isinstance(result, dict), f"result {result!r}")
    soft.check()


@checks("OP-ROUTER-1", "OP-ROUTER-2")
def test_router_replay_ops_inline(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """router-replay-discard answers inline; bootstrap-router-replay inline or with a
    request id that then completes (spec §7; the kit's: inline)."""
    replay = {"source_sub_job_id": gs_job.sampling, "target_sub_job_id": gs_job.training}
    soft = Soft()
    # String sample ids, as spec §7.5 shows them (an integer id is an input it never shows).
    inline(op(gs_raw, gs_job.job_id, "router-replay-discard", {"sample_ids": ["s1", "s2"]},
              sub_job_id=gs_job.sampling), soft, "OP-ROUTER-1")
    ans = op(gs_raw, gs_job.job_id, "bootstrap-router-replay", replay, sub_job_id=gs_job.training)
    soft.expect("OP-ROUTER-1", ans.ok, f"bootstrap-router-replay: {ans}")
    rid = ans.field("request_id")
    if isinstance(rid, str) and rid:
        settled = gs_raw.settle(gs_job.job_id, rid)
        soft.expect("OP-ROUTER-1", settled.status == RequestState.DONE,
                    f"the polled bootstrap ended {settled.raw_status}")
    if kit_form("OP-ROUTER-2"):
        soft.expect("OP-ROUTER-2", not rid, f"the kit's bootstrap answers inline, got {ans.body!r}")
    soft.check()


@checks("OP-RESET-1")
def test_reset_prefix_cache(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """reset-prefix-cache with sub_job_type sampling and no id answers inline."""
    soft = Soft()
    inline(
        op(
            gs_raw,
            gs_job.job_id,
            "reset-prefix-cache",
            {"drain": True, "timeout_s": 60.0, "retry_interval_s": 0.1},
            sub_job_type="sampling",
        ),
        soft,
        "OP-RESET-1",
    )
    soft.check()


@checks("OP-CANCEL-1", "OP-CANCEL-3")
def test_cancel_request(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """cancel-request acknowledges inline; a request already done stays done. The request
    is settled first so the run is the same every time (a recorded run replays as it was);
    test_strict holds the embedded fake's executor to cancel one that has not started."""
    soft = Soft()
    jid = gs_job.job_id
    rid = gs_raw.call("step", json_body={}, job_id=jid).field("request_id")
    gs_raw.settle(jid, rid)
    ans = op(gs_raw, jid, "cancel-request", {"request_id": rid})
    soft.expect("OP-CANCEL-3", ans.ok, f"cancel-request with no sub-job hint: {ans}")
    ack = inline(ans, soft, "OP-CANCEL-1")
    soft.check()
    final = gs_raw.settle(jid, rid).final_body
    state = normalize_request_state(final.get("status"))
    soft.expect("OP-CANCEL-1", state in (RequestState.CANCELLED, RequestState.DONE), f"after cancel-request: {state}; ack {ack!r}")
    again = gs_raw.poll(jid, rid).body or {}
    soft.expect(
        "OP-CANCEL-1",
        normalize_request_state(again.get("status")) == state,
        "the cancelled request's status changed",
    )
    soft.check()


def _judge_logs(body: dict, soft: Soft) -> None:
    soft.expect(
        "OP-LOGS-1", isinstance(body.get("entries"), list), f"entries {body.get('entries')!r}"
    )
    soft.expect("OP-LOGS-1", "next_cursor" in body, "tail-logs answer lacks next_cursor")
    soft.expect("OP-LOGS-1", isinstance(body.get("eof"), bool), f"eof {body.get('eof')!r}")


@checks("OP-LOGS-1", "OP-LOGS-2")
@pytest.mark.gs_fake_optional
def test_tail_logs(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, gs_variant: Variant
) -> None:
    """tail-logs answers {entries, next_cursor, eof} inline (spec §7.8), also while the job
    is placing (spec §7: the one operation allowed then)."""
    soft = Soft()
    # Naming its sub-job, as spec §7.8 shows: the session job has several (OP-HINT-1).
    running = op(gs_raw, gs_job.job_id, "tail-logs", {"max_lines": 5}, sub_job_id=gs_job.training)
    _judge_logs(inline(running, soft, "OP-LOGS-1"), soft)
    if gs_target.embedded:
        driver = RawDriver(gs_variant("slow-start", startup="polls:8"))
        job_id = driver.create_job(valid_bodies.small_job(TRAINING_MODELS[0])).field("job_id")
        ans, seen = driver.wait_job(job_id, until=(JobState.PLACING, JobState.RUNNING), timeout_s=30)
        expect(
            "OP-LOGS-2",
            normalize_job_state(ans.field("status")) == JobState.PLACING,
            f"no placing state: {seen}",
        )
        placing = op(driver, job_id, "tail-logs", {"max_lines": 5})
        driver.cancel(job_id)
    else:
        seen_placing = gs_job.placing_tail_logs
        if seen_placing is None:
            soft.check()
            pytest.skip("the session job was never seen placing (or was reused)")
        placing = seen_placing
    soft.expect("OP-LOGS-2", placing.ok, f"tail-logs while placing: {placing}")
    _judge_logs(inline(placing, soft, "OP-LOGS-1"), soft)
    soft.check()


@checks("OP-RUNNING-1")
@pytest.mark.gs_fake_optional
def test_operations_need_a_running_job(
    gs_target: Target, gs_job: SharedJob, gs_variant: Variant
) -> None:
    """An operation other than tail-logs on a job that is not running yet is refused."""
    soft = Soft()
    if gs_target.embedded:
        driver = RawDriver(gs_variant("never-ready", startup="polls:100000"))
        job_id = driver.create_job(valid_bodies.small_job(TRAINING_MODELS[0])).field("job_id")
        answers = [op(driver, job_id, kind, payload, sub_job_type="training") for kind, payload in (
            ("weight-sync", {}), ("router-replay-discard", {"sample_ids": ["s"]}))]
        driver.cancel(job_id)
    else:
        answers = [a for _, a in gs_job.not_running_ops]
        if not answers:
            pytest.skip("the session job was running when first seen: no operation before running")
    for ans in answers:
        refused(ans, soft, "OP-RUNNING-1")
    soft.check()


@checks("OP-TYPE-1")
@pytest.mark.parametrize("envelope", [{"payload": {}}, {"operation_type": None, "payload": {}}])
def test_operation_type_required(
    gs_raw: RawDriver, gs_job: SharedJob, envelope: dict[str, Any]
) -> None:
    """An operation envelope without operation_type is refused."""
    soft = Soft()
    refused(gs_raw.operation(gs_job.job_id, envelope), soft, "OP-TYPE-1", statuses=[400])
    soft.check()


MISSING = [
    ("cancel-request", {}, "request_id"),
    ("bootstrap-router-replay", {"target_sub_job_id": "{training}"}, "source_sub_job_id"),
    ("bootstrap-router-replay", {"source_sub_job_id": "{sampling}"}, "target_sub_job_id"),
    ("router-replay-discard", {}, "sample_ids"),
    ("forward", {"content_type": "application/octet-stream"}, "payload_b64"),
]


@checks("OP-PAYLOAD-1")
@pytest.mark.parametrize("kind,payload,field", MISSING)
def test_missing_payload_field(
    gs_raw: RawDriver, gs_job: SharedJob, kind: str, payload: dict[str, Any], field: str
) -> None:
    """A payload missing a required field answers 400 naming it."""
    filled = {
        k: v.format(training=gs_job.training, sampling=gs_job.sampling) for k, v in payload.items()
    }
    ans = op(gs_raw, gs_job.job_id, kind, filled)
    soft = Soft()
    refused(ans, soft, "OP-PAYLOAD-1", statuses=[400])
    soft.expect(
        "OP-PAYLOAD-1",
        names_field(ans, field),
        f"the refusal does not name {field!r}: {ans.body!r}",
    )
    soft.check()
