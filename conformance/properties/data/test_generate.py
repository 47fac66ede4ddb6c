"""GEN and GENS: one well-formed result per prompt, aligned lists, length limits, and the
streamed variant's events drained exactly once."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.drivers.ops import RawOps
from conformance.drivers.raw import RawDriver, encode
from conformance.fixtures import Via
from conformance.inputs.strategies import generate_requests, sampling_params
from conformance.inputs.strategies import prompts as prompt_strategy
from conformance.jobs import SharedJob
from conformance.judging.checks import refused, refused_or_failed, submitted
from conformance.reporting.violations import Soft, expect, present
from conformance.runtime import prop
from contract.clauses import checks
from contract.shapes import check_generate_result
from contract.states import RequestState

VIA = ["raw", "client"]


def _clause_of(problem: str) -> str:
    if "prompts" in problem:
        return "GEN-COUNT-1"
    if "finish_reason" in problem:
        return "GEN-FINISH-1"
    if "logprobs" in problem:
        return "GEN-LOGPROBS-1"
    if "results list" in problem or "not an object" in problem:
        return "GEN-RESULT-1"
    if "has no text" in problem:
        return "GEN-TOKENS-3"
    return "GEN-TOKENS-2"


#: What spec §6.6 shows of each typical result (spec §11: its fields are open): the kit's
#: results carry all three (GEN-TOKENS-3); the spec's words ask only for the generation.
RESULT_FIELDS = ("text", "token_ids", "finish_reason")
GENERATED = ("text", "token_ids")


def judge_generate(request: dict, result: dict, soft: Soft) -> None:
    """The shape rules, each problem on its clause: GEN-COUNT-1/GEN-RESULT-1/GEN-TOKENS-1
    the spec's, GEN-TOKENS-2/GEN-TOKENS-3/GEN-FINISH-1/GEN-LOGPROBS-1 the kit's."""
    for problem in check_generate_result(request, result):
        soft.expect(_clause_of(problem), False, problem)
    for i, item in enumerate(result.get("results") or []):
        if not isinstance(item, dict):
            continue  # not an object: GEN-RESULT-1's, from check_generate_result
        soft.expect("GEN-TOKENS-1", any(k in item for k in GENERATED),
                    f"results[{i}] carries neither text nor token_ids: {sorted(item)}")
        missing = [k for k in RESULT_FIELDS if k not in item]
        soft.expect("GEN-TOKENS-3", not missing, f"results[{i}] lacks {missing}")


#: The sampling params spec §6.6 shows; the others the strategy draws (logprobs, seed) are
#: the kit's (GEN-PARAMS-1), so a request using them that is refused is no binding red.
SPEC_SAMPLING_KEYS = frozenset({"max_tokens", "temperature"})


def spec_request(req: dict[str, Any]) -> bool:
    """Whether ``req`` stays inside what spec §6.6 shows: its sampling params use only
    max_tokens and temperature."""
    params = req.get("sampling_params")
    listed = params if isinstance(params, list) else [params]
    return all(p is None or set(p) <= SPEC_SAMPLING_KEYS for p in listed)


@checks("GEN-COUNT-1", "GEN-TOKENS-1", "GEN-TOKENS-2", "GEN-TOKENS-3", "GEN-FINISH-1", "GEN-LOGPROBS-1",
        "GEN-PROMPTS-1", "GEN-PARAMS-1")
@pytest.mark.parametrize("via", VIA)
@prop(scale=0.6)
@given(req=generate_requests())
def test_generate_follows_shape_rules(gs_via: Via, via: str, req: dict[str, Any]) -> None:
    """One result per prompt, 1..max_tokens tokens and a text, stop|length, aligned logprobs.
    A refusal is GEN-PROMPTS-1's for a request inside what spec §6.6 shows, else the kit's
    GEN-PARAMS-1 (sampling params the section never shows)."""
    soft = Soft()
    try:
        result = gs_via(via).generate(req)
    except AssertionError as exc:
        soft.expect("GEN-PROMPTS-1" if spec_request(req) else "GEN-PARAMS-1", False, f"prompts refused: {exc}")
        soft.check()
    judge_generate(req, result, soft)
    soft.check()


@checks("GEN-PROMPTS-1")
@pytest.mark.parametrize("prompts", [["plain text"], [[1, 2, 3]], ["mixed", [4, 5]]])
def test_prompt_forms(gs_ops: RawOps, prompts: list[str | list[int]]) -> None:
    """String prompts and pre-tokenised prompts ([[1, 2, 3]]) are both taken."""
    result = gs_ops.generate({"prompts": prompts})
    expect("GEN-PROMPTS-1", len(result.get("results", [])) == len(prompts), f"result {result!r}")


@checks("GEN-RESULT-1")
@prop(scale=0.2)
@given(req=generate_requests(max_prompts=3))
def test_generate_result_is_a_frame(gs_ops: RawOps, gs_job: SharedJob, req: dict[str, Any]) -> None:
    """generate resolves to {job_id, results} DSSST1-encoded (inline or chunks, not JSON)."""
    result = gs_ops.generate(req)
    expect(
        "GEN-RESULT-1",
        gs_ops.settled.form in ("inline", "chunks"),
        f"generate result delivered as {gs_ops.settled.form}",
    )
    expect(
        "GEN-RESULT-1",
        result.get("job_id") == gs_job.job_id and isinstance(result.get("results"), list),
        f"generate result keys {sorted(result)}",
    )


@checks("GEN-ALIGN-1")
@prop(scale=0.3)
@given(
    n=st.integers(1, 4),
    extra=st.integers(1, 2),
    field=st.sampled_from(["sampling_params", "routing_key"]),
    fewer=st.booleans(),
    sp=sampling_params(),
)
def test_misaligned_lists_refused(
    gs_raw: RawDriver, gs_job: SharedJob, n: int, extra: int, field: str, fewer: bool, sp: bool
) -> None:
    """sampling_params / routing_key lists of another length than prompts are refused: a 4xx
    (the kit: 400), or a request that ends failed (spec §6.6 names no form)."""
    count = max(0, n - extra) if fewer else n + extra
    if count == n:
        count = n + 1
    values = [sp] * count if field == "sampling_params" else ["k"] * count
    frame = encode({"prompts": ["p"] * n, field: values})
    ans = gs_raw.call("generate", data=frame, job_id=gs_job.job_id)
    soft = Soft()
    refused_or_failed(ans, soft, "GEN-ALIGN-1", lambda rid: gs_raw.settle(gs_job.job_id, rid), statuses=[400])
    soft.check()


@checks("GEN-TOOLONG-1")
@pytest.mark.parametrize("over", [0, 1, 17])
def test_too_long_token_prompt(gs_raw: RawDriver, gs_job: SharedJob, over: int) -> None:
    """A token prompt of len >= the sampler's max_seq_len answers 400."""
    limit = gs_job.sampling_max_seq_len
    if not limit:
        pytest.skip("the job's sampling sub-job shows no max_seq_len")
    frame = encode({"prompts": ["ok", [1] * (limit + over)]})
    ans = gs_raw.call("generate", data=frame, job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "GEN-TOOLONG-1", statuses=[400])
    soft.check()


