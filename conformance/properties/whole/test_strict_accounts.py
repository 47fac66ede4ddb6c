"""STRICT: per-account capacity and the cancel-request operation as the service keeps them
(the rest of the strict properties: ``test_strict``)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from conformance.drivers.raw import RawDriver
from conformance.fake_admin import admin_of
from conformance.fixtures import Variant
from conformance.inputs import valid_bodies
from conformance.jobs import SharedJob
from conformance.judging.variants import variant_job
from conformance.reporting.violations import Soft, expect, fail
from conformance.target import Target
from contract.clauses import checks
from contract.states import (
    JOB_HOLDS_GPUS,
    JobState,
    RequestState,
    normalize_job_state,
    normalize_request_state,
)

LORA = {"peft_type": "Lora", "r": 8, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}


def _gpus(job: Mapping) -> int:
    total = 0
    for sub in job.get("sub_jobs") or []:
        cfg = sub.get("training_config") or sub.get("inference_config") or {}
        total += int(cfg.get("n_gpus") or 0) if isinstance(cfg, Mapping) else 0
    return total


def _own_gpus(driver: RawDriver) -> int:
    """GPUs of the account's active jobs, read from each job object: a list entry need only
    carry job_id, status and sub_jobs (spec §5.3), not their configs."""
    jobs = driver.call("list_jobs").field("jobs") or []
    active = [j.get("job_id") for j in jobs if normalize_job_state(j.get("status")) in JOB_HOLDS_GPUS]
    return sum(_gpus(driver.get_job(str(job_id)).body or {}) for job_id in active)


@checks("CAP-ACCOUNT-1")
@pytest.mark.gs_fake_optional
def test_capacity_is_per_account(
    gs_target: Target, gs_raw: RawDriver, gs_raw2: RawDriver, gs_job: SharedJob, gs_variant: Variant
) -> None:
    """The second account's in_use_gpus counts its own jobs only; its ceiling is its own."""
    cap = gs_raw2.call("get_capacity").body or {}
    own = _own_gpus(gs_raw2)
    expect("CAP-ACCOUNT-1", cap.get("in_use_gpus", 0) == own,
           f"in_use_gpus {cap.get('in_use_gpus')} of an account whose jobs use {own} (another account's job runs)")
    if not gs_target.embedded:
        return
    v = gs_variant("capacity-2", max_total_gpus=2)
    a, b = RawDriver(v), RawDriver(v, token=v.token2)
    first = a.create_job(valid_bodies.small_job(valid_bodies.TRAINING_MODEL, n_gpus=2)).field("job_id")
    a.wait_job(first, timeout_s=30)
    theirs = b.create_job(valid_bodies.small_job(valid_bodies.TRAINING_MODEL, n_gpus=2)).field("job_id")
    ans, seen = b.wait_job(theirs, timeout_s=30)
    a.cancel(first)
    b.cancel(theirs)
    expect("CAP-ACCOUNT-1", normalize_job_state(ans.field("status")) == JobState.RUNNING,
           f"another account's 2 GPUs held this account's job back: {seen}")


# --- cancel-request ------------------------------------------------------------------------


def _steps(driver: RawDriver, job_id: str) -> int:
    _, settled = driver.run_json("step", job_id, valid_bodies.step())
    body = settled.decoded() if settled is not None else None
    if not isinstance(body, Mapping):
        fail("OP-CANCEL-2", f"step result: {body!r}")
    return int(body.get("global_steps", -1))


@checks("OP-CANCEL-2")
@pytest.mark.gs_fake_optional
def test_cancel_request_of_a_request_that_ran(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, gs_variant: Variant
) -> None:
    """A request that already ran is not cancelled: cancelled false, it ends done, its effect
    stays. A server acknowledging a cancel must keep the request from running."""
    if gs_target.embedded:  # results gated by latency: it ran, its answer still reads running
        driver, ops = variant_job(gs_variant("slow-requests-3", latency="polls:3"))
        jid = ops.job_id
    else:
        driver, jid = gs_raw, gs_job.job_id
    base = _steps(driver, jid)
    first = driver.call("step", json_body={}, job_id=jid).field("request_id")
    after = _steps(driver, jid)
    ack = driver.operation(jid, {"operation_type": "cancel-request", "payload": {"request_id": first}}).body or {}
    end = normalize_request_state(driver.settle(jid, first).final_body.get("status"))
    ran = after - base == 2  # `first` ran before `after` (requests of a job run in order)
    soft = Soft()
    if ack.get("cancelled") is True:
        soft.expect("OP-CANCEL-2", not ran, f"cancel-request said cancelled but the step ran ({base} -> {after})")
        soft.expect("OP-CANCEL-2", end == RequestState.CANCELLED, f"acknowledged cancel, request ended {end}")
    else:
        soft.expect("OP-CANCEL-2", end in (RequestState.DONE, RequestState.FAILED), f"not cancelled, yet it ended {end}")
    soft.check()


@checks("OP-CANCEL-1", "OP-CANCEL-2")
def test_cancel_request_before_it_starts(gs_target: Target, gs_variant: Variant) -> None:
    """A request queued behind a held executor is cancelled and never runs (embedded fake:
    its admin API holds the job's executor so the request certainly has not started)."""
    driver, ops = variant_job(gs_variant("plain-hold"))
    admin, jid = admin_of(driver.target), ops.job_id
    base = _steps(driver, jid)
    admin.hold(jid)
    queued = driver.call("step", json_body={}, job_id=jid).field("request_id")
    ack = driver.operation(jid, {"operation_type": "cancel-request", "payload": {"request_id": queued}})
    admin.hold(jid, False)
    soft = Soft()
    soft.expect("OP-CANCEL-1", ack.ok and not ack.field("request_id"), f"cancel-request: {ack}")
    soft.expect("OP-CANCEL-2", ack.field("cancelled") is True, f"a queued request was not cancelled: {ack.body!r}")
    end = normalize_request_state(driver.settle(jid, queued).final_body.get("status"))
    soft.expect("OP-CANCEL-1", end == RequestState.CANCELLED, f"the cancelled request ended {end}")
    soft.expect("OP-CANCEL-2", _steps(driver, jid) == base + 1, "the cancelled step ran anyway")
    soft.check()


# --- client-chosen job ids -----------------------------------------------------------------
