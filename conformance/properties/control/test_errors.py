"""ERR: every refusal is the JSON envelope with the contract's status and code, never a
5xx, and changes nothing."""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.drivers.raw import Answer, RawDriver, request_chunks
from conformance.fixtures import NO_SUCH_JOB, Variant
from conformance.inputs import valid_bodies
from conformance.inputs.strategies import with_value
from conformance.jobs import SharedJob
from conformance.judging.checks import detail_locs, envelope, no_5xx, refused
from conformance.reporting.violations import Soft, expect
from conformance.runtime import prop
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.models.catalog import TRAINING_MODELS
from contract.routes import routes_for
from contract.wire import CHUNK_HEADER_ALLOWANCE
from fake_gs.testing.admin_api import AdminApi

MODEL = TRAINING_MODELS[0]
NOBODY = "00000000-0000-4000-8000-00000000dead"
PICKLE = pickle.dumps({"input_ids": [[1, 2, 3]]}, protocol=4)

#: family -> (call, acceptable codes)
Family = Callable[[RawDriver, str], Answer]
FAMILIES: dict[str, tuple[Family, tuple[str, ...]]] = {
    "malformed-frame": (
        lambda d, j: d.call("generate", data=b"\x10\x00\x00\x00\x00\x00\x00\x00{garbage", job_id=j),
        (ErrorCode.MALFORMED_FRAME,),
    ),
    "pickle": (
        lambda d, j: d.call("generate", data=PICKLE, job_id=j),
        (ErrorCode.LEGACY_PAYLOAD_REFUSED, ErrorCode.MALFORMED_FRAME),
    ),
    "wrong-content-type": (
        lambda d, j: d.call("step", data=b"{}", content_type="text/plain", job_id=j),
        (ErrorCode.UNSUPPORTED_MEDIA_TYPE,),
    ),
    "unknown-job": (lambda d, j: d.get_job(NOBODY), (ErrorCode.JOB_NOT_FOUND,)),
    "unknown-request": (lambda d, j: d.poll(j, str(uuid.uuid4())), (ErrorCode.REQUEST_NOT_FOUND,)),
    "unknown-checkpoint": (
        lambda d, j: d.call("export_checkpoint", job_id=j, checkpoint_id="gs-no-such-ckpt"),
        (ErrorCode.CHECKPOINT_NOT_FOUND,),
    ),
    "malformed-json": (
        lambda d, j: d.call("step", data=b"{", content_type="application/json", job_id=j),
        (ErrorCode.MALFORMED_JSON,),
    ),
    "validation": (
        lambda d, j: d.create_job({"sub_job_configs": []}),
        (ErrorCode.VALIDATION_FAILED, ErrorCode.INVALID_ARGUMENT),
    ),
    "unknown-operation": (
        lambda d, j: d.operation(j, {"operation_type": "gs-no-such-op", "payload": {}}),
        (ErrorCode.UNKNOWN_OPERATION_TYPE,),
    ),
    "restart-required": (
        lambda d, j: d.call(
            "forward_backward",
            job_id=j,
            data=request_chunks(
                {"args": [], "kwargs": {"input_ids": [[1, 2, 3]]}},
                "forward_backward",
                chunk_bytes=CHUNK_HEADER_ALLOWANCE + 64,
            )[1],
        ),
        (ErrorCode.CHUNK_GROUP_RESTART_REQUIRED,),
    ),
}


#: Families judged on a request that addresses no job.
NEEDS_NO_JOB = frozenset({"validation"})


@checks("ERR-ENVELOPE-1", "ERR-CODE-1", "ERR-STATUS-1")
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_refusals_use_the_envelope_and_code(
    gs_raw: RawDriver, request: pytest.FixtureRequest, family: str
) -> None:
    """Each bad-input family: the envelope, the contract's code and that code's status
    (every other refusal a property judges is held to the kit's status too). A refused
    create needs no job, so it is judged even when the session job could not be set up."""
    call, codes = FAMILIES[family]
    job_id = NO_SUCH_JOB if family in NEEDS_NO_JOB else request.getfixturevalue("gs_job").job_id
    ans = call(gs_raw, job_id)
    soft = Soft()
    refused(ans, soft, "ERR-CODE-1", codes=codes)
    soft.check()


@checks("ERR-ENVELOPE-1")
@pytest.mark.gs_fake_optional
def test_not_running_refusal_envelope(
    gs_target: Target, gs_variant: Variant, gs_job: SharedJob
) -> None:
    """The job-not-running refusal is enveloped too (seen on a job that is starting)."""
    if gs_target.embedded:
        driver = RawDriver(gs_variant("never-ready", startup="polls:100000"))
        job_id = driver.create_job(valid_bodies.small_job(MODEL)).field("job_id")
        answers = [driver.call("step", json_body={}, job_id=job_id)]
        driver.cancel(job_id)
    else:
        answers = [a for _, a in gs_job.not_running_probes]
        if not answers:
            pytest.skip("the session job was running when first seen")
    soft = Soft()
    for ans in answers:
        envelope(ans, soft)
    soft.check()