def _drain(
    gs_raw: RawDriver, job_id: str, request_id: str, max_events: int | None=None
) -> tuple[list[list[dict]], list[str]]:
    pages: list[list[dict]] = []
    statuses: list[str] = []
    for _ in range(2000):
        body = gs_raw.poll(job_id, request_id, max_events=max_events).body or {}
        events = [e for e in body.get("events") or [] if isinstance(e, dict)]
        pages.append(events)
        statuses.append(str(body.get("status")))
        if any(e.get("type") == "done" for e in events):
            break
        if str(body.get("status")).lower() in (RequestState.FAILED, RequestState.CANCELLED):
            break
    return pages, statuses


#: Stream event type -> the fields it must carry and their types.
_EVENT_FIELDS: dict[str, dict[str, type]] = {
    "result": {"index": int, "result": object},
    "error": {"index": int, "error": object},
    "done": {"completed": int, "failed": int},
}


def _event_ok(event: dict) -> bool:
    """A result or an error of one prompt (by index), or the closing ``done`` counts."""
    fields = _EVENT_FIELDS.get(str(event.get("type")))
    return fields is not None and all(k in event and isinstance(event[k], t) for k, t in fields.items())


def _judge_events(events: list[dict], n_prompts: int, soft: Soft) -> None:
    """GENS-EVENTS-1 and GENS-DRAIN-1 on every event the drain met: well formed, one event
    per prompt index, then exactly one ``done`` event counting them all."""
    for e in events:
        soft.expect("GENS-EVENTS-1", _event_ok(e), f"bad stream event {e!r}")
    done = [e for e in events if e.get("type") == "done"]
    # A malformed event is a GENS-EVENTS-1 problem above, never a crash below (a crash
    # would turn every clause of the property red).
    indexed = [e["index"] for e in events
               if e.get("type") in ("result", "error") and isinstance(e.get("index"), int)]
    soft.expect(
        "GENS-EVENTS-1",
        len(done) >= 1 and events and events[-1].get("type") == "done",
        f"stream did not end with a done event: {[e.get('type') for e in events][-5:]}",
    )
    if done and _event_ok(done[0]):
        soft.expect(
            "GENS-EVENTS-1",
            done[0]["completed"] + done[0]["failed"] == n_prompts,
            f"done {done[0]!r} for {n_prompts} prompts",
        )
    soft.expect(
        "GENS-DRAIN-1",
        len(done) <= 1 and len(indexed) == len(set(indexed)),
        f"events delivered more than once: indexes {indexed}, {len(done)} done events",
    )
    soft.expect(
        "GENS-EVENTS-1",
        sorted(set(indexed)) == list(range(n_prompts)),
        f"event indexes {sorted(set(indexed))} for {n_prompts} prompts",
    )


