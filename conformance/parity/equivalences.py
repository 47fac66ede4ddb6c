"""Differences a form the spec allows explains (``contract.forms``): equivalences, kept
and accepted with the row's name, never divergences.

One matcher per row of the forms table (a test holds the table and :data:`EQUIVALENCES`
to the same rows): given a divergence ``compare`` found and the two answers, whether the
row explains it. :func:`accept_allowed_forms` marks those the replayed server's forms
explain (a URL: every row; the kit's fake: its dialect's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from conformance.parity.divergence import Divergence
from contract.errors import REQUEST_ID_HEADER, is_error_envelope
from contract.forms import EXTRA_FIELDS, FORMS
from contract.states import REQUEST_TERMINAL, JobState, normalize_job_state, normalize_request_state


@dataclass(frozen=True)
class Pair:
    """The two answers a divergence was found between, as a matcher reads them."""

    recorded: Mapping[str, Any]
    new: Mapping[str, Any]

    def json(self, side: str) -> Any:
        body = (self.recorded if side == "recorded" else self.new).get("body") or {}
        return body.get("json") if isinstance(body, Mapping) else None

    def at(self, side: str, path: str) -> Any:
        """The value at a divergence's ``path`` (``body.jobs[0].status``), or None."""
        node = self.json(side)
        for part in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path.removeprefix("body")):
            key, index = part
            if isinstance(node, Mapping) and "$list" in node:
                node = node.get("head")
            if key and isinstance(node, Mapping):
                node = node.get(key)
            elif index and isinstance(node, list) and int(index) < len(node):
                node = node[int(index)]
            else:
                return None
        return node

    def status(self, side: str) -> int:
        return int((self.recorded if side == "recorded" else self.new).get("status") or 0)


Matcher = Callable[["Divergence", "Pair"], bool]


def _leaf(d: Divergence) -> str:
    return re.sub(r"\[\d+\]$", "", d.field).rsplit(".", 1)[-1]


def _states(normalize: Callable[[object], str]) -> Matcher:
    """A status word spelled another way the spec allows (same state once normalised)."""
    def match(d: Divergence, p: Pair) -> bool:
        return (d.kind == "value" and _leaf(d) == "status" and isinstance(d.recorded, str)
                and isinstance(d.new, str) and normalize(d.recorded) == normalize(d.new))
    return match


def _missing(*names: str, where: str = "") -> Matcher:
    """A field the spec lets a server leave out (left out by either of the two servers)."""
    return lambda d, p: d.kind in ("missing", "extra") and _leaf(d) in names and where in d.field


def _enveloped(body: Any) -> bool:
    """A spec §3.6 error body as a tape outlines it (a long detail list shortened)."""
    if not isinstance(body, Mapping):
        return False
    detail = body.get("detail")
    return is_error_envelope(body) or isinstance(detail, list) or (isinstance(detail, Mapping) and "$list" in detail)


def _error_body(d: Divergence, p: Pair) -> bool:
    """Both are refusals whose bodies take forms spec §3.6 allows: only the form differs."""
    return (d.field.startswith("body") and p.status("recorded") >= 400 and p.status("new") >= 400
            and _enveloped(p.json("recorded")) and _enveloped(p.json("new")))


def _validation_422(d: Divergence, p: Pair) -> bool:
    return d.kind == "status" and {d.recorded, d.new} == {400, 422} and _enveloped(p.json("new"))


def _bare(body: Any) -> bool:
    """No body, or one holding nothing but the any dialect's invented fields."""
    return body is None or (isinstance(body, dict) and set(body) <= set(EXTRA_FIELDS))


def _empty_success(d: Divergence, p: Pair) -> bool:
    """A success with nothing in it, as 200 {}, 200 with no body, 202, 204, or (a cancel)
    200 naming the job and its status."""
    oks = {p.status("recorded"), p.status("new")} <= {200, 202, 204}
    bare = _bare(p.json("recorded") if d.kind == "extra" else p.json("new"))
    naming = d.kind in ("extra", "missing") and _leaf(d) in ("job_id", "status") and bare
    bodiless = d.field == "header content-type" and None in (d.recorded, d.new)
    return oks and (d.kind in ("status", "form") or naming or bodiless)


