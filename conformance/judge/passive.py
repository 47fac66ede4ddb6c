"""The passive judge: a stream of exchanges in, a verdict per clause and side out.

It sees only what crossed the wire, from any source: gs-proxy feeds it live, a tape
(:mod:`conformance.judge.tape`) after the fact, and gs-load's meter feeds its answer rules
(:class:`conformance.judge.answers.Judge`). Per exchange it runs

- the client's rules on the request (:class:`conformance.judge.requests.RequestRules`);
- the server's rules on the answer (:class:`conformance.judge.answers.Judge`: status,
  envelope, answer models, request ids, cursors and streams);
- what only a watcher over time sees (:class:`Timeline`): the request-id header on every
  answer, job states that never go back, a terminal request that never changes, and each
  polled result against its model (once per request, by the op its submission named);

and, at the end, the steps' answers (:func:`conformance.judge.conclude.answered_steps`); its
findings per clause (:class:`ClauseFinding`) become the report's verdicts (:mod:`.report`).
A clause is red when a violation was booked (the side that broke it named), green when it
was judged and nothing broke it, not seen otherwise: a verdict is never green on nothing.
"""

from __future__ import annotations

import base64
import binascii
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import contract.wire.frame  # noqa: F401  (the dtype table an outline names)
from conformance.judge.answers import JUDGED as ANSWER_CLAUSES
from conformance.judge.answers import Judge
from conformance.judge.conclude import answered_steps
from conformance.judge.exchange import Exchange
from conformance.judge.requests import HASH_UP_TO, RequestRules
from conformance.judge.requests import JUDGED as REQUEST_CLAUSES
from conformance.judge.requests import JUDGED_SIDES as REQUEST_SIDES
from conformance.judge.tally import Tally
from conformance.reporting.model import SIDES
from contract import wire
from contract.errors import REQUEST_ID_HEADER
from contract.states import (
    JOB_STARTUP_ORDER,
    JOB_TERMINAL,
    REQUEST_TERMINAL,
    normalize_job_state,
    normalize_request_state,
)

REQUEST_ID, JOB_STATES, TERMINAL = "ADDR-REQID-1", "JOB-STATE-1", "POLL-TERMINAL-1"
#: Every clause the passive judge can judge.
JUDGED: tuple[str, ...] = tuple(dict.fromkeys((*REQUEST_CLAUSES, *ANSWER_CLAUSES, REQUEST_ID,
                                               JOB_STATES, TERMINAL)))
#: The sides each clause is judged on: the request rules' own, the server's for the rest.
JUDGED_ON: dict[str, tuple[str, ...]] = {cid: REQUEST_SIDES.get(cid, ("server",)) for cid in JUDGED}
#: Requests and jobs remembered for their state over time.
KEPT = 20_000
#: A result delivered as result-chunk events (spec §9.4) is held until its last page, then
#: reassembled and judged, when its events' text is at most this long; the results held at
#: once share :data:`RESULT_EVENTS_BUDGET` (the oldest, likely abandoned, give way first).
RESULT_EVENTS_UP_TO = 16 * 1024 * 1024
RESULT_EVENTS_BUDGET = 64 * 1024 * 1024


@dataclass(frozen=True)
class Red:
    """One violation as it happens: what a live observer prints."""

    clause_id: str
    side: str
    example: str


class LiveTally(Tally):
    """A tally that tells ``on_red`` of each violation as it is booked."""

    def __init__(self, on_red: Callable[[Red], None] | None = None) -> None:
        super().__init__(node="passive")
        self._on_red = on_red

    def violation(self, clause_id: str, example: str, count: int = 1, side: str = "server") -> None:
        if count <= 0:
            return
        super().violation(clause_id, f"[{side}] {example}", count, side)
        if self._on_red is not None:
            self._on_red(Red(clause_id, side, example))


def _trim(store: dict[str, Any]) -> None:
    while len(store) > KEPT:
        store.pop(next(iter(store)))