@checks("GENS-SUBMIT-1", "GENS-EVENTS-1", "GENS-DRAIN-1")
@prop(scale=0.4)
@given(
    prompts=st.lists(prompt_strategy, min_size=1, max_size=6),
    max_events=st.one_of(st.none(), st.integers(1, 3)),
)
def test_generate_stream(
    gs_raw: RawDriver, gs_job: SharedJob, prompts: list[str | list[int]], max_events: int | None
) -> None:
    """JSON bytes in; {request_id, job_id, count}; result/error events then one done event,
    each event delivered by exactly one poll."""
    jid = gs_job.job_id
    ans = gs_raw.call("generate_stream", data=json.dumps({"prompts": prompts}).encode(), job_id=jid)
    soft = Soft()
    rid = submitted(ans, jid, soft, "GENS-SUBMIT-1")
    soft.expect(
        "GENS-SUBMIT-1",
        ans.field("count") == len(prompts),
        f"count {ans.field('count')!r} for {len(prompts)} prompts",
    )
    soft.check()
    rid = present("GENS-SUBMIT-1", rid, f"the submission has no request id: {ans}")
    pages, _ = _drain(gs_raw, jid, rid, max_events)
    _judge_events([e for page in pages for e in page], len(prompts), soft)
    after = gs_raw.poll(jid, rid).body or {}
    soft.expect(
        "GENS-DRAIN-1",
        not after.get("events"),
        f"a poll after done returned events again: {after.get('events')!r}"[:300],
    )
    if max_events:
        soft.expect(
            "GENS-DRAIN-1",
            all(len(p) <= max_events for p in pages),
            f"pages {[len(p) for p in pages]} exceed max_events={max_events}",
        )
    soft.check()


@checks("GENS-BAD-1")
@pytest.mark.parametrize(
    "data", [b"\xff\xfe\x00bad", b"not json", b'{"prompts": [', b"\x80\x04garbage"]
)
def test_generate_stream_bad_bytes(gs_raw: RawDriver, gs_job: SharedJob, data: bytes) -> None:
    """Bytes that are not UTF-8 JSON answer 400."""
    ans = gs_raw.call("generate_stream", data=data, job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "GENS-BAD-1", statuses=[400])
    soft.check()
