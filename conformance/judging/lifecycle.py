"""The end of a job's life: cancel it as spec §5.5 describes and keep what the server said.

A URL run creates one job and cancels it when it is done; that cancel is itself evidence.
:func:`end_of_life` cancels a job, cancels it again at once (the job is then cancelling or
already cancelled), waits for ``cancelled``, cancels once more, then makes data-plane calls
on the dead job. :func:`judge` turns those answers into CANCEL-ACTIVE-1, CANCEL-IDEM-1 and
JOB-RUNNING-2 verdicts, and POLL-TERMINAL-1 on a request that ended before the cancel. The
property that does this runs last in a single-process run, so the session job is judged
after every other property has used it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance.drivers.raw import Answer, RawDriver, encode, request_chunks
from conformance.judging.checks import cancel_answer
from conformance.reporting.violations import Soft
from contract.states import (
    JOB_CANCEL_IDEMPOTENT,
    JobState,
    RequestState,
    normalize_job_state,
    normalize_request_state,
)


@dataclass
class EndOfLife:
    """Everything the server answered while the job was cancelled and afterwards."""

    job_id: str
    state_before: str
    first: Answer | None = None
    state_after: str = ""
    repeat: Answer | None = None
    final_state: str = ""
    statuses_seen: list[str] = field(default_factory=list)
    on_cancelled: Answer | None = None
    data_plane: list[Answer] = field(default_factory=list)
    #: A request that ended before the cancel: its final poll, and a poll after the job ended.
    ended_before: dict[str, Any] | None = None
    polled_after: Answer | None = None


def data_plane_calls(driver: RawDriver, job_id: str) -> list[Answer]:
    """One call per kind of data-plane body: JSON, a request chunk, a plain frame."""
    chunk = request_chunks({"args": [], "kwargs": {"input_ids": [[1, 2]]}}, "forward_backward")
    return [
        driver.call("step", json_body={}, job_id=job_id),
        driver.call("forward_backward", data=chunk[0], job_id=job_id),
        driver.call("generate", data=encode({"prompts": ["x"]}), job_id=job_id),
    ]


def _state(driver: RawDriver, job_id: str) -> str:
    return normalize_job_state(driver.get_job(job_id).field("status"))


def end_of_life(driver: RawDriver, job_id: str, timeout_s: float) -> EndOfLife:
    """Cancel ``job_id`` twice, wait for ``cancelled``, cancel again, probe the data plane."""
    eol = EndOfLife(job_id=job_id, state_before=_state(driver, job_id))
    rid = driver.call("step", json_body={}, job_id=job_id).field("request_id")
    if isinstance(rid, str):
        settled = driver.settle(job_id, rid)
        if settled.status in (RequestState.DONE, RequestState.FAILED):
            eol.ended_before = dict(settled.final_body)
    eol.first = driver.cancel(job_id)
    # At once, while the job is still cancelling where a server shows that state at all.
    eol.repeat = driver.cancel(job_id)
    eol.state_after = _state(driver, job_id)
    ans, eol.statuses_seen = driver.wait_job(job_id, until=(JobState.CANCELLED,), timeout_s=timeout_s)
    eol.final_state = normalize_job_state(ans.field("status"))
    if eol.final_state == JobState.CANCELLED:
        eol.on_cancelled = driver.cancel(job_id)
        eol.data_plane = data_plane_calls(driver, job_id)
        if eol.ended_before is not None:
            eol.polled_after = driver.poll(job_id, str(eol.ended_before.get("request_id")))
    return eol


def judge(eol: EndOfLife, soft: Soft) -> None:
    """CANCEL-ACTIVE-1, CANCEL-IDEM-1 and JOB-RUNNING-2 on what :func:`end_of_life` kept
    (and the answer's form: CANCEL-BODY-1, CANCEL-ANSWER-1)."""
    first, repeat = eol.first, eol.repeat
    assert first is not None and repeat is not None
    when = f"a {eol.state_before} job"
    cancel_answer(first, soft, "CANCEL-ACTIVE-1", eol.state_before)
    soft.expect(
        "CANCEL-ACTIVE-1",
        eol.state_after in JOB_CANCEL_IDEMPOTENT,
        f"after cancelling {when} its status is {eol.state_after!r}",
    )
    soft.expect(
        "CANCEL-ACTIVE-1",
        eol.final_state == JobState.CANCELLED,
        f"the cancelled job ended {eol.final_state!r} (statuses {eol.statuses_seen}), "
        "not cancelled",
    )
    if first.ok:
        # The first cancel was taken, so the job was cancelling or cancelled at the repeat.
        cancel_answer(repeat, soft, "CANCEL-IDEM-1", "cancelling (a cancel repeated at once)")
    again = eol.on_cancelled
    if again is not None:
        cancel_answer(again, soft, "CANCEL-IDEM-1", JobState.CANCELLED)
    _judge_after(eol, soft)


def _judge_after(eol: EndOfLife, soft: Soft) -> None:
    """What the cancelled job still answers: a finished request as it ended, no data plane."""
    after, before = eol.polled_after, eol.ended_before
    if after is not None and before is not None and after.ok:
        # Whether requests stay readable after their job ended is left open (spec §3.3);
        # when one is, it still reads as it ended.
        body = after.body if isinstance(after.body, dict) else {}
        soft.expect(
            "POLL-TERMINAL-1",
            normalize_request_state(body.get("status")) == normalize_request_state(before.get("status"))
            and body.get("result") == before.get("result"),
            f"a request that ended {before.get('status')!r} before its job was cancelled now "
            f"reads {body.get('status')!r} / {str(body.get('result'))[:120]}",
        )
    for call in eol.data_plane:
        soft.expect(
            "JOB-RUNNING-2",
            400 <= call.status < 500,
            f"the cancelled job accepted {call.method} {call.url}: {call.status}",
        )


def may_end_shared_job(created: bool, xdist_worker: bool) -> tuple[bool, str]:
    """Whether the property may cancel the session job itself, and why not.

    Only a job this run created, and only in one process: under pytest-xdist the order is
    the scheduler's, so this worker may still run properties on its session job.
    ``xdist_worker`` comes from the session's own config, not the environment (a run
    started from inside an xdist worker inherits its variables).
    """
    if not created:
        return False, "the run reuses a job (--job-id), which it never cancels"
    if xdist_worker:
        return False, "pytest-xdist worker: other properties may still use the session job"
    return True, ""