class Timeline:
    """What only a watcher over time judges on the server's answers."""

    def __init__(self, tally: Tally, answers: Judge) -> None:
        self.tally = tally
        self.answers = answers
        self.ops: dict[str, tuple[str, str]] = {}
        self.request_states: dict[str, str] = {}
        self.job_states: dict[str, str] = {}
        self.results_judged: set[str] = set()
        self.chunked = ChunkedResults()

    def answered(self, ex: Exchange) -> None:
        if ex.status is None or ex.route is None:
            return
        self.tally.saw(REQUEST_ID)
        if not any(k.lower() == REQUEST_ID_HEADER.lower() for k in ex.headers):
            self.tally.violation(REQUEST_ID, f"{ex.describe()}: no {REQUEST_ID_HEADER} header")
        body = ex.json if ex.body_whole else None
        if not 200 <= ex.status < 300 or not isinstance(body, Mapping):
            return
        rid = body.get("request_id")
        if ex.submits and ex.final and isinstance(rid, str):
            self.ops[rid] = (ex.fake_op, ex.params.get("job_id", ""))
            _trim(self.ops)
        if ex.name in ("get_job", "create_job"):
            self._job(body)
        elif ex.name == "list_jobs":
            for job in body.get("jobs") or []:
                if isinstance(job, Mapping):
                    self._job(job)
        elif ex.name == "get_request":
            self._request(ex.params.get("request_id", ""), body)

    def _job(self, job: Mapping[str, Any]) -> None:
        job_id, raw = job.get("job_id"), job.get("status")
        if not isinstance(job_id, str) or raw is None:
            return
        state, before = normalize_job_state(raw), self.job_states.get(job_id)
        self.job_states[job_id] = state
        _trim(self.job_states)
        if before is None or before == state:
            return
        self.tally.saw(JOB_STATES)
        order = [s.value for s in JOB_STARTUP_ORDER]
        back = (before in JOB_TERMINAL and state not in JOB_TERMINAL) or (
            before in order and state in order and order.index(state) < order.index(before))
        if back:
            self.tally.violation(JOB_STATES, f"job {job_id} went from {before} back to {state}")

    def _request(self, rid: str, body: Mapping[str, Any]) -> None:
        state, before = normalize_request_state(body.get("status")), self.request_states.get(rid)
        if before in REQUEST_TERMINAL:
            self.tally.saw(TERMINAL)
            if state != before:
                self.tally.violation(TERMINAL, f"request {rid} was {before}, then {state}")
        else:
            self.request_states[rid] = state
            _trim(self.request_states)
        result = body.get("result")
        if state not in REQUEST_TERMINAL or rid not in self.ops or rid in self.results_judged:
            return
        if result is not None:
            self.results_judged.add(rid)
            try:
                decoded = _decoded(result)
            except (Outlined, KeyError, TypeError, ValueError):
                return
        else:  # delivered as result-chunk events (held until the last page), or none at all
            frame = self.chunked.page(rid, body.get("events"), last=not body.get("next_cursor"))
            if frame is None:
                return
            self.results_judged.add(rid)
            decoded = _frame_object(frame)
        op, job_id = self.ops[rid]
        self.answers.result(op, job_id, decoded)


class ChunkedResults:
    """Results delivered as result-chunk events, held page by page until the last one, then
    given back as the frame they reassemble to. Memory follows the events received, within
    :data:`RESULT_EVENTS_BUDGET`; a result past :data:`RESULT_EVENTS_UP_TO`, one whose events
    a tape folded, or one that does not reassemble (its chunks are POLL-CURSOR-1's and the
    client's to judge) is not judged."""

    def __init__(self, up_to: int = RESULT_EVENTS_UP_TO, budget: int = RESULT_EVENTS_BUDGET) -> None:
        self.up_to, self.budget = up_to, budget
        #: Request id -> its events so far by payload sha256, or None: given up on.
        self.held: dict[str, dict[str, dict[str, Any]] | None] = {}
        #: Request id -> the text its held events take (the requests still held, oldest first).
        self.sizes: dict[str, int] = {}

    def page(self, rid: str, events: Any, last: bool) -> bytes | None:
        """One terminal page's events of ``rid``: on the last page of a result held whole,
        the frame they reassemble to, else None."""
        chunks = [dict(e) for e in events if isinstance(e, Mapping) and e.get("type") == "result_chunk"] \
            if isinstance(events, list) else []
        if rid not in self.held:
            if not chunks:
                return None
            self.held[rid] = {}
            while len(self.held) > KEPT:
                oldest = next(iter(self.held))
                del self.held[oldest]
                self.sizes.pop(oldest, None)
        if self.held.get(rid) is not None:
            self._take(rid, chunks)
        if not last:
            return None
        held = self.held.pop(rid, None)
        self.sizes.pop(rid, None)
        if not held:
            return None
        try:
            return wire.decode_result_chunk_events(list(held.values()))
        except (wire.WireError, ValueError):
            return None

    def _take(self, rid: str, chunks: list[dict[str, Any]]) -> None:
        texts = [chunk.get("payload_b64") for chunk in chunks]
        before = self.sizes.get(rid, 0)
        size = before + sum(len(text) for text in texts if isinstance(text, str))
        if not all(isinstance(text, str) for text in texts) or size > min(self.up_to, self.budget):
            self._give_up(rid)
            return
        for other in list(self.sizes):  # room: the oldest others give way first
            if sum(self.sizes.values()) + size - before <= self.budget:
                break
            if other != rid:
                self._give_up(other)
        self.sizes[rid] = size
        held = self.held[rid]
        assert held is not None
        for chunk in chunks:
            held.setdefault(str(chunk.get("payload_sha256")), chunk)

    def _give_up(self, rid: str) -> None:
        """Stop holding ``rid``'s events: it will not be judged."""
        self.held[rid] = None
        self.sizes.pop(rid, None)