def _poll_empty(d: Divergence, p: Pair) -> bool:
    """An empty poll error / next_cursor as null or "", a request's error as its message."""
    return (_leaf(d) in ("error", "next_cursor") and d.kind in ("type", "empty")
            and all(p.at(s, d.field) in (None, "") or isinstance(p.at(s, d.field), (str, dict))
                    for s in ("recorded", "new")))


def _capped(d: Divergence, p: Pair) -> bool:
    """available_gpus capped below max_total_gpus - in_use_gpus, on either side."""
    def within(side: str) -> bool:
        base = d.field.rsplit(".", 1)[0]
        free, most, used = (p.at(side, f"{base}.{k}") for k in ("available_gpus", "max_total_gpus", "in_use_gpus"))
        used = 0 if used is None else used  # proto3 JSON leaves a zero out (spec §5.4)
        return all(isinstance(v, int) for v in (free, most, used)) and 0 <= free <= most - used
    return d.kind == "value" and _leaf(d) == "available_gpus" and within("recorded") and within("new")


def _kind_at(leaf: str, *kinds: str) -> Matcher:
    return lambda d, p: _leaf(d) == leaf and d.kind in kinds


def _pages(d: Divergence, p: Pair) -> bool:
    """Result-chunk pages cut otherwise (fewer events, a cursor where the other had none)."""
    return ((d.kind == "length" and ".events" in d.field) or (_leaf(d) == "next_cursor" and d.kind in ("empty", "type", "id"))
            or (d.kind == "length" and _leaf(d) == "payload_b64"))


def _delivery(d: Divergence, p: Pair) -> bool:
    """A tensor result inline or in result chunks: the result, its events and the cursor."""
    return (_leaf(d) == "result" and d.kind == "type" and {d.recorded, d.new} <= {"frame", "null", "object"}) or _pages(d, p)


def _polled_instead(d: Divergence, p: Pair) -> bool:
    """bootstrap-router-replay answered with a request id to poll on one side, inline on the
    other (spec §7)."""
    sides = p.json("recorded"), p.json("new")
    if d.kind not in ("missing", "extra") or not all(isinstance(s, Mapping) for s in sides):
        return False
    return any("request_id" in a and "bootstrapped" in b for a, b in (sides, sides[::-1]))


def _unknown_field(d: Divergence, p: Pair) -> bool:
    """A field no contract model declares, on either side (a declared one appearing is a
    real difference); the any dialect's invented fields (contract.forms.EXTRA_FIELDS) may
    also carry other values, inside them included."""
    invented = any(f".{name}" in f"{d.field}." for name in EXTRA_FIELDS)
    return invented or (d.kind in ("extra", "missing") and _leaf(d) not in DECLARED)


def _declared_fields() -> frozenset[str]:
    from pydantic import BaseModel

    from contract.models import answers as models_answers

    names: set[str] = set()
    for value in vars(models_answers).values():
        if isinstance(value, type) and issubclass(value, BaseModel):
            names |= {info.alias or name for name, info in value.model_fields.items()}
    return frozenset(names)


#: Every field an answer model declares (contract.models.answers).
DECLARED = _declared_fields()


def _log_page(d: Divergence, p: Pair) -> bool:
    """An opaque log cursor, or an empty non-EOF page while the job is placing."""
    return (_leaf(d) in ("next_cursor", "cursor") and d.kind in ("id", "type", "empty")) or (
        _leaf(d) in ("entries", "eof") and d.kind in ("length", "value"))


def _cancelling(d: Divergence, p: Pair) -> bool:
    return d.kind == "value" and _leaf(d) == "status" and {normalize_job_state(d.recorded), normalize_job_state(d.new)} \
        == {JobState.CANCELLING, JobState.CANCELLED}


