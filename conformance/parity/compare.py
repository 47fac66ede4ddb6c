"""Normalise two answers and list where they differ (the heart of ``gs-parity``).

Both sides are tape outlines (``contract.tape``): the recorded answer as stored, the new
one outlined the same way. What is compared: the exact status, the content type, whether
the request-id and Retry-After headers are present, and the body's skeleton (keys, value
types, list lengths, tensor dtypes and shapes). Values are compared only where they are a
protocol fact: enum-like strings (states, error codes, types), booleans, integers that are
counters rather than clocks, and for floats only finiteness and sign. Ids are abstracted
but must stay consistent with the ids learned so far; timestamps are ignored. A difference
one of the forms the spec allows explains (``contract.forms``: a request state spelled
``completed``, a 422 detail list, an extra field, ...) is an equivalence: it is kept,
accepted with the row's name, and fails no replay.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from contract.errors import REQUEST_ID_HEADER, is_error_envelope
from contract.forms import FORMS
from contract.states import JobState, normalize_job_state, normalize_request_state

#: Strings compared by value: they name a state, a kind or an error, not data.
VALUE_KEYS = frozenset({
    "status", "state", "code", "type", "dtype", "job_type", "encoding", "content_type",
    "wire_format", "kind", "finish_reason", "stop_reason", "operation", "error_code",
})
#: Integers that are clocks or durations, never compared.
_CLOCK_SUFFIXES = ("_at", "_ms", "_s", "_seconds", "_time", "_ns", "_ts")
_CLOCK_KEYS = frozenset({"elapsed", "ttl", "expires_in", "retry_after", "eta", "duration", "timestamp",
                         "createdon"})  # the SQL API's createdOn (epoch ms)
#: Floats this close to zero count as zero when signs are compared.
FLOAT_ZERO = 1e-6
#: With ``floats="close"`` (a tape replayed against the same fake): relative tolerance.
FLOAT_REL = 1e-3
#: Headers whose presence is part of the contract (compared as present/absent).
PRESENCE_HEADERS = (REQUEST_ID_HEADER.lower(), "retry-after")
#: The header of a 405 naming the path's methods (RFC 9110): compared as a set of methods.
ALLOW_HEADER = "allow"


@dataclass
class Divergence:
    """One difference between the recorded and the new answer of one exchange."""

    field: str
    kind: str
    recorded: Any
    new: Any
    accepted: str | None = None

    def describe(self) -> str:
        return f"{self.field}: {self.kind} differs (recorded {_short(self.recorded)}, new {_short(self.new)})"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_id_key(key: str) -> bool:
    k = key.lower()
    return (k in ("id", "cursor", "next_cursor", "url", "urls", "name", "path")
            or k.endswith(("_id", "_ids", "_url", "_urls", "_cursor", "_name")))


def is_clock_key(key: str) -> bool:
    k = key.lower()
    return k in _CLOCK_KEYS or k.endswith(_CLOCK_SUFFIXES)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        for tag, name in (("$tensor", "tensor"), ("$list", "list"), ("$inline", "frame"), ("$b64", "base64")):
            if tag in v:
                return name
        return "object"
    return type(v).__name__


def _float_class(v: float) -> str:
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else ("+inf" if v > 0 else "-inf")
    if abs(v) <= FLOAT_ZERO:  # rounding noise around zero is zero (a KL of 1e-9, say)
        return "zero"
    return "negative" if v < 0 else "positive"


class Comparer:
    """Compares outlines; ``ids`` maps recorded ids to new ones (learned during replay)."""

    def __init__(self, ids: Mapping[str, str], floats: str = "sign") -> None:
        self.ids = ids
        self.floats = floats
        self.out: list[Divergence] = []

    def add(self, field: str, kind: str, recorded: Any, new: Any) -> None:
        self.out.append(Divergence(field, kind, recorded, new))

    def value(self, rec: Any, new: Any, path: str, key: str) -> None:
        rk, nk = _kind(rec), _kind(new)
        if rk != nk:
            self.add(path, "type", rk, nk)
            return
        if rk == "object":
            self.mapping(rec, new, path)
        elif rk == "list":
            self.sequence(rec, new, path, key)
        elif rk == "tensor":
            for part in ("$tensor", "shape"):
                if rec.get(part) != new.get(part):
                    self.add(f"{path}.{'dtype' if part == '$tensor' else 'shape'}",
                             "dtype" if part == "$tensor" else "shape", rec.get(part), new.get(part))
            if (self.floats == "close" and rec.get("sha") and new.get("sha")
                    and rec.get("shape") == new.get("shape") and rec["sha"] != new["sha"]):
                self.add(path, "content", rec["sha"], new["sha"])
        elif rk == "frame":
            self.value(rec.get("$inline"), new.get("$inline"), path + "<frame>", key)
        elif rk == "base64":
            if rec["$b64"] != new["$b64"]:
                self.add(path, "length", rec["$b64"], new["$b64"])
        elif rk == "string":
            self.string(rec, new, path, key)
        elif rk == "bool" and rec != new:
            self.add(path, "value", rec, new)
        elif rk == "number":
            self.number(rec, new, path, key)

    def mapping(self, rec: dict[str, Any], new: dict[str, Any], path: str) -> None:
        if any(k not in new for k in rec):  # keyed by ids (a state dump): compare by new id
            rec = {self.rename(k): v for k, v in rec.items()}
        for k in rec:
            if k not in new:
                self.add(f"{path}.{k}", "missing", _kind(rec[k]), None)
        for k in new:
            if k not in rec:
                self.add(f"{path}.{k}", "extra", None, _kind(new[k]))
        for k in rec:
            if k in new:
                self.value(rec[k], new[k], f"{path}.{k}", k)

    def rename(self, key: str) -> str:
        if key in self.ids:
            return self.ids[key]
        for old, new in self.ids.items():
            if len(old) >= 6 and old in key:
                key = key.replace(old, new)
        return key

    def sequence(self, rec: Any, new: Any, path: str, key: str) -> None:
        rn, nn = _length(rec), _length(new)
        if rn != nn:
            self.add(path, "length", rn, nn)
            return
        for i, (a, b) in _pairs(rec, new):
            self.value(a, b, f"{path}[{i}]", key)

    def string(self, rec: str, new: str, path: str, key: str) -> None:
        if key.lower() in VALUE_KEYS:
            if rec != new:
                self.add(path, "value", rec, new)
        elif is_id_key(key) and rec in self.ids and self.ids[rec] != new:
            self.add(path, "id", f"{rec} (replayed as {self.ids[rec]})", new)
        elif (rec == "") != (new == ""):
            self.add(path, "empty", rec == "", new == "")

    def number(self, rec: float, new: float, path: str, key: str) -> None:
        if is_clock_key(key):
            return
        if isinstance(rec, int) and isinstance(new, int):
            if rec != new:
                self.add(path, "value", rec, new)
        elif _float_class(float(rec)) != _float_class(float(new)):
            self.add(path, "sign", _float_class(float(rec)), _float_class(float(new)))
        elif (self.floats == "close" and math.isfinite(float(rec))
              and not math.isclose(float(rec), float(new), rel_tol=FLOAT_REL, abs_tol=FLOAT_ZERO)):
            self.add(path, "value", rec, new)


def _length(v: Any) -> int:
    return int(v["$list"]) if isinstance(v, dict) else len(v)


def _pairs(rec: Any, new: Any) -> list[tuple[int, tuple[Any, Any]]]:
    if isinstance(rec, dict) and isinstance(new, dict):
        n = int(rec["$list"])
        tail = len(rec["tail"])
        heads = list(enumerate(zip(rec["head"], new["head"], strict=False)))
        return heads + [(n - tail + i, p) for i, p in enumerate(zip(rec["tail"], new["tail"], strict=False))]
    if isinstance(rec, list) and isinstance(new, list):
        return list(enumerate(zip(rec, new, strict=True)))
    return []


def _media(value: str | None) -> str | None:
    return value.split(";", 1)[0].strip().lower() if value else None


def _methods(value: str | None) -> set[str]:
    """An Allow header's methods, whatever their order and spacing."""
    return {m.strip().upper() for m in (value or "").split(",") if m.strip()}


