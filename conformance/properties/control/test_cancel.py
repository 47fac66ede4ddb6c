"""CANCEL: active jobs enter cancellation, repeats are idempotent, ended jobs conflict, a
cancel takes no body."""

from __future__ import annotations

import pytest

from conformance.drivers.ops import RawOps
from conformance.drivers.raw import Answer, RawDriver
from conformance.fixtures import NewJob, Variant
from conformance.inputs import valid_bodies
from conformance.jobs import SharedJob
from conformance.judging.checks import cancel_answer, refused, refused_or_taken
from conformance.reporting.violations import Soft, expect
from conformance.target import Target
from contract.clauses import checks
from contract.models.catalog import TRAINING_MODELS
from contract.states import JOB_CANCEL_IDEMPOTENT, JobState, normalize_job_state
from fake_gs.testing.admin_api import AdminApi

MODEL = TRAINING_MODELS[0]


def _cancel_ok(driver: RawDriver, job_id: str, soft: Soft, cid: str, when: str) -> None:
    cancel_answer(driver.cancel(job_id), soft, cid, when)
    state = normalize_job_state(driver.get_job(job_id).field("status"))
    soft.expect(
        cid, state in JOB_CANCEL_IDEMPOTENT, f"after cancel the {when} job is {state}"
    )


@checks("CANCEL-ACTIVE-1", "CANCEL-ACTIVE-2", "CANCEL-BODY-1", "CANCEL-ANSWER-1")
@pytest.mark.gs_fake_optional
def test_cancel_active_jobs(
    gs_target: Target, gs_raw: RawDriver, gs_new_job: NewJob, gs_variant: Variant
) -> None:
    """Pending, placing and running jobs (and initializing ones, the kit's): a 2xx and
    cancellation."""
    soft = Soft()
    if not gs_target.embedded:
        job_id, _ = gs_new_job(wait=False, why="CANCEL-ACTIVE-1")
        state = normalize_job_state(gs_raw.get_job(job_id).field("status"))
        _cancel_ok(gs_raw, job_id, soft, "CANCEL-ACTIVE-1", state)
        soft.check()
        return
    job_id, _ = gs_new_job()
    _cancel_ok(gs_raw, job_id, soft, "CANCEL-ACTIVE-1", JobState.RUNNING)
    full = RawDriver(gs_variant("capacity-2", max_total_gpus=2))
    blocker = full.create_job(valid_bodies.small_job(MODEL, 2)).field("job_id")
    pending = full.create_job(valid_bodies.small_job(MODEL, 2)).field("job_id")
    if normalize_job_state(full.get_job(pending).field("status")) == JobState.PENDING:
        _cancel_ok(full, pending, soft, "CANCEL-ACTIVE-1", JobState.PENDING)
    full.cancel(blocker)
    slow = RawDriver(gs_variant("slow-start", startup="polls:8"))
    for wanted in (JobState.PLACING, JobState.INITIALIZING):
        job_id = slow.create_job(valid_bodies.small_job(MODEL)).field("job_id")
        ans, seen = slow.wait_job(job_id, until=(wanted, JobState.RUNNING), timeout_s=30)
        state = normalize_job_state(ans.field("status"))
        cid = "CANCEL-ACTIVE-2" if wanted == JobState.INITIALIZING else "CANCEL-ACTIVE-1"
        expect(cid, state == wanted, f"could not catch a {wanted} job: {seen}")
        _cancel_ok(slow, job_id, soft, cid, wanted)
    soft.check()


@checks("CANCEL-IDEM-1", "CANCEL-ANSWER-1")
def test_cancel_twice(gs_raw: RawDriver, gs_new_job: NewJob) -> None:
    """Cancelling a cancelling/cancelled job again is an idempotent success (a 2xx)."""
    job_id, _ = gs_new_job(wait=False, why="CANCEL-IDEM-1")
    gs_raw.cancel(job_id)
    soft = Soft()
    cancel_answer(gs_raw.cancel(job_id), soft, "CANCEL-IDEM-1", JobState.CANCELLING)
    gs_raw.wait_job(job_id, until=(JobState.CANCELLED,), timeout_s=600)
    cancel_answer(gs_raw.cancel(job_id), soft, "CANCEL-IDEM-1", JobState.CANCELLED)
    soft.check()


@checks("CANCEL-CONFLICT-1")
@pytest.mark.parametrize("end", [JobState.TERMINATED, JobState.FAILED])
def test_cancel_ended_job_conflicts(
    gs_raw: RawDriver, gs_new_job: NewJob, gs_admin: AdminApi, end: JobState
) -> None:
    """Cancelling a terminated or failed job answers a conflict: 409, or the precondition
    statuses spec §5.5's "precondition/conflict-style error" also covers (400, 412)."""
    job_id, _ = gs_new_job()
    gs_admin.force(job_id, end, f"forced {end} by the conformance suite")
    soft = Soft()
    refused(gs_raw.cancel(job_id), soft, "CANCEL-CONFLICT-1", statuses=[409, 400, 412])
    soft.check()


@checks("CANCEL-BODY-2")
def test_cancel_and_export_with_a_body_are_refused(
    gs_target: Target,
    gs_raw: RawDriver,
    gs_ops: RawOps,
    gs_job: SharedJob,
    request: pytest.FixtureRequest,
) -> None:
    """A cancel or an export carrying a body is refused by the fake (spec §5.5, §5.8: no
    body); a server may take it as the call without the body instead, and then answers as
    that call does. Against a URL only the export is tried (a cancel taken ends a job)."""
    soft = Soft()
    if gs_target.embedded:  # the extra job is asked for here only: a URL run plans none
        job_id, _ = request.getfixturevalue("gs_new_job")()
        ans = gs_raw.call("cancel_job", json_body={"reason": "x"}, job_id=job_id)
        refused_or_taken(ans, soft, "CANCEL-BODY-2", [400], lambda _: "")  # any 2xx: a cancel's
        gs_raw.cancel(job_id)
    ckpt = str(gs_ops.save().get("checkpoint_id"))
    ans = gs_raw.call("export_checkpoint", json_body={}, job_id=gs_job.job_id, checkpoint_id=ckpt)

    def an_export(taken: Answer) -> str:
        files = taken.field("files") if taken.is_json else None
        if taken.field("checkpoint_id") != ckpt or not isinstance(files, list):
            return f"the answer is not the export of {ckpt} (checkpoint_id and files, spec §5.8)"
        return ""

    refused_or_taken(ans, soft, "CANCEL-BODY-2", [400], an_export)
    soft.check()


@checks("CANCEL-UNKNOWN-1")
def test_cancel_unknown_job(gs_raw: RawDriver) -> None:
    """Cancelling a job nobody created answers 404."""
    soft = Soft()
    refused(
        gs_raw.cancel("00000000-0000-4000-8000-00000000beef"),
        soft,
        "CANCEL-UNKNOWN-1",
        statuses=[404],
    )
    soft.check()
