"""The server's answers, judged exchange by exchange, by the clause each rule belongs to.

gs-load judges every exchange of a load run here, and so does the passive judge
(:mod:`conformance.judge.passive`) for gs-proxy and ``gs-parity --judge``:

- a 5xx where a 2xx or a 4xx was due (ERR-NO500-1); 503 with Retry-After (back-pressure)
  and 501 (a call the server does not have) are answers, not failures;
- an error answer in none of the forms spec §3.6 allows (ERR-ENVELOPE-1);
- a success answer the route's contract model does not describe (the clause of that
  answer, :data:`ANSWER_CLAUSES`), and a polled result its result model does not
  (:data:`RESULT_CLAUSES`);
- request ids: one answered to two different calls (REQ-SUBMIT-2), one the server then
  does not know (REQ-ONCE-1: a request lost); cursors and streams (:mod:`.delivery`).

Calls are counted for the at-most-once judgement at the end of the run
(:mod:`conformance.judge.conclude`): attempted (a distinct Idempotency-Key, the last chunk
of an upload) and accepted (a distinct request id).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from conformance.judge.cursors import DeliveryWatch
from conformance.judge.exchange import Exchange
from conformance.judge.tally import Tally, route_key
from contract import models as m
from contract.errors import ErrorCode, is_error_envelope
from contract.models.answers import POLL_FIELDS
from contract.routes import answer_model, result_model, route

#: A success answer that its model does not describe breaks this clause (by route name).
ANSWER_CLAUSES: dict[str, str] = {
    "create_job": "JOB-CREATE-1", "get_job": "JOB-OBJECT-1", "list_jobs": "JOB-LIST-1",
    "get_capacity": "CAP-FIELDS-1", "cancel_job": "CANCEL-ACTIVE-1",
    "list_checkpoints": "CKPT-LIST-1", "get_request": "POLL-FIELDS-1",
    "generate_stream": "GENS-SUBMIT-1", "operation": "OP-WSYNC-1",
}
#: Routes whose success the spec lets come with no body (the forms cancel-answer and
#: delete-answer, contract.forms): an empty 2xx there is the success itself, not a model miss.
BODILESS_SUCCESS: frozenset[str] = frozenset({"cancel_job", "delete_checkpoint"})
#: ... and a chunked upload's answers: the last chunk's (a submission) and the others'.
FINAL_CHUNK_CLAUSE, NONFINAL_CHUNK_CLAUSE = "CG-FINAL-1", "CG-NONFINAL-1"
SUBMIT_CLAUSE, OTHER_ANSWER_CLAUSE = "REQ-SUBMIT-1", "ERR-SCHEMA-1"
#: A polled result that its model does not describe breaks this clause (by fake op name).
RESULT_CLAUSES: dict[str, str] = {
    "step": "STEP-RESULT-1", "forward_backward": "FB-RESULT-1", "save": "SAVE-RESULT-1",
    "generate": "GEN-RESULT-1", "log_probs": "PROP-LOGPROBS-1", "forward_no_grad": "PROP-FNG-2",
    "op:weight-sync": "OP-WSYNC-1", "op:forward": "OP-FORWARD-2",
}
NO_5XX, ENVELOPE, IDS_UNIQUE, ONCE = "ERR-NO500-1", "ERR-ENVELOPE-1", "REQ-SUBMIT-2", "REQ-ONCE-1"
#: Every clause a load run judges (the JUnit report has a testcase for each).
JUDGED: tuple[str, ...] = tuple(dict.fromkeys((
    NO_5XX, ENVELOPE, SUBMIT_CLAUSE, IDS_UNIQUE, ONCE, "STEP-COUNT-1", "POLL-CURSOR-1",
    "GENS-DRAIN-1", FINAL_CHUNK_CLAUSE, NONFINAL_CHUNK_CLAUSE, *ANSWER_CLAUSES.values(),
    *RESULT_CLAUSES.values(), OTHER_ANSWER_CLAUSE)))
#: How many recent keys and request ids are remembered (a resend comes within seconds).
RECENT = 20_000


def server_error(ex: Exchange) -> bool:
    """A 5xx that is a failure: not 501, nor 503 asking to come back (Retry-After)."""
    status = ex.status or 0
    if status < 500 or status == 501:
        return False
    return not (status == 503 and ex.headers.get("Retry-After"))


def _problem(model: type[BaseModel], data: Any) -> str | None:
    """Why ``data`` is not a ``model`` answer, validated strictly as the fake's answer check
    and the suite's properties judge it (a count sent as the string "4" is no int)."""
    try:
        model.model_validate(data, strict=True)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[:2]
        return f"{model.__name__}: " + "; ".join(f"{'.'.join(map(str, e['loc']))} {e['msg']}"
                                                 for e in first)
    return None


