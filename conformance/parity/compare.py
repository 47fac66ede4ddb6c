"""Normalise two answers and list where they differ (the heart of ``gs-parity``).

Both sides are tape outlines (``contract.tape``): the recorded answer as stored, the new
one outlined the same way. What is compared: the exact status, the content type, whether
the request-id and Retry-After headers are present, and the body's skeleton (keys, value
types, list lengths, tensor dtypes and shapes). Values are compared only where they are a
protocol fact: enum-like strings (states, error codes, types), booleans, integers that are
counters rather than clocks or measurements (``MEASURED_KEYS``: a GPU's peak memory), and
for floats only finiteness and sign. Ids are abstracted
but must stay consistent with the ids learned so far; timestamps are ignored. A difference
one of the forms the spec allows explains (``contract.forms``: a request state spelled
``completed``, a 422 detail list, an extra field, ...) is an equivalence: it is kept,
accepted with the row's name, and fails no replay.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from conformance.parity.divergence import Divergence
from conformance.parity.equivalences import EQUIVALENCES, accept_allowed_forms
from contract.errors import REQUEST_ID_HEADER

#: Strings compared by value: they name a state, a kind or an error, not data.
VALUE_KEYS = frozenset({
    "status", "state", "code", "type", "dtype", "job_type", "encoding", "content_type",
    "wire_format", "kind", "finish_reason", "stop_reason", "operation", "error_code",
})
#: Integers that are clocks or durations, never compared.
_CLOCK_SUFFIXES = ("_at", "_ms", "_s", "_seconds", "_time", "_ns", "_ts")
_CLOCK_KEYS = frozenset({"elapsed", "ttl", "expires_in", "retry_after", "eta", "duration", "timestamp",
                         "createdon"})  # the SQL API's createdOn (epoch ms)
#: Integers a server measures on its hardware, by key, with the section that says so: they
#: differ from step to step and from run to run on any real GPU, so they are compared as
#: measurements (zero or positive), never by value.
MEASURED_KEYS: dict[str, str] = {
    "gpu_peak": "spec §6.2: the job-wide maximum GPU high-water mark across ranks, in bytes",
    "cpu_peak": "spec §6.2: rank 0's current process RSS, in bytes",
}
#: Floats this close to zero count as zero when signs are compared.
FLOAT_ZERO = 1e-6
#: With ``floats="close"`` (a tape replayed against the same fake): relative tolerance.
FLOAT_REL = 1e-3
#: Headers whose presence is part of the contract (compared as present/absent).
PRESENCE_HEADERS = (REQUEST_ID_HEADER.lower(), "retry-after")
#: The header of a 405 naming the path's methods (RFC 9110): compared as a set of methods.
ALLOW_HEADER = "allow"


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
        if key.lower() in MEASURED_KEYS:  # a measurement: its class, not its value
            if _float_class(float(rec)) != _float_class(float(new)):
                self.add(path, "sign", _float_class(float(rec)), _float_class(float(new)))
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
    if not recorded.get("streamed"):  # else the recording client streamed the body: none taped
        rb, nb = recorded.get("body"), new.get("body")
        rf, nf = body_form(rb), body_form(nb)
        if rf != nf:
            c.add("body", "form", rf, nf)
        elif rb and nb and rf in ("json", "frame", "chunk"):
            c.value(rb[rf], nb[rf], "body", "")
    accept_allowed_forms(recorded, new, c.out, forms)
    return c.out


__all__ = ["EQUIVALENCES", "Comparer", "Divergence", "accept_allowed_forms", "compare", "is_id_key"]
