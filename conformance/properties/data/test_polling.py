"""POLL: the request status object, its states, and the three delivery forms with cursors."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.drivers.raw import RawDriver, Settled
from conformance.fixtures import Source, Variant
from conformance.inputs import valid_bodies
from conformance.jobs import SharedJob
from conformance.judging import frames
from conformance.judging.checks import kit_form, refused
from conformance.judging.large import LargeResult, chunked
from conformance.judging.variants import (
    CHUNK_BYTES,
    forward_body,
    forward_request,
    need,
    variant_job,
)
from conformance.reporting.violations import Soft, expect, present
from conformance.runtime import prop
from conformance.target import Target
from contract.clauses import checks
from contract.forms import REQUEST_STATE_SYNONYMS
from contract.limits import DEFAULT_MAX_EVENTS, MAX_EVENTS_CAP
from contract.models.answers import POLL_FIELDS
from contract.models.catalog import TRAINING_MODELS
from contract.shapes import check_forward_result
from contract.states import RequestState, normalize_request_state, request_state_enum_spelling

SHORT = set(RequestState)
ENUM = {request_state_enum_spelling(s) for s in SHORT}
#: Every spelling spec §3.3 lists (the kit's, its synonyms) and their raw enum names.
SPEC_WORDS = SHORT | {w for words in REQUEST_STATE_SYNONYMS.values() for w in words}


def spec_state(raw: str) -> bool:
    """A request status spelled as spec §3.3 lists them, or as a raw enum name."""
    return raw in SPEC_WORDS or (raw.startswith("REQUEST_STATE_") and raw.isupper()
                                 and normalize_request_state(raw) in SHORT)


@checks("POLL-FIELDS-1", "POLL-STATE-1", "POLL-STATE-2", "POLL-EMPTY-1")
@pytest.mark.parametrize("latency", ["instant", "polls:3"])
def test_poll_answers(
    gs_target: Target,
    gs_raw: RawDriver,
    gs_job: SharedJob,
    request: pytest.FixtureRequest,
    latency: str,
) -> None:
    """Every poll carries the eight fields, statuses are spec §3.3's words (the kit's: the
    six canonical ones), a done request's result is an object or null."""
    if latency == "instant":
        driver, jid = gs_raw, gs_job.job_id
    else:  # the fake's variant is asked for here only, so the instant case plans on any URL
        variant = request.getfixturevalue("gs_variant")
        driver, ops = variant_job(variant("slow-requests", latency=latency))
        jid = ops.job_id
    soft = Soft()
    for name, body in (("step", {}), ("save", {}), ("step", {"learning_rate": 1e-5})):
        ans, settled = driver.run_json(name, jid, body)
        settled = present("POLL-FIELDS-1", settled, f"{name} refused: {ans}")
        for page in settled.pages:
            for field in POLL_FIELDS:
                soft.expect(
                    "POLL-FIELDS-1",
                    isinstance(page.body, dict) and field in page.body,
                    f"poll answer lacks {field}: {page.raw[:200]!r}",
                )
        for raw in settled.statuses:
            soft.expect("POLL-STATE-1", spec_state(raw), f"request status {raw!r} is not a spec §3.3 state")
            if kit_form("POLL-STATE-2"):
                soft.expect("POLL-STATE-2", raw in SHORT or raw in ENUM, f"request status {raw!r}")
        if settled.status == RequestState.DONE:
            result = settled.final_body.get("result")
            soft.expect(
                "POLL-EMPTY-1",
                result is None or isinstance(result, dict),
                f"a done request's result is {result!r}, not an object or null",
            )
    soft.check()


