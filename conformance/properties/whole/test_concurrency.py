"""Calls in flight together: every accepted call runs exactly once, none answers
a 5xx, and the steps among them count one each.

``gs-load`` judges the same clauses under many concurrent loops; this property is their
small, deterministic form. On the embedded fake its admin API holds the job's executor, so
the calls are certainly queued together, and the fake's execution counters say how often
each ran; against a URL the calls are sent back to back (a step takes longer to run than
the next submit takes to arrive) and the steps' ``global_steps`` are the evidence.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from conformance.drivers.raw import RawDriver
from conformance.fake_admin import admin_of
from conformance.fixtures import Variant
from conformance.jobs import SharedJob
from conformance.judging.checks import no_5xx
from conformance.judging.variants import variant_job
from conformance.reporting.violations import Soft
from conformance.target import Target
from contract.clauses import checks
from contract.states import RequestState
from fake_gs.testing.admin_api import AdminApi

#: The calls sent together: steps, with a save among them.
TOGETHER = ("step", "step", "save", "step")


def _global_steps(driver: RawDriver, job_id: str, soft: Soft) -> int:
    """The job's global_steps now, read off one step run alone."""
    _, settled = driver.run_json("step", job_id, {})
    body = settled.decoded() if settled is not None and settled.status == RequestState.DONE else {}
    soft.expect("STEP-COUNT-1", isinstance(body.get("global_steps"), int), f"a lone step: {settled}")
    return int(body.get("global_steps", -1))


def _executed(admin: AdminApi | None) -> Counter[str]:
    return Counter(admin.state()["requests"]["executed_by_op"]) if admin else Counter()


def _send_together(driver: RawDriver, job_id: str, admin: AdminApi | None) -> list[Any]:
    """Submit :data:`TOGETHER` while (on the fake) the job's executor is held."""
    if admin is not None:
        admin.hold(job_id)
    try:
        return [driver.call(name, json_body={}, job_id=job_id) for name in TOGETHER]
    finally:
        if admin is not None:
            admin.hold(job_id, False)


@checks("REQ-ONCE-1", "STEP-COUNT-1", "ERR-NO500-1")
@pytest.mark.gs_fake_optional
def test_calls_in_flight_together_run_once(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, gs_variant: Variant
) -> None:
    """Steps and a save in flight together: each accepted one ends done, runs once (the
    fake's counters), the steps count one each, and no submit answers 5xx."""
    if gs_target.embedded:
        driver, ops = variant_job(gs_variant("plain-hold"))
        admin: AdminApi | None = admin_of(driver.target)
        job_id = ops.job_id
    else:
        driver, admin, job_id = gs_raw, None, gs_job.job_id
    soft = Soft()
    base = _global_steps(driver, job_id, soft)
    before = _executed(admin)
    answers = _send_together(driver, job_id, admin)
    accepted: list[tuple[str, str]] = []
    for name, ans in zip(TOGETHER, answers, strict=True):
        no_5xx(ans, soft)
        rid = ans.field("request_id")
        if ans.ok and isinstance(rid, str):
            accepted.append((name, rid))
    steps: list[int] = []
    for name, rid in accepted:
        settled = driver.settle(job_id, rid)
        soft.expect("REQ-ONCE-1", settled.status == RequestState.DONE,
                    f"accepted {name} {rid} ended {settled.raw_status} ({settled.last})")
        if name == "step" and settled.status == RequestState.DONE:
            steps.append(int(settled.decoded().get("global_steps", -1)))
    wanted = list(range(base + 1, base + 1 + len(steps)))
    soft.expect("STEP-COUNT-1", sorted(steps) == wanted,
                f"{len(steps)} steps in flight together after global_steps {base} came back as {steps}")
    if admin is not None:
        ran = _executed(admin) - before
        calls = Counter(name for name, _ in accepted)
        soft.expect("REQ-ONCE-1", all(ran[op] == calls[op] for op in calls),
                    f"accepted calls {dict(calls)} executed {dict(ran)} times")
    soft.check()
