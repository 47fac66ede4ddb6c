"""CG: the chunk-group protocol: acks, restart, conflicts, missing chunks, at-most-once."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

from client.calls.bounded_read import mount_bounds
from conformance.drivers.raw import Answer, RawDriver, encode
from conformance.inputs.strategies import tensor
from conformance.jobs import SharedJob
from conformance.judging import frames
from conformance.judging.checks import refused
from conformance.reporting.recorder import RECORDER
from conformance.reporting.violations import Soft, expect
from conformance.runtime import prop
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.states import RequestState


def _frame(seed: int, seq: int = 48) -> bytes:
    return encode({"args": [], "kwargs": {"input_ids": tensor((2, seq), "int64", seed)}})


def _loss(driver: RawDriver, job_id: str, ans: Answer) -> float | None:
    rid = ans.field("request_id")
    if not isinstance(rid, str):
        return None
    settled = driver.settle(job_id, rid)
    return settled.decoded().get("avg_loss") if settled.status == RequestState.DONE else None


@pytest.fixture
def execs(gs_target: Target) -> Callable[[str], int] | None:
    """Execution counter of a chunk group (embedded fake only; None elsewhere)."""
    from conformance.fake_admin import admin_of

    if not gs_target.embedded:
        return None
    return admin_of(gs_target).executions


@checks("CG-NONFINAL-1", "CG-FINAL-1", "REQ-SUBMIT-1")
@prop(scale=0.4)
@given(n=st.integers(2, 6), seed=st.integers(0, 100))
def test_acks(gs_raw: RawDriver, gs_job: SharedJob, n: int, seed: int) -> None:
    """Non-final chunks answer without request_id; the final chunk answers the request_id
    (spec §9.3) and the job_id (spec §3.1)."""
    chunks = frames.split(_frame(seed), n, str(uuid.uuid4()))
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)
    soft = Soft()
    soft.expect("CG-FINAL-1", len(answers) == n, f"chunk {len(answers) - 1} refused: {answers[-1]}")
    for i, ans in enumerate(answers[:-1]):
        soft.expect(
            "CG-NONFINAL-1",
            ans.ok and not ans.field("request_id"),
            f"non-final chunk {i} answered {ans.status} {ans.raw[:120]!r}",
        )
    final = answers[-1]
    soft.expect("CG-FINAL-1", final.ok and isinstance(final.field("request_id"), str),
                f"final chunk answered {final}")
    soft.expect("REQ-SUBMIT-1", final.field("job_id") == gs_job.job_id,
                f"final chunk answered job_id {final.field('job_id')!r}, not {gs_job.job_id!r}")
    soft.check()
    gs_raw.settle(gs_job.job_id, final.field("request_id"))


@checks("CG-CONNECTION-1")
@prop(scale=0.2)
@given(n=st.integers(2, 5))
def test_chunks_on_separate_connections(gs_raw: RawDriver, gs_job: SharedJob, n: int) -> None:
    """Each chunk on its own connection: the group still completes."""
    chunks = frames.split(_frame(n), n, str(uuid.uuid4()))
    last = None
    for chunk in chunks:
        with mount_bounds(requests.Session()) as session:
            RECORDER.attach(session)
            session.headers.update(gs_raw.target.auth_headers())
            resp = session.post(
                gs_raw.url("forward_backward", job_id=gs_job.job_id),
                data=chunk,
                headers={"Content-Type": "application/octet-stream", "Connection": "close"},
                timeout=60,
            )
            expect(
                "CG-CONNECTION-1",
                resp.status_code < 300,
                f"chunk refused: {resp.status_code} {resp.text[:200]}",
            )
            last = resp
    assert last is not None, "a group has chunks"
    rid = last.json().get("request_id")
    expect("CG-CONNECTION-1", isinstance(rid, str), f"final answer {last.text[:200]}")
    expect(
        "CG-CONNECTION-1",
        gs_raw.settle(gs_job.job_id, rid).status == RequestState.DONE,
        "request did not finish",
    )


@checks("CG-RESTART-1")
@prop(scale=0.3)
@given(n=st.integers(2, 5), data=st.data())
def test_restart_required(
    gs_raw: RawDriver, gs_job: SharedJob, n: int, data: st.DataObject
) -> None:
    """A first-seen group starting past chunk 0 answers 409 chunk_group_restart_required."""
    chunks = frames.split(_frame(n + 3), n, str(uuid.uuid4()))
    start = data.draw(st.integers(1, n - 1), label="first chunk sent")
    ans = gs_raw.call("forward_backward", data=chunks[start], job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "CG-RESTART-1", codes=[ErrorCode.CHUNK_GROUP_RESTART_REQUIRED], statuses=[409])
    soft.check()
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)
    expect(
        "CG-RESTART-1",
        answers[-1].ok,
        f"replay from chunk 0 after the restart refused: {answers[-1]}",
    )
    gs_raw.settle(gs_job.job_id, answers[-1].field("request_id"))


@checks("CG-CONFLICT-1", "CG-CONFLICT-2")
@pytest.mark.parametrize("what", ["frame_sha256", "total_chunks"])
def test_group_reuse_conflicts(gs_raw: RawDriver, gs_job: SharedJob, what: str) -> None:
    """Reusing a group id for another frame, or with another chunk count, answers 409."""
    gid = str(uuid.uuid4())
    first = frames.split(_frame(1), 3, gid)
    other = (
        frames.split(_frame(2), 3, gid)
        if what == "frame_sha256"
        else frames.split(_frame(1), 4, gid)
    )
    ok = gs_raw.call("forward_backward", data=first[0], job_id=gs_job.job_id)
    expect("CG-CONFLICT-1", ok.ok, f"chunk 0 refused: {ok}")
    ans = gs_raw.call("forward_backward", data=other[1], job_id=gs_job.job_id)
    soft = Soft()
    cid = "CG-CONFLICT-1" if what == "frame_sha256" else "CG-CONFLICT-2"
    refused(ans, soft, cid, codes=[ErrorCode.CHUNK_GROUP_CONFLICT], statuses=[409])
    gs_raw.finish_group("forward_backward", gs_job.job_id, first[1:])
    soft.check()


@checks("CG-CONFLICT-1")
def test_completed_group_reuse_conflicts(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """After a group completed, its id with another frame still answers 409."""
    gid = str(uuid.uuid4())
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, frames.split(_frame(3), 2, gid))
    gs_raw.settle(gs_job.job_id, answers[-1].field("request_id"))
    ans = gs_raw.call(
        "forward_backward", data=frames.split(_frame(4), 2, gid)[0], job_id=gs_job.job_id
    )
    soft = Soft()
    refused(ans, soft, "CG-CONFLICT-1", codes=[ErrorCode.CHUNK_GROUP_CONFLICT], statuses=[409])
    soft.check()


@checks("CG-CONFLICT-3")
@prop(scale=0.2)
@given(n=st.integers(3, 5), data=st.data())
def test_changed_chunk_conflicts(
    gs_raw: RawDriver, gs_job: SharedJob, n: int, data: st.DataObject
) -> None:
    """Re-sending a chunk index with another payload answers 409 chunk_group_conflict."""
    chunks = frames.split(_frame(n * 5), n, str(uuid.uuid4()))
    idx = data.draw(st.integers(0, n - 2), label="chunk changed")
    for chunk in chunks[: idx + 1]:
        gs_raw.call("forward_backward", data=chunk, job_id=gs_job.job_id)
    _, payload = frames.chunk_parts(chunks[idx])
    changed = frames.with_payload(chunks[idx], bytes([payload[0] ^ 0xFF]) + payload[1:])
    ans = gs_raw.call("forward_backward", data=changed, job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "CG-CONFLICT-3", codes=[ErrorCode.CHUNK_GROUP_CONFLICT], statuses=[409])
    gs_raw.finish_group("forward_backward", gs_job.job_id, chunks[idx + 1 :])
    soft.check()


@checks("CG-MISSING-1")
@prop(scale=0.3)
@given(n=st.integers(3, 6), data=st.data())
def test_missing_chunks(gs_raw: RawDriver, gs_job: SharedJob, n: int, data: st.DataObject) -> None:
    """A final chunk while some are missing is refused: 409 chunk_group_missing_chunks (the
    kit's), or 409 chunk_group_restart_required, the one code spec §9.3 names for a group
    the server cannot continue (a server may drop a group with a gap and ask for a replay)."""
    skip = data.draw(st.integers(1, n - 2), label="chunk left out")
    chunks = frames.split(_frame(n * 7), n, str(uuid.uuid4()))
    gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks[:skip] + chunks[skip + 1 : -1])
    ans = gs_raw.call("forward_backward", data=chunks[-1], job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "CG-MISSING-1", statuses=[409])
    either = (ErrorCode.CHUNK_GROUP_MISSING_CHUNKS, ErrorCode.CHUNK_GROUP_RESTART_REQUIRED)
    soft.expect("CG-MISSING-1", ans.code is None or ans.code in either,  # {message, code: 409}: none
                f"a refused gap named code {ans.code!r}, want one of {[str(c) for c in either]}")
    gs_raw.finish_group("forward_backward", gs_job.job_id, [chunks[skip], chunks[-1]])
    soft.check()


@checks("CG-IDEM-1")
@prop(scale=0.3)
@given(n=st.integers(1, 4), repeats=st.integers(1, 3))
def test_final_chunk_repeated(
    gs_raw: RawDriver, gs_job: SharedJob, execs: Callable[[str], int] | None, n: int, repeats: int
) -> None:
    """Repeating the final chunk resolves to the original execution, never a second one."""
    gid = str(uuid.uuid4())
    chunks = frames.split(_frame(n + 11), n, gid)
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)
    first = _loss(gs_raw, gs_job.job_id, answers[-1])
    soft = Soft()
    for _ in range(repeats):
        again = gs_raw.call("forward_backward", data=chunks[-1], job_id=gs_job.job_id)
        soft.expect(
            "CG-IDEM-1",
            again.ok and isinstance(again.field("request_id"), str),
            f"repeated final chunk answered {again}",
        )
        loss = _loss(gs_raw, gs_job.job_id, again)
        soft.expect("CG-IDEM-1", loss == first, f"repeat resolved to loss {loss}, original {first}")
    if execs is not None:
        soft.expect(
            "CG-IDEM-1", execs(gid) == 1, f"forward-backward ran {execs(gid)} times for one group"
        )
    soft.check()


#: Where a step result may report how many forward-backward runs it applied (results are
#: open, spec §11): at its top level or in its metrics, under one of these names.
MICRO_BATCH_KEYS = ("micro_batches", "num_micro_batches", "n_micro_batches", "micro_batch_count")


def _micro_batches(result: object) -> int | None:
    """The micro-batch count a step result reports, None when it reports none."""
    if not isinstance(result, Mapping):
        return None
    metrics = result.get("metrics")
    for where in (result, metrics if isinstance(metrics, Mapping) else {}):
        for key in MICRO_BATCH_KEYS:
            value = where.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
                return int(value)
    return None


def _applied(driver: RawDriver, job_id: str) -> int | None:
    """Step; the micro-batch count its result reports (None: none, or the step failed)."""
    ans, settled = driver.run_json("step", job_id, {})
    expect("CG-IDEM-1", settled is not None and settled.status == RequestState.DONE,
           f"a step (to read the micro-batches it applied) did not succeed: {ans}")
    assert settled is not None
    return _micro_batches(settled.decoded())


def _one_group(driver: RawDriver, job_id: str, seed: int, final_repeats: int) -> None:
    """A two-chunk forward-backward group, its final chunk sent ``1 + final_repeats`` times,
    every answer polled to its end."""
    chunks = frames.split(_frame(seed), 2, str(uuid.uuid4()))
    answers = driver.send_chunks("forward_backward", job_id, chunks)
    expect("CG-IDEM-1", len(answers) == 2 and answers[-1].ok, f"the group was refused: {answers[-1]}")
    _loss(driver, job_id, answers[-1])
    for _ in range(final_repeats):
        again = driver.call("forward_backward", data=chunks[-1], job_id=job_id)
        expect("CG-IDEM-1", again.ok, f"the repeated final chunk was refused: {again}")
        _loss(driver, job_id, again)


@checks("CG-IDEM-1")
def test_final_chunk_repeat_runs_nothing_again(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """A repeated final chunk runs no forward-backward again (spec §9.3), judged by an effect
    the API shows, not by request ids: the step after a group counts its micro-batches the
    same whether the group's final chunk was sent once or three times. Judged where the
    step result reports a micro-batch count (MICRO_BATCH_KEYS) that counts one group as one."""
    jid = gs_job.job_id
    _applied(gs_raw, jid)  # apply whatever earlier properties left pending
    _one_group(gs_raw, jid, 41, final_repeats=0)
    once = _applied(gs_raw, jid)
    if once != 1:
        pytest.skip("the step result reports no micro-batch count that counts one group as one "
                    f"(got {once!r}): a repeated final chunk's re-run cannot be seen through the API")
    _one_group(gs_raw, jid, 43, final_repeats=2)
    repeated = _applied(gs_raw, jid)
    expect("CG-IDEM-1", repeated == once,
           f"the step after one group whose final chunk was sent three times applied {repeated} "
           f"micro-batches, {once} after a group sent once: forward-backward ran again (spec §9.3)")


@checks("CG-IDEM-2")
@prop(scale=0.3)
@given(n=st.integers(2, 5), data=st.data())
def test_nonfinal_chunk_repeated(
    gs_raw: RawDriver,
    gs_job: SharedJob,
    execs: Callable[[str], int] | None,
    n: int,
    data: st.DataObject,
) -> None:
    """A repeated non-final chunk with the same payload is accepted without effect."""
    gid = str(uuid.uuid4())
    chunks = frames.split(_frame(n + 21), n, gid)
    idx = data.draw(st.integers(0, n - 2), label="chunk repeated")
    order = list(range(idx + 1)) + [idx] + list(range(idx + 1, n))
    answers = [gs_raw.call("forward_backward", data=chunks[i], job_id=gs_job.job_id) for i in order]
    soft = Soft()
    repeat = answers[idx + 1]
    soft.expect(
        "CG-IDEM-2",
        repeat.ok and not repeat.field("request_id"),
        f"repeated chunk {idx} answered {repeat}",
    )
    soft.expect("CG-IDEM-2", answers[-1].ok, f"final chunk after a repeat refused: {answers[-1]}")
    soft.check()
    expect(
        "CG-IDEM-2", _loss(gs_raw, gs_job.job_id, answers[-1]) is not None, "group did not execute"
    )
    if execs is not None:
        expect("CG-IDEM-2", execs(gid) == 1, f"forward-backward ran {execs(gid)} times")


@checks("CG-IDEM-3")
@prop(scale=0.3)
@given(n=st.integers(1, 4))
def test_whole_group_replayed(
    gs_raw: RawDriver, gs_job: SharedJob, execs: Callable[[str], int] | None, n: int
) -> None:
    """Replaying a completed group from chunk 0 resolves to the same execution and result."""
    gid = str(uuid.uuid4())
    chunks = frames.split(_frame(n + 31), n, gid)
    first = _loss(
        gs_raw, gs_job.job_id, gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)[-1]
    )
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)
    soft = Soft()
    soft.expect("CG-IDEM-3", len(answers) == n and answers[-1].ok, f"replay refused: {answers[-1]}")
    again = _loss(gs_raw, gs_job.job_id, answers[-1])
    soft.expect("CG-IDEM-3", again == first, f"replay resolved to loss {again}, original {first}")
    if execs is not None:
        soft.expect("CG-IDEM-3", execs(gid) == 1, f"forward-backward ran {execs(gid)} times")
    soft.check()