@checks("POLL-TERMINAL-1")
@prop(scale=0.2)
@given(name=st.sampled_from(["step", "save"]), repeats=st.integers(1, 3))
def test_terminal_is_final(gs_raw: RawDriver, gs_job: SharedJob, name: str, repeats: int) -> None:
    """Re-polling a terminal request returns the same status and result."""
    jid = gs_job.job_id
    _, settled = gs_raw.run_json(name, jid, {})
    settled = present("POLL-TERMINAL-1", settled, f"{name} refused")
    first = settled.final_body
    for _ in range(repeats):
        gs_raw.call("step", json_body={}, job_id=jid)
        again = gs_raw.poll(jid, settled.request_id).body
        expect(
            "POLL-TERMINAL-1",
            normalize_request_state(again.get("status")) == normalize_request_state(first.get("status"))
            and again.get("result") == first.get("result"),
            f"terminal request changed: {first.get('status')}/{first.get('result')} -> "
            f"{again.get('status')}/{again.get('result')}",
        )


@checks("POLL-INLINE-1")
def test_inline_frames(gs_source: Source) -> None:
    """An inline tensor result is {content_type, encoding: base64, wire_format: DSSST1, payload_b64}."""
    _, ops = gs_source("inline")
    settled = forward_request(ops, forward_body(2, 5))
    need(ops, "inline")
    result = settled.result
    soft = Soft()
    soft.expect("POLL-INLINE-1", isinstance(result, dict), f"result {result!r}")
    want = {
        "content_type": "application/octet-stream",
        "encoding": "base64",
        "wire_format": "DSSST1",
    }
    for k, v in want.items():
        soft.expect(
            "POLL-INLINE-1",
            isinstance(result, dict) and result.get(k) == v,
            f"inline result {k} = {result.get(k) if isinstance(result, dict) else None!r}, want {v!r}",
        )
    soft.check()
    view = frames.inspect_frame(base64.b64decode(result["payload_b64"]))
    expect(
        "POLL-INLINE-1",
        view is not None and not view.problems,
        f"payload_b64 is not a DSSST1 frame: {view.problems if view else 'unparseable'}",
    )


@checks("POLL-CHUNKS-1", "POLL-CHUNKS-2")
@prop(scale=0.2)
@given(max_events=st.integers(1, 7), seq=st.integers(8, 160))
def test_result_chunks(
    gs_source: Source, gs_large: LargeResult | None, max_events: int, seq: int
) -> None:
    """result_chunk events carry a matching sha256; next_cursor until the last page."""
    driver, ops = chunked(gs_source, gs_large, forward_body(2, seq))
    rid = ops.last.request_id
    settled = driver.settle(ops.job_id, rid, max_events=max_events)
    soft = Soft()
    chunks = settled.chunk_events
    soft.expect("POLL-CHUNKS-1", chunks, "no result_chunk events in chunks delivery")
    for i, ev in enumerate(chunks):
        ok = {"type", "payload_b64", "payload_sha256"} <= set(ev)
        soft.expect("POLL-CHUNKS-1", ok, f"event {i} lacks fields: {sorted(ev)}")
        if ok:
            raw = base64.b64decode(ev["payload_b64"])
            soft.expect(
                "POLL-CHUNKS-1",
                hashlib.sha256(raw).hexdigest() == str(ev["payload_sha256"]).lower(),
                f"event {i}: payload_sha256 does not match the bytes",
            )
    pages = [p for p in settled.pages if isinstance(p.body, dict) and p.body.get("events")]
    for i, page in enumerate(pages):
        last = i == len(pages) - 1
        has = bool(page.body.get("next_cursor"))
        soft.expect(
            "POLL-CHUNKS-2",
            has != last,
            f"page {i + 1}/{len(pages)} {'has' if has else 'lacks'} next_cursor",
        )
        soft.expect(
            "POLL-CHUNKS-2",
            len(page.body["events"]) <= max_events,
            f"page of {len(page.body['events'])} events with max_events={max_events}",
        )
    soft.check()