@checks("ERR-ENVELOPE-2")
@prop(scale=0.3)
@given(
    first=st.sampled_from(["n_gpus", "max_seq_len", "train_batch_size"]),
    second=st.sampled_from(["n_gpus", "max_seq_len"]),
)
def test_validation_detail_names_each_field(gs_raw: RawDriver, first: str, second: str) -> None:
    """Two bad fields: each is named, by a {loc, msg, type} detail entry (loc may start with
    "body") or else in the message."""
    body = valid_bodies.job(valid_bodies.training(MODEL), valid_bodies.sampling(MODEL))
    body = with_value(body, ("sub_job_configs", 0, "training_config", first), 0)
    body = with_value(body, ("sub_job_configs", 1, "inference_config", second), -1)
    ans = gs_raw.create_job(body)
    soft = Soft()
    refused(ans, soft, "ERR-ENVELOPE-2", statuses=[400])
    detail = ans.field("detail")
    soft.expect(
        "ERR-ENVELOPE-2",
        detail is None
        or (
            isinstance(detail, list)
            and all(isinstance(d, dict) and {"loc", "msg", "type"} <= set(d) for d in detail)
        ),
        f"detail is not a list of {{loc, msg, type}}: {detail!r}",
    )
    locs = [[str(p) for p in loc] for loc in detail_locs(ans)]
    message = str(ans.field("message", ""))
    for name, index in ((first, "0"), (second, "1")):
        soft.expect(
            "ERR-ENVELOPE-2",
            any(name in loc and index in loc for loc in locs) or (not locs and name in message),
            f"no detail loc (nor, without one, the message) names sub_job_configs[{index}].{name}: "
            f"{locs or message!r}",
        )
    soft.check()


def _route_call(gs_raw: RawDriver, job_id: str, name: str, data: bytes, ctype: str) -> Answer:
    # Every path parameter is given: a route's template takes the ones it names.
    return gs_raw.call(name, data=data or None, content_type=ctype, job_id=job_id,
                       request_id="gs-x", checkpoint_id="gs-x")


@checks("ERR-NO500-1")
@prop(scale=1.0)
@given(data=st.data())
def test_no_input_makes_a_5xx(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, data: st.DataObject
) -> None:
    """Random bytes, random JSON and random content types to every route: never a 5xx."""
    names = [
        r.name
        for r in routes_for(gs_target.server_profile)
        if r.name not in ("cancel_job", "delete_checkpoint")
    ]
    name = data.draw(st.sampled_from(names), label="route")
    body = data.draw(
        st.one_of(
            st.binary(max_size=64),
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                lambda c: (
                    st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3)
                ),
                max_leaves=8,
            ).map(lambda v: __import__("json").dumps(v).encode()),
        ),
        label="body",
    )
    ctype = data.draw(
        st.sampled_from(["application/json", "application/octet-stream", "text/plain", ""]),
        label="content_type",
    )
    ans = _route_call(gs_raw, gs_job.job_id, name, body, ctype)
    no_5xx(ans)


def _job_count(gs_raw: RawDriver) -> int:
    return len(gs_raw.call("list_jobs").field("jobs", []) or [])


def _checkpoints(gs_raw: RawDriver, job_id: str) -> list[str]:
    ans = gs_raw.call("list_checkpoints", job_id=job_id)
    return sorted(
        str(c.get("checkpoint_id"))
        for c in ans.field("checkpoints", []) or []
        if isinstance(c, dict)
    )


@checks("ERR-NOSTATE-1")
def test_refusals_change_nothing(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, gs_admin_or_none: AdminApi | None
) -> None:
    """Refused creates, saves, steps and frames leave jobs, checkpoints and steps as they were."""
    jid = gs_job.job_id
    soft = Soft()
    before_jobs = _job_count(gs_raw)
    bad_creates: list[dict[str, Any]] = [
        {"sub_job_configs": []},
        with_value(valid_bodies.small_job(MODEL), ("sub_job_configs", 0, "training_config", "n_gpus"), 0),
    ]
    for body in bad_creates:
        expect("ERR-NOSTATE-1", 400 <= gs_raw.create_job(body).status < 500, "bad create was not refused")
    soft.expect("ERR-NOSTATE-1", _job_count(gs_raw) == before_jobs, "a refused create added a job")
    before_ckpts = _checkpoints(gs_raw, jid)
    bad_save = gs_raw.call("save", json_body={"checkpoint_type": "gs-bogus"}, job_id=jid)
    soft.expect("ERR-NOSTATE-1", 400 <= bad_save.status < 500, f"bad save not refused: {bad_save}")
    soft.expect(
        "ERR-NOSTATE-1",
        _checkpoints(gs_raw, jid) == before_ckpts,
        "a refused save added a checkpoint",
    )
    _, first = gs_raw.run_json("step", jid, {})
    bad_step = gs_raw.call("step", json_body={"learning_rate": -1}, job_id=jid)
    soft.expect("ERR-NOSTATE-1", 400 <= bad_step.status < 500, f"bad step not refused: {bad_step}")
    _, second = gs_raw.run_json("step", jid, {})
    if first and second:
        a = (first.decoded() or {}).get("global_steps")
        b = (second.decoded() or {}).get("global_steps")
        if isinstance(a, int) and isinstance(b, int):
            soft.expect("ERR-NOSTATE-1", b == a + 1, f"steps went {a} -> {b} around a refused step")
    if gs_admin_or_none is not None:
        fb = gs_admin_or_none.fb_executions(jid)
        bad = gs_raw.call("forward_backward", data=b"\x00" * 32, job_id=jid)
        soft.expect("ERR-NOSTATE-1", 400 <= bad.status < 500, f"garbage frame not refused: {bad}")
        soft.expect(
            "ERR-NOSTATE-1",
            gs_admin_or_none.fb_executions(jid) == fb,
            "a refused frame executed forward-backward",
        )
    soft.check()


@pytest.fixture
def gs_admin_or_none(gs_target: Target) -> AdminApi | None:
    from conformance.fake_admin import admin_of

    return admin_of(gs_target) if gs_target.embedded else None