class _Recent(OrderedDict[str, Any]):
    """A bounded map: the oldest entries go first."""

    def put(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > RECENT:
            self.popitem(last=False)


class Judge:
    """Checks every exchange and result of one process; counts go to ``tally``."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.delivery = DeliveryWatch(tally)
        self._keys = _Recent()
        self._ids = _Recent()

    # --- before a try is sent ----------------------------------------------------------
    def sending(self, ex: Exchange) -> None:
        """Count a new call (its first try with a new key; an upload's last chunk)."""
        if not ex.submits or not ex.final:
            return
        if ex.key is None or ex.key not in self._keys:
            if ex.key is not None:
                self._keys.put(ex.key, True)
            self.tally.call(ex.fake_op, "attempted", ex.params.get("job_id"))

    # --- once a try has its answer -------------------------------------------------------
    def answered(self, ex: Exchange) -> None:
        self.tally.exchange(route_key(ex.method, ex.name), ex.sent, ex.received, ex.elapsed_ms,
                            ex.started, failed=ex.status is None or ex.status >= 400)
        if ex.status is None:
            if ex.name == "get_request":
                self.delivery.poll_failed(ex.params.get("request_id", ""))
            return
        self.tally.saw(NO_5XX)
        if server_error(ex):
            self.tally.violation(NO_5XX, ex.describe())
        if ex.status >= 400:
            self._error(ex)
        elif ex.route is not None and 200 <= ex.status < 300:
            self._success(ex, ex.json)

    def _error(self, ex: Exchange) -> None:
        self.tally.saw(ENVELOPE)
        if not is_error_envelope(ex.json):
            self.tally.violation(ENVELOPE, ex.describe())
        if ex.name != "get_request":
            return
        rid = ex.params.get("request_id", "")
        self.delivery.poll_failed(rid)
        if rid in self._ids:
            self.tally.saw(ONCE)
        if ex.status == 404 and ex.code == ErrorCode.REQUEST_NOT_FOUND and rid in self._ids:
            self.tally.violation(ONCE, f"request {rid} was accepted, then its poll answered "
                                       f"request_not_found: {ex.describe()}")

    def _success(self, ex: Exchange, body: Any) -> None:
        clause, model = self._answer_model(ex)
        if not ex.body and ex.body_whole and ex.name in BODILESS_SUCCESS:
            self.tally.saw(clause)
            return
        problem = _problem(model, body) if model is not None else None
        if clause == NONFINAL_CHUNK_CLAUSE and isinstance(body, Mapping) and body.get("request_id"):
            problem = "a non-final chunk's answer carries a request_id"
        if problem is None and ex.name == "get_request" and isinstance(body, Mapping):
            missing = [name for name in POLL_FIELDS if name not in body]
            problem = f"the poll answer lacks {', '.join(missing)}" if missing else None
        if problem is not None:
            self.tally.violation(clause, f"{ex.describe()}: {problem}")
            return
        if model is not None or clause == NONFINAL_CHUNK_CLAUSE:
            self.tally.saw(clause)
        if ex.submits and isinstance(body, Mapping) and isinstance(body.get("request_id"), str):
            self._accepted(ex, body["request_id"], body)
        elif ex.name == "get_request" and isinstance(body, Mapping):
            self.delivery.page(ex.params.get("request_id", ""), ex.query.get("cursor"), body)

    def _answer_model(self, ex: Exchange) -> tuple[str, type[BaseModel] | None]:
        """The clause and model a 2xx answer of this exchange is held to."""
        assert ex.route is not None
        if ex.route.chunked:
            if ex.final:
                return FINAL_CHUNK_CLAUSE, m.SubmitResponse
            return NONFINAL_CHUNK_CLAUSE, m.ChunkAccepted
        model = answer_model(ex.route, ex.operation_type)
        clause = ANSWER_CLAUSES.get(ex.name, SUBMIT_CLAUSE if ex.submits else OTHER_ANSWER_CLAUSE)
        return clause, model

    def _accepted(self, ex: Exchange, request_id: str, body: Mapping[str, Any]) -> None:
        """A submission answered ``request_id``: new (accepted), the same call's replay, or
        another call's id (REQ-SUBMIT-2)."""
        owner = self._ids.get(request_id)
        self.tally.saw(IDS_UNIQUE)
        if owner is not None and ex.key is not None and owner != ex.key:
            self.tally.violation(IDS_UNIQUE, f"request id {request_id} answered to two calls: "
                                             f"{ex.describe()}")
        if owner is None:
            self._ids.put(request_id, ex.key or request_id)
            self.tally.call(ex.fake_op, "accepted", ex.params.get("job_id"))
        if ex.name == "generate_stream":
            self.delivery.stream_submitted(request_id, body.get("count"))

    # --- a polled result, decoded by the client ------------------------------------------
    def result(self, op: str, job_id: str, result: Any) -> None:
        """A call's result as the kit's client decoded it (fake op name ``op``)."""
        name, _, kind = op.partition(":")
        model = result_model(route("operation" if kind else name), kind or None)
        problem = _problem(model, result) if model is not None else None
        clause = RESULT_CLAUSES.get(op, OTHER_ANSWER_CLAUSE)
        if model is not None:
            self.tally.saw(clause)
        if problem is not None:
            self.tally.violation(clause, f"{op} result on job {job_id}: {problem}")
        elif op == "step" and isinstance(result, Mapping):
            self.tally.step_seen(job_id, int(result["global_steps"]))

