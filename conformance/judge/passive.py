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
        if state in REQUEST_TERMINAL and result is not None and rid in self.ops and rid not in self.results_judged:
            self.results_judged.add(rid)
            op, job_id = self.ops[rid]
            try:
                decoded = _decoded(result)
            except (Outlined, KeyError, TypeError, ValueError):
                return
            self.answers.result(op, job_id, decoded)


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


def _decoded(result: Any) -> Any:
    """A polled result: its JSON, or the object an inline DSSST1 frame holds (rebuilt from
    its outline when it comes from a tape). :class:`Outlined` when it cannot be known."""
    if isinstance(result, Mapping) and isinstance(result.get("payload_b64"), str):
        try:
            return wire.loads(base64.b64decode(result["payload_b64"]))
        except (binascii.Error, wire.WireError, ValueError) as exc:
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
