"""IDEM: the proposed Idempotency-Key on data-plane POSTs, judged through the raw driver.

Everything here is observable on a real server too: a step's ``global_steps`` says how
often steps ran, so "the repeat executed nothing" needs no admin API.
"""

from __future__ import annotations

import uuid
from typing import Any

from conformance.drivers.raw import RawDriver
from conformance.jobs import SharedJob
from conformance.judging.checks import submitted
from conformance.reporting.violations import Soft, expect, present
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.idempotency import IDEMPOTENCY_KEY_HEADER


def _key() -> str:
    return str(uuid.uuid4())


def _step(gs_raw: Any, job_id: str, key: str | None, body: Any = None) -> Any:
    headers = {IDEMPOTENCY_KEY_HEADER: key} if key else None
    return gs_raw.call("step", json_body={} if body is None else body, headers=headers,
                       job_id=job_id)


def _steps_after(gs_raw: Any, job_id: str, rid: str) -> int | None:
    result = gs_raw.settle(job_id, rid).result
    steps = result.get("global_steps") if isinstance(result, dict) else None
    return steps if isinstance(steps, int) else None


def _run_step(
    gs_raw: Any, job_id: str, key: str | None, soft: Soft, cid: str
) -> tuple[str | None, int | None]:
    rid = submitted(_step(gs_raw, job_id, key), job_id, soft, cid)
    return rid, (_steps_after(gs_raw, job_id, rid) if rid else None)


@checks("IDEM-KEY-1", "IDEM-KEY-2", "IDEM-KEY-5")
def test_repeated_key_answers_the_original(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """A repeat (after another keyed call) gets the original request_id and runs nothing."""
    job, key = gs_job.job_id, _key()
    soft = Soft()
    first = _step(gs_raw, job, key)
    rid = submitted(first, job, soft, "IDEM-KEY-2")
    soft.check()
    rid = present("IDEM-KEY-2", rid, f"the submission has no request id: {first}")
    soft.expect("IDEM-KEY-5", first.headers.get(IDEMPOTENCY_KEY_HEADER) == key,
                f"the keyed answer does not echo {IDEMPOTENCY_KEY_HEADER}: {dict(first.headers)}")
    steps = _steps_after(gs_raw, job, rid)
    other_rid, other_steps = _run_step(gs_raw, job, _key(), soft, "IDEM-KEY-2")
    repeat = _step(gs_raw, job, key)
    soft.expect("IDEM-KEY-2", repeat.ok and repeat.field("request_id") == rid,
                f"repeat of key answered {repeat} instead of request_id {rid} "
                f"(the other keyed call was {other_rid})")
    _, probe = _run_step(gs_raw, job, None, soft, "IDEM-KEY-1")
    soft.expect("IDEM-KEY-1",
                steps is not None and other_steps is not None and probe == other_steps + 1,
                f"global_steps {steps} (keyed), {other_steps} (another key), then {probe} after a "
                "repeat of the first key and one unkeyed step: the repeat ran a step")
    soft.check()


@checks("IDEM-KEY-3")
def test_key_with_another_body_conflicts(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """Same key, another body or path: 409 idempotency_conflict, and no step runs."""
    job, key = gs_job.job_id, _key()
    soft = Soft()
    _, before = _run_step(gs_raw, job, key, soft, "IDEM-KEY-3")
    answers = [
        _step(gs_raw, job, key, {"learning_rate": 1e-5}),
        gs_raw.call("save", json_body={}, headers={IDEMPOTENCY_KEY_HEADER: key}, job_id=job),
    ]
    for ans in answers:
        soft.expect("IDEM-KEY-3", ans.status == 409 and ans.code == ErrorCode.IDEMPOTENCY_CONFLICT,
                    f"a reused key with another body/path answered {ans}")
    _, after = _run_step(gs_raw, job, None, soft, "IDEM-KEY-3")
    soft.expect("IDEM-KEY-3", before is not None and after == before + 1,
                f"global_steps went {before} -> {after} over two conflicting repeats and one step")
    soft.check()


@checks("IDEM-KEY-4")
def test_keys_are_per_account(gs_raw: RawDriver, gs_raw2: RawDriver, gs_job: SharedJob) -> None:
    """Another account repeating a key (same path, same body) gets no answer of ours."""
    job, key = gs_job.job_id, _key()
    soft = Soft()
    mine = _step(gs_raw, job, key)
    rid = submitted(mine, job, soft, "IDEM-KEY-4")
    soft.check()
    rid = present("IDEM-KEY-4", rid, f"the submission has no request id: {mine}")
    theirs = _step(gs_raw2, job, key)
    expect("IDEM-KEY-4", theirs.status == 404 and theirs.field("request_id") != rid,
           f"another account repeating our key on our job answered {theirs} "
           f"(ours was request_id {rid}); it must not see our job or our answer")
    gs_raw.settle(job, rid)
