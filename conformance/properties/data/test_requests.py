"""REQ: asynchronous submission answers, unique ids, submit-order execution, unknown ids."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from conformance.drivers.raw import RawDriver, encode, request_chunks
from conformance.jobs import SharedJob
from conformance.judging.checks import refused, submitted
from conformance.reporting.violations import Soft, expect, present
from conformance.runtime import prop
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.states import RequestState


@checks("REQ-SUBMIT-1")
def test_submissions_answer_request_and_job(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """step, save, forward-backward, generate, generate-stream and async operations answer
    {request_id, job_id} with the caller's job id."""
    jid = gs_job.job_id
    fb = request_chunks({"args": [], "kwargs": {"input_ids": [[1, 2, 3]]}}, "forward_backward")
    answers = {
        "step": gs_raw.call("step", json_body={}, job_id=jid),
        "save": gs_raw.call("save", json_body={}, job_id=jid),
        "forward-backward": gs_raw.send_chunks("forward_backward", jid, fb)[-1],
        "generate": gs_raw.call("generate", data=encode({"prompts": ["hi"]}), job_id=jid),
        "generate-stream": gs_raw.call(
            "generate_stream", data=json.dumps({"prompts": ["hi"]}).encode(), job_id=jid
        ),
        "weight-sync": gs_raw.operation(jid, {"operation_type": "weight-sync", "payload": {}, "sub_job_type": "training"}),
    }
    soft = Soft()
    for what, ans in answers.items():
        rid = submitted(ans, jid, soft)
        if rid:
            gs_raw.settle(jid, rid)
        elif not ans.ok:
            soft.expect("REQ-SUBMIT-1", False, f"{what} was refused: {ans}")
    soft.check()


@checks("REQ-SUBMIT-2")
@prop(scale=0.2)
@given(n=st.integers(2, 6))
def test_request_ids_unique(gs_raw: RawDriver, gs_job: SharedJob, n: int) -> None:
    """Every submission gets its own request id."""
    jid = gs_job.job_id
    ids = [gs_raw.call("step", json_body={}, job_id=jid).field("request_id") for _ in range(n)]
    ids.append(gs_raw.call("save", json_body={}, job_id=jid).field("request_id"))
    for rid in ids:
        if isinstance(rid, str):
            gs_raw.settle(jid, rid)
    expect("REQ-SUBMIT-2", len(set(ids)) == len(ids) and None not in ids, f"request ids: {ids}")


@checks("REQ-ORDER-1")
@prop(scale=0.2)
@given(before=st.integers(1, 3), after=st.integers(1, 3))
def test_requests_run_in_submit_order(
    gs_raw: RawDriver, gs_job: SharedJob, before: int, after: int
) -> None:
    """Steps submitted back to back, a save among them: effects happen in submit order."""
    jid = gs_job.job_id
    _, first = gs_raw.run_json("step", jid, {})
    first = present("REQ-ORDER-1", first, "a step was refused")
    expect("REQ-ORDER-1", first.status == RequestState.DONE, "a step failed")
    start = int(first.decoded()["global_steps"])
    names = ["step"] * before + ["save"] + ["step"] * after
    ids = [gs_raw.call(n, json_body={}, job_id=jid).field("request_id") for n in names]
    results = [gs_raw.settle(jid, rid).decoded() for rid in ids]
    steps = [int(r["global_steps"]) for n, r in zip(names, results, strict=True) if n == "step"]
    expect(
        "REQ-ORDER-1",
        steps == list(range(start + 1, start + 1 + before + after)),
        f"steps after {start} came back as {steps}",
    )
    ckpt = str(results[before]["checkpoint_id"])
    listed = {
        c["checkpoint_id"]: c
        for c in gs_raw.call("list_checkpoints", job_id=jid).field("checkpoints")
    }
    if ckpt in listed:
        expect(
            "REQ-ORDER-1",
            listed[ckpt]["global_steps"] == start + before,
            f"save after {start + before} steps recorded {listed[ckpt]['global_steps']}",
        )


@checks("REQ-UNKNOWN-1")
@prop(scale=0.2)
@given(
    rid=st.one_of(st.uuids().map(str), st.text(st.sampled_from("abc123-"), min_size=1, max_size=20))
)
def test_unknown_request(gs_raw: RawDriver, gs_job: SharedJob, rid: str) -> None:
    """Polling a request id nobody issued answers 404 request_not_found."""
    soft = Soft()
    refused(
        gs_raw.poll(gs_job.job_id, rid),
        soft,
        "REQ-UNKNOWN-1",
        codes=[ErrorCode.REQUEST_NOT_FOUND],
        statuses=[404],
    )
    soft.check()
