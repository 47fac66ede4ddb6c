"""CAP: the capacity object, its arithmetic, and queueing of jobs that do not fit."""

from __future__ import annotations

import time

import pytest

from conformance.drivers.raw import RawDriver
from conformance.fixtures import Variant
from conformance.inputs import valid_bodies
from conformance.jobs import SharedJob
from conformance.judging.checks import kit_form
from conformance.reporting.violations import Soft, expect
from conformance.target import Target
from contract.clauses import checks
from contract.models.catalog import TRAINING_MODELS
from contract.states import JobState, normalize_job_state

MODEL = TRAINING_MODELS[0]


def capacity(driver: RawDriver) -> dict:
    ans = driver.call("get_capacity")
    expect("CAP-FIELDS-1", ans.ok and isinstance(ans.body, dict), f"capacity: {ans}")
    body = dict(ans.body)
    return {
        "has_reservation": body.get("has_reservation", False),
        "max_total_gpus": body.get("max_total_gpus", 0),
        "in_use_gpus": body.get("in_use_gpus", 0),
        "available_gpus": body.get("available_gpus", 0),
        "raw": body,
    }


@checks("CAP-FIELDS-1")
def test_capacity_fields(gs_raw: RawDriver) -> None:
    """has_reservation (bool), max_total_gpus, in_use_gpus, available_gpus (ints >= 0)."""
    cap = capacity(gs_raw)
    soft = Soft()
    soft.expect(
        "CAP-FIELDS-1",
        isinstance(cap["has_reservation"], bool),
        f"has_reservation {cap['has_reservation']!r} is not a bool",
    )
    for name in ("max_total_gpus", "in_use_gpus", "available_gpus"):
        value = cap[name]
        soft.expect(
            "CAP-FIELDS-1",
            isinstance(value, int) and not isinstance(value, bool) and value >= 0,
            f"{name} {value!r} is not a non-negative int",
        )
    soft.expect(
        "CAP-FIELDS-1",
        any(
            k in cap["raw"]
            for k in ("max_total_gpus", "in_use_gpus", "available_gpus", "has_reservation")
        ),
        f"capacity answer holds none of the fields: {cap['raw']!r}",
    )
    soft.check()


def _gpus(n: int) -> dict:
    return valid_bodies.small_job(MODEL, n_gpus=n)


def _judge_available(cap: dict, soft: Soft) -> None:
    """available_gpus: never below 0, at most max_total - in_use (spec §5.4: schedulable
    capacity may cap it lower); the kit's is exactly max(0, max_total - in_use)."""
    free = max(0, cap["max_total_gpus"] - cap["in_use_gpus"])
    unreserved = cap["has_reservation"] is False and cap["max_total_gpus"] == 0
    soft.expect("CAP-COUNT-1", unreserved or 0 <= cap["available_gpus"] <= free,
                f"available_gpus {cap['available_gpus']} outside 0..max(0, max_total - in_use) = {free}: {cap['raw']}")
    if kit_form("CAP-COUNT-2"):
        soft.expect("CAP-COUNT-2", unreserved or cap["available_gpus"] == free,
                    f"available_gpus {cap['available_gpus']} != max(0, max_total - in_use) = {free}")


@checks("CAP-COUNT-1", "CAP-COUNT-2")
@pytest.mark.gs_fake_optional
def test_capacity_counts(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, gs_variant: Variant
) -> None:
    """in_use counts active jobs' GPUs; available is max_total - in_use at most, floored at 0."""
    soft = Soft()
    if not gs_target.embedded:
        cap = capacity(gs_raw)
        _judge_available(cap, soft)
        soft.expect(
            "CAP-COUNT-1",
            cap["in_use_gpus"] >= 2,
            f"in_use {cap['in_use_gpus']} < the session job's 2 GPUs",
        )
        soft.check()
        return
    driver = RawDriver(gs_variant("capacity-8", max_total_gpus=8))
    base = capacity(driver)["in_use_gpus"]
    made = []
    for n in (1, 3, 2):
        made.append((driver.create_job(_gpus(n)).field("job_id"), n))
        cap = capacity(driver)
        used = base + sum(g for _, g in made)
        soft.expect(
            "CAP-COUNT-1", cap["in_use_gpus"] == used, f"in_use {cap['in_use_gpus']} != {used}"
        )
        _judge_available(cap, soft)
    extra = driver.create_job(_gpus(4)).field("job_id")  # 10 > 8: pending, still counted
    cap = capacity(driver)
    soft.expect(
        "CAP-COUNT-1", cap["in_use_gpus"] == base + 10, f"a pending job's GPUs not counted: {cap}"
    )
    _judge_available(cap, soft)
    for job_id, _ in made:
        driver.cancel(job_id)
    driver.cancel(extra)
    soft.check()


@checks("CAP-QUEUE-1")
def test_jobs_queue_until_gpus_free(gs_target: Target, gs_variant: Variant) -> None:
    """A job that does not fit stays pending; it starts once the GPUs are freed."""
    driver = RawDriver(gs_variant("capacity-2", max_total_gpus=2))
    first = driver.create_job(_gpus(2)).field("job_id")
    ans, _ = driver.wait_job(first, timeout_s=30)
    expect(
        "CAP-QUEUE-1", normalize_job_state(ans.field("status")) == JobState.RUNNING, f"first job: {ans}"
    )
    second = driver.create_job(_gpus(2)).field("job_id")
    for _ in range(5):
        state = normalize_job_state(driver.get_job(second).field("status"))
        expect("CAP-QUEUE-1", state == JobState.PENDING, f"a job beyond capacity is {state}, not pending")
        time.sleep(0.02)
    driver.cancel(first)
    ans, seen = driver.wait_job(second, timeout_s=30)
    driver.cancel(second)
    expect(
        "CAP-QUEUE-1",
        normalize_job_state(ans.field("status")) == JobState.RUNNING,
        f"queued job did not start after GPUs were freed: {seen}",
    )


@checks("CANCEL-FREE-1")
@pytest.mark.gs_fake_optional
def test_cancel_frees_gpus(gs_target: Target, gs_variant: Variant) -> None:
    """A cancelled job's GPUs leave in_use_gpus."""
    if not gs_target.embedded:
        pytest.skip("needs an account no one else uses to count GPUs exactly (embedded fake only)")
    driver = RawDriver(gs_variant("capacity-8", max_total_gpus=8))
    before = capacity(driver)["in_use_gpus"]
    job_id = driver.create_job(_gpus(3)).field("job_id")
    driver.wait_job(job_id, timeout_s=30)
    during = capacity(driver)["in_use_gpus"]
    driver.cancel(job_id)
    driver.wait_job(job_id, until=(JobState.CANCELLED,), timeout_s=30)
    after = capacity(driver)["in_use_gpus"]
    expect(
        "CANCEL-FREE-1",
        during == before + 3 and after == before,
        f"in_use went {before} -> {during} -> {after} around a 3-GPU job's cancel",
    )