def _server_named(d: Divergence, p: Pair) -> bool:
    """Checkpoints the server named itself: ids mapped otherwise, a list that grows where the
    kit overwrote the caller's name, an export whose file (naming its checkpoint) differs
    in size."""
    renamed = p.at("recorded", "body.checkpoint_id") != p.at("new", "body.checkpoint_id")
    return ((_leaf(d) == "checkpoint_id" and d.kind in ("id", "empty"))
            or (_leaf(d) == "checkpoints" and d.kind == "length")
            or (_leaf(d) == "size_bytes" and d.kind == "value" and renamed))


def _other_success(d: Divergence, p: Pair) -> bool:
    """Two successes with the same body but another 2xx status (201, 202 for 200)."""
    statuses = (p.status("recorded"), p.status("new"))
    return d.kind == "status" and all(isinstance(s, int) and 200 <= s < 300 for s in statuses)


def _empty_result(terminal: bool) -> Matcher:
    """A page (of a request ended, or still in flight) with result ``{}`` on one side and
    null on the other."""
    def match(d: Divergence, p: Pair) -> bool:
        state = normalize_request_state(p.at("new", "body.status"))
        return (_leaf(d) == "result" and (state in REQUEST_TERMINAL) == terminal
                and {json.dumps(p.at(s, d.field)) for s in ("recorded", "new")} <= {"null", "{}"})
    return match


def _precondition(d: Divergence, p: Pair) -> bool:
    """A refusal of a call on a job not running: 409 job_not_running on one side, 412 with a
    {message, code} body on the other."""
    statuses = {p.status("recorded"), p.status("new")}
    return statuses == {409, 412} and (d.kind in ("status", "form", "type", "value") or _leaf(d) == "code")


def _abstracted(d: Divergence, p: Pair) -> bool:
    """Nothing to accept: ids and timestamps are compared abstractly already."""
    return False


#: contract.forms row -> what a difference in that form looks like between two answers.
EQUIVALENCES: dict[str, Matcher] = {
    "request-state-spelling": _states(normalize_request_state),
    "job-state-spelling": _states(normalize_job_state),
    "id-shape": _abstracted,
    "list-entry-minimal": lambda d, p: ".jobs[" in d.field and (
        d.kind in ("missing", "extra") or (d.kind == "length" and _leaf(d) == "sub_jobs")),
    "job-optional-fields": _missing("submitted_by", "owner_role"),
    "unknown-fields": _unknown_field,
    "error-forms": _error_body,
    "validation-422": _validation_422,
    "delete-answer": _empty_success,
    "cancel-answer": _empty_success,
    "poll-empty-fields": _poll_empty,
    "capacity-proto3": _missing("has_reservation", "max_total_gpus", "reserved_gpus", "in_use_gpus", "available_gpus"),
    "capacity-capped": _capped,
    "last-lr-list": _kind_at("last_lr", "type"),
    "last-lr-scheduled": _kind_at("last_lr", "value", "sign"),
    # The server's own names: ids mapped otherwise, and a list that grows where the kit
    # would have overwritten the caller's name.
    "save-id-server": _server_named,
    "save-result-fields": _missing("checkpoint_path", "checkpoint_tag"),
    "request-id-header": lambda d, p: d.field == f"header {REQUEST_ID_HEADER.lower()}",
    "short-pages": _pages,
    "bootstrap-polled": _polled_instead,
    "log-cursor": _log_page,
    "cancelling-visible": _cancelling,
    "timestamp-form": _abstracted,
    "result-delivery": _delivery,
    "success-status": _other_success,
    "inflight-result-empty": _empty_result(terminal=False),
    "done-result-null": _empty_result(terminal=True),
    "precondition-status": _precondition,
}


def accept_allowed_forms(recorded: Mapping[str, Any], new: Mapping[str, Any], found: list[Divergence],
                         forms: frozenset[str] | None = None) -> None:
    """Mark each divergence a form the spec allows (of ``forms``; None: any) explains as
    accepted (an equivalence), naming the row and its section."""
    pair = Pair(recorded, new)
    rows = [(n, m) for n, m in EQUIVALENCES.items() if forms is None or n in forms]
    for d in found:
        if d.accepted is not None:
            continue
        for name, match in rows:
            if match(d, pair):
                d.accepted = f"allowed form {name} (spec §{FORMS[name].section})"
                break