def body_form(body: Mapping[str, Any] | None) -> str:
    if not body:
        return "empty"
    for form in ("json", "frame", "chunk", "text"):
        if form in body:
            return form
    return "bytes"


def compare(recorded: Mapping[str, Any], new: Mapping[str, Any], ids: Mapping[str, str],
            floats: str = "sign", forms: frozenset[str] | None = None) -> list[Divergence]:
    """Divergences between two tape ``response`` entries (``floats``: ``sign`` compares
    finiteness and sign only; ``close`` also the value, within a relative 1e-3, and tensor
    contents by digest). A difference one of ``forms`` (rows of contract.forms the new
    server may answer in; None: every row, a server the kit did not build) explains is
    accepted."""
    c = Comparer(ids, floats)
    if "error" in recorded or "error" in new:
        if ("error" in recorded) != ("error" in new):
            c.add("connection", "transport", recorded.get("error") or recorded["status"],
                  new.get("error") or new["status"])
        return c.out
    if recorded["status"] != new["status"]:
        c.add("status", "status", recorded["status"], new["status"])
    rh, nh = recorded.get("headers", {}), new.get("headers", {})
    if _media(rh.get("content-type")) != _media(nh.get("content-type")):
        c.add("header content-type", "value", _media(rh.get("content-type")), _media(nh.get("content-type")))
    if _methods(rh.get(ALLOW_HEADER)) != _methods(nh.get(ALLOW_HEADER)):
        c.add(f"header {ALLOW_HEADER}", "value", rh.get(ALLOW_HEADER), nh.get(ALLOW_HEADER))
    for name in PRESENCE_HEADERS:
        if (name in rh) != (name in nh):
            c.add(f"header {name}", "presence", name in rh, name in nh)
    if recorded.get("streamed"):
        return c.out  # the recording client streamed the body and the tape has none of it
    rb, nb = recorded.get("body"), new.get("body")
    rf, nf = body_form(rb), body_form(nb)
    if rf != nf:
        c.add("body", "form", rf, nf)
    elif rb and nb and rf in ("json", "frame", "chunk"):
        c.value(rb[rf], nb[rf], "body", "")
    accept_allowed_forms(recorded, new, c.out, forms)
    return c.out