class Outlined(Exception):
    """A tape kept only the outline of this value (a folded list): it cannot be judged."""


def _from_outline(node: Any) -> Any:
    """A tape's outline of a frame's tree as the object, each tensor an empty one of its
    dtype and shape (models judge structure and types, never tensor values)."""
    if isinstance(node, Mapping):
        if "$tensor" in node:
            import torch

            dtype = getattr(torch, wire.frame.DTYPES[str(node["$tensor"])][0])
            return torch.empty([int(n) for n in node.get("shape") or []], dtype=dtype)
        if "$list" in node or "$b64" in node or "$rep" in node:
            raise Outlined("a folded list")
        return {k: _from_outline(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_from_outline(v) for v in node]
    return node


def _frame_object(frame: bytes) -> Any:
    """The object a result frame holds; one that does not decode gives what it says instead
    (which no result model accepts)."""
    try:
        return wire.loads(frame)
    except (wire.WireError, ValueError) as exc:
        return {"undecodable result frame": str(exc)}


def _decoded(result: Any) -> Any:
    """A polled result: its JSON, or the object an inline DSSST1 frame holds (rebuilt from
    its outline when it comes from a tape). :class:`Outlined` when it cannot be known."""
    if isinstance(result, Mapping) and isinstance(result.get("payload_b64"), str):
        try:
            return _frame_object(base64.b64decode(result["payload_b64"]))
        except binascii.Error as exc:
            return {"undecodable inline frame": str(exc)}
    if isinstance(result, Mapping) and isinstance(result.get("$inline"), Mapping):
        frame = result["$inline"].get("frame")
        if not isinstance(frame, Mapping):
            raise Outlined("not a frame outline")
        return _from_outline(frame.get("tree"))
    return _from_outline(result)


class PassiveJudge:
    """Feed it exchanges in the order they completed; read :meth:`verdicts` at the end."""

    def __init__(self, on_red: Callable[[Red], None] | None = None, hash_up_to: int = HASH_UP_TO) -> None:
        self.tally = LiveTally(on_red)
        self.answers = Judge(self.tally)
        self.requests = RequestRules(self.tally, hash_up_to)
        self.timeline = Timeline(self.tally, self.answers)
        self.exchanges = 0
        self._finished = False

    def observe(self, ex: Exchange) -> None:
        """One exchange with its answer (or ``status`` None and ``error``: none came)."""
        self.exchanges += 1
        self.requests.judge(ex)
        self.answers.sending(ex)
        self.answers.answered(ex)
        self.timeline.answered(ex)

    def finish(self) -> None:
        """The judgements only the whole run allows (idempotent)."""
        if not self._finished:
            self._finished = True
            answered_steps(self.tally)

    def findings(self) -> dict[str, ClauseFinding]:
        """Every clause this judge knows: red, green or not seen, with the sides it judged and
        the sides that broke it (the report turns them into verdicts)."""
        self.finish()
        out: dict[str, ClauseFinding] = {}
        for cid in dict.fromkeys((*JUDGED, *self.tally.judged, *self.tally.violations)):
            sides = self.tally.sides.get(cid, Counter())
            status = "red" if self.tally.violations[cid] else "green" if self.tally.judged[cid] else "not seen"
            out[cid] = ClauseFinding(cid, status, tuple(s for s in SIDES if sides[s]), self.tally.judged[cid],
                                     self.tally.violations[cid], tuple(self.tally.examples.get(cid, ())),
                                     JUDGED_ON.get(cid, ("server",)))
        return out


@dataclass(frozen=True)
class ClauseFinding:
    """What the passive judge found of one clause: its status, counts, examples and sides."""

    clause_id: str
    status: str
    #: The sides that broke it (empty unless red).
    sides: tuple[str, ...]
    judged: int
    violations: int
    examples: tuple[str, ...] = ()
    #: The sides it is judged on (a request rule: the client's, and the server's where a 2xx
    #: accepted a request that breaks it; an answer rule: the server's).
    judged_on: tuple[str, ...] = ("server",)