@checks("POLL-CURSOR-1")
@prop(scale=0.2)
@given(max_events=st.integers(1, 5), rereads=st.integers(1, 3))
def test_cursor_rereads(
    gs_source: Source, gs_large: LargeResult | None, max_events: int, rereads: int
) -> None:
    """Asking for the same cursor again returns the same page: the events first delivered
    from that point (the request was drained once already when it settled)."""
    driver, ops = chunked(gs_source, gs_large, forward_body(2, 64))
    jid, rid = ops.job_id, ops.last.request_id
    delivered = ops.last.chunk_events
    cursor, seen = None, 0
    for _ in range(4):
        page = driver.poll(jid, rid, cursor=cursor, max_events=max_events).body
        events = page.get("events") or []
        expect(
            "POLL-CURSOR-1",
            events and events == delivered[seen : seen + len(events)],
            f"cursor {cursor!r} (after {seen} of {len(delivered)} chunks) answered "
            f"{len(events)} events, not the chunks first delivered from there",
        )
        seen += len(events)
        for _ in range(rereads):
            again = driver.poll(jid, rid, cursor=cursor, max_events=max_events).body
            expect(  # no next_cursor may read null or "" (spec §6.8's empty form)
                "POLL-CURSOR-1",
                again.get("events") == page.get("events")
                and (again.get("next_cursor") or None) == (page.get("next_cursor") or None),
                f"cursor {cursor!r} re-read gave another page",
            )
        cursor = page.get("next_cursor")
        if not cursor:
            break


def _judge_page_size(n: int, cap: int, total: int, soft: Soft, cid: str) -> None:
    """A page of ``n`` of ``total`` events under a cap: some, at most ``cap`` (``cid``), and
    the kit's pages are full (POLL-MAXEV-4)."""
    soft.expect(cid, 1 <= n <= cap, f"a page of {n} of {total} events, want 1..{cap}")
    if kit_form("POLL-MAXEV-4"):
        soft.expect("POLL-MAXEV-4", n == min(cap, total), f"a page of {n} of {total} events, want {min(cap, total)}")


@checks("POLL-MAXEV-1", "POLL-MAXEV-4")
def test_default_page_size(gs_source: Source, gs_large: LargeResult | None) -> None:
    """Without max_events a page carries at most 16 events (the kit's: min(16, total))."""
    driver, ops = chunked(gs_source, gs_large, forward_body(4, 128))
    total = len(ops.last.chunk_events)
    page = driver.poll(ops.job_id, ops.last.request_id).body
    soft = Soft()
    _judge_page_size(len(page.get("events") or []), DEFAULT_MAX_EVENTS, total, soft, "POLL-MAXEV-1")
    soft.check()


@checks("POLL-MAXEV-2", "POLL-MAXEV-4")
def test_max_events_cap(gs_source: Source, gs_large: LargeResult | None) -> None:
    """max_events above 512 is capped at 512: a page of at most 512 events (the kit's:
    min(512, total)), not a refusal. Judged only with more than 512 events pending: with
    fewer the cap cannot be seen at work, and the clause is skipped, not green."""
    driver, ops = chunked(gs_source, gs_large, forward_body(4, 9000))
    total = len(ops.last.chunk_events)
    page = driver.poll(ops.job_id, ops.last.request_id, max_events=100_000)
    n = len(page.body.get("events") or []) if isinstance(page.body, dict) else 0
    soft = Soft()
    soft.expect("POLL-MAXEV-2", page.ok, f"max_events=100000 answered {page}")
    _judge_page_size(n, MAX_EVENTS_CAP, total, soft, "POLL-MAXEV-2")
    soft.check()
    if total <= MAX_EVENTS_CAP:
        pytest.skip(f"only {total} result-chunk events pending: the {MAX_EVENTS_CAP} cap is not "
                    "seen at work (needs a result in more chunks than that)")


@checks("POLL-MAXEV-3")
@prop(scale=0.3)
@given(value=st.sampled_from(["0", "-1", "abc", "1.5", "1e3", " ", "16x", "-512"]))
def test_bad_max_events(gs_raw: RawDriver, gs_job: SharedJob, value: str) -> None:
    """max_events that is not a positive integer is refused with a 400 (the kit's), or taken
    as the default: a page the 16-event default bounds (spec §6.8 says nothing of invalid
    values, so a server reading ``0`` as "unset" follows it too). Never a 5xx."""
    jid = gs_job.job_id
    rid = gs_raw.call("step", json_body={}, job_id=jid).field("request_id")
    gs_raw.settle(jid, rid)
    soft = Soft()
    page = gs_raw.poll(jid, rid, max_events=value)
    if page.ok:
        events = page.field("events") or []
        soft.expect("POLL-MAXEV-3", isinstance(events, list) and len(events) <= DEFAULT_MAX_EVENTS,
                    f"max_events={value!r} taken, but not as the default: {page}")
    else:
        refused(page, soft, "POLL-MAXEV-3", statuses=[400])
    soft.check()