# --- the forms the spec allows (contract.forms): equivalences, not divergences -------------

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


Matcher = Callable[[Divergence, Pair], bool]


def _leaf(d: Divergence) -> str:
    return re.sub(r"\[\d+\]$", "", d.field).rsplit(".", 1)[-1]


def _states(normalize: Callable[[object], str]) -> Matcher:
    """A status word spelled another way the spec allows (same state once normalised)."""
    def match(d: Divergence, p: Pair) -> bool:
        return (d.kind == "value" and _leaf(d) == "status" and isinstance(d.recorded, str)
                and isinstance(d.new, str) and normalize(d.recorded) == normalize(d.new))
    return match


def _missing(*names: str, where: str = "") -> Matcher:
    """A field the spec lets a server leave out."""
    return lambda d, p: d.kind == "missing" and _leaf(d) in names and where in d.field


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


def _empty_success(d: Divergence, p: Pair) -> bool:
    """A success with nothing in it, as 200 {}, 200 with no body, 202, 204, or (a cancel)
    200 naming the job and its status."""
    oks = {p.status("recorded"), p.status("new")} <= {200, 202, 204}
    naming = d.kind == "extra" and _leaf(d) in ("job_id", "status") and p.json("recorded") in (None, {})
    bodiless = d.field == "header content-type" and None in (d.recorded, d.new)
    return oks and (d.kind in ("status", "form") or naming or bodiless)


def _poll_empty(d: Divergence, p: Pair) -> bool:
    """An empty poll error / next_cursor as null or "", a request's error as its message."""
    return (_leaf(d) in ("error", "next_cursor") and d.kind in ("type", "empty")
            and all(p.at(s, d.field) in (None, "") or isinstance(p.at(s, d.field), (str, dict))
                    for s in ("recorded", "new")))


def _capped(d: Divergence, p: Pair) -> bool:
    return (d.kind == "value" and _leaf(d) == "available_gpus" and isinstance(d.new, int)
            and isinstance(d.recorded, int) and 0 <= d.new <= d.recorded)


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
    """bootstrap-router-replay answered with a request id to poll instead of inline (spec §7)."""
    rec, new = p.json("recorded"), p.json("new")
    return (d.kind in ("missing", "extra") and isinstance(new, Mapping) and "request_id" in new
            and isinstance(rec, Mapping) and "bootstrapped" in rec)


def _unknown_field(d: Divergence, p: Pair) -> bool:
    """A field no contract model declares (a declared one appearing is a real difference)."""
    return d.kind == "extra" and _leaf(d) not in DECLARED


def _declared_fields() -> frozenset[str]:
    from pydantic import BaseModel

    from contract import models_answers

    names: set[str] = set()
    for value in vars(models_answers).values():
        if isinstance(value, type) and issubclass(value, BaseModel):
            names |= {info.alias or name for name, info in value.model_fields.items()}
    return frozenset(names)


#: Every field an answer model declares (contract.models_answers).
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


def _abstracted(d: Divergence, p: Pair) -> bool:
    """Nothing to accept: ids and timestamps are compared abstractly already."""
    return False


#: contract.forms row -> what a difference in that form looks like between two answers.
EQUIVALENCES: dict[str, Matcher] = {
    "request-state-spelling": _states(normalize_request_state),
    "job-state-spelling": _states(normalize_job_state),
    "id-shape": _abstracted,
    "list-entry-minimal": lambda d, p: ".jobs[" in d.field and (
        d.kind == "missing" or (d.kind == "length" and _leaf(d) == "sub_jobs")),
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
