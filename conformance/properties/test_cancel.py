"""CANCEL: active jobs enter cancellation, repeats are idempotent, ended jobs conflict."""

from __future__ import annotations

import pytest

from conformance import bodies
from conformance.checks import refused
from conformance.driver_raw import RawDriver
from conformance.verdict import Soft, expect
from contract.clauses import checks
from contract.models_catalog import TRAINING_MODELS
from contract.states import JOB_CANCEL_IDEMPOTENT, JobState, normalize_job_state

MODEL = TRAINING_MODELS[0]


def _cancel_ok(driver: RawDriver, job_id: str, soft: Soft, cid: str, when: str) -> None:
    ans = driver.cancel(job_id)
    soft.expect(
        cid, ans.status in (200, 204), f"cancel of a {when} job answered {ans.status}: {ans.raw[:200]!r}"
    )
    soft.expect(
        cid,
        ans.body in ({}, None) or ans.raw.strip() in (b"", b"{}"),
        f"cancel answered {ans.raw[:200]!r}, not {{}}",
    )
    state = normalize_job_state(driver.get_job(job_id).field("status"))
    soft.expect(
        cid, state in JOB_CANCEL_IDEMPOTENT, f"after cancel the {when} job is {state}"
    )


@checks("CANCEL-ACTIVE-1")
def test_cancel_active_jobs(gs_target, gs_raw, gs_new_job, gs_variant):
    """Pending, placing, initializing and running jobs: 200 {} and cancellation."""
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
    blocker = full.create_job(bodies.small_job(MODEL, 2)).field("job_id")
    pending = full.create_job(bodies.small_job(MODEL, 2)).field("job_id")
    if normalize_job_state(full.get_job(pending).field("status")) == JobState.PENDING:
        _cancel_ok(full, pending, soft, "CANCEL-ACTIVE-1", JobState.PENDING)
    full.cancel(blocker)
    slow = RawDriver(gs_variant("slow-start", startup="polls:8"))
    for wanted in (JobState.PLACING, JobState.INITIALIZING):
        job_id = slow.create_job(bodies.small_job(MODEL)).field("job_id")
        ans, seen = slow.wait_job(job_id, until=(wanted, JobState.RUNNING), timeout_s=30)
        state = normalize_job_state(ans.field("status"))
        expect("CANCEL-ACTIVE-1", state == wanted, f"could not catch a {wanted} job: {seen}")
        _cancel_ok(slow, job_id, soft, "CANCEL-ACTIVE-1", wanted)
    soft.check()


@checks("CANCEL-IDEM-1")
def test_cancel_twice(gs_raw, gs_new_job):
    """Cancelling a cancelling/cancelled job again succeeds."""
    job_id, _ = gs_new_job(wait=False, why="CANCEL-IDEM-1")
    gs_raw.cancel(job_id)
    soft = Soft()
    ans = gs_raw.cancel(job_id)
    soft.expect(
        "CANCEL-IDEM-1",
        ans.status == 200,
        f"second cancel answered {ans.status}: {ans.raw[:200]!r}",
    )
    gs_raw.wait_job(job_id, until=(JobState.CANCELLED,), timeout_s=600)
    ans = gs_raw.cancel(job_id)
    soft.expect(
        "CANCEL-IDEM-1", ans.status == 200, f"cancel of a cancelled job answered {ans.status}"
    )
    soft.check()


@checks("CANCEL-CONFLICT-1")
@pytest.mark.parametrize("end", [JobState.TERMINATED, JobState.FAILED])
def test_cancel_ended_job_conflicts(gs_raw, gs_new_job, gs_admin, end):
    """Cancelling a terminated or failed job answers a conflict: 409, or the precondition
    statuses spec §5.5's "precondition/conflict-style error" also covers (400, 412)."""
    job_id, _ = gs_new_job()
    gs_admin.force(job_id, end, f"forced {end} by the conformance suite")
    soft = Soft()
    refused(gs_raw.cancel(job_id), soft, "CANCEL-CONFLICT-1", statuses=[409, 400, 412])
    soft.check()


@checks("CANCEL-UNKNOWN-1")
def test_cancel_unknown_job(gs_raw):
    """Cancelling a job nobody created answers 404."""
    soft = Soft()
    refused(
        gs_raw.cancel("00000000-0000-4000-8000-00000000beef"),
        soft,
        "CANCEL-UNKNOWN-1",
        statuses=[404],
    )
    soft.check()