@checks("POLL-REASSEMBLE-1")
@prop(scale=0.2)
@given(batch=st.integers(1, 3), seq=st.integers(4, 300))
def test_chunks_equal_inline(gs_target: Target, gs_variant: Variant, batch: int, seq: int) -> None:
    """The same request delivered in chunks and inline decodes to the same result."""
    import torch

    body = forward_body(batch, seq)
    _, chunk_ops = variant_job(
        gs_variant("chunks-small", result_delivery="chunks", result_chunk_bytes=CHUNK_BYTES),
        seed=11,
    )
    _, inline_ops = variant_job(gs_variant("inline", result_delivery="inline"), seed=11)
    a = chunk_ops.forward_op(body)
    b = inline_ops.forward_op(body)
    expect(
        "POLL-REASSEMBLE-1",
        chunk_ops.settled.form == "chunks" and inline_ops.settled.form == "inline",
        f"forms were {chunk_ops.settled.form} and {inline_ops.settled.form}",
    )
    soft = Soft()
    soft.extend("POLL-REASSEMBLE-1", check_forward_result(body, a))
    la, lb = a["model_outputs"]["logprobs"], b["model_outputs"]["logprobs"]
    soft.expect(
        "POLL-REASSEMBLE-1",
        la.shape == lb.shape and torch.equal(la, lb),
        "chunked and inline deliveries of the same request differ",
    )
    soft.check()


OUT_OF_VOCAB = {"prompts": [[10**9, 10**9 + 1]], "sampling_params": {"max_tokens": 2}}


def _failures(attempts: Iterable[Callable[[], tuple[object, Settled | None]]]) -> list[Settled]:
    out = []
    for attempt in attempts:
        _, settled = attempt()
        if settled is not None and settled.status == RequestState.FAILED:
            out.append(settled)
    return out


@checks("POLL-FAILED-1")
@pytest.mark.gs_fake_optional
def test_failed_requests_carry_an_error(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, gs_variant: Variant
) -> None:
    """A failed request's error is non-empty: a message string or an object with a message
    (and the kit's code) - spec §6.8 leaves its form open."""
    jid = gs_job.job_id
    candidates = [
        lambda: gs_raw.run_frame(
            "forward_backward", jid, {"args": [], "kwargs": {"labels": [[1, 2]]}}
        ),
        lambda: gs_raw.run_json(
            "load", jid, {"checkpoint_id": "gs-no-such-checkpoint-for-failure"}
        ),
    ]
    candidates.append(lambda: gs_raw.run_frame("generate", jid, OUT_OF_VOCAB, force_chunk=False))
    failed = _failures(candidates)
    if not failed and gs_target.embedded:
        # The shape engine never fails an accepted request; the tiny engine refuses token ids
        # outside its vocabulary at execution, which is exactly a failed request.
        tiny = RawDriver(gs_variant("tiny", engine="tiny"))
        tjid = tiny.create_job(
            valid_bodies.job(valid_bodies.training(TRAINING_MODELS[0]), valid_bodies.sampling(TRAINING_MODELS[0]))
        ).field("job_id")
        tiny.wait_job(tjid, timeout_s=60)
        failed = _failures(
            [lambda: tiny.run_frame("generate", tjid, OUT_OF_VOCAB, force_chunk=False)]
        )
    if not failed:
        pytest.skip("the server refused every candidate at submission: no failed request to judge")
    soft = Soft()
    for settled in failed:
        err = settled.error
        described = (isinstance(err, str) and err.strip()) or (
            isinstance(err, dict) and isinstance(err.get("message"), str) and err.get("message")
        )
        soft.expect(
            "POLL-FAILED-1",
            described,
            f"failed request error {err!r} is neither a message nor an object with a message",
        )
    soft.check()
