"""The parity recording format ("tape"): one JSON object per line, the same whoever records.

The conformance suite (a ``requests`` hook) and the fake (an ASGI middleware) both write
tapes through :class:`TapeWriter`, so a recording of the embedded fake and one of a real
server can be replayed and diffed by the same code (``gs-parity``). It lives in
``contract`` because both sides need it and neither may import the other.

A line is ``{"kind": "meta"|"server"|"exchange"|"blob"|"frame"|"end", ...}``. Bodies are
described, not dumped: JSON as JSON, DSSST1 frames and chunks as their outline (tree, tensor
dtypes and shapes, sha256), anything else as size + sha256. What a request keeps so that it
can be re-sent (inline bytes, an out-of-line ``blob``, a frame's skeleton) is
``contract.tape.body_store``'s business. Credentials never reach the file: Authorization values
become a token label (``<token-1>``), credential-looking JSON keys are masked, and every
known secret is scrubbed from each line as a last guard.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

from contract.auth import bearer_token
from contract.errors import REQUEST_ID_HEADER
from contract.routes import route_of_rest as match_route
from contract.routes import split_path  # noqa: F401  (re-exported: the recorders' vocabulary)
from contract.tape import bounds
from contract.tape.body_store import (  # noqa: F401  (re-exported: the recorders' options)
    BODY_MODES,
    BUDGET_MIB,
    DEFAULT_BODY_MODE,
    KEEP_BYTES,
    BodyStore,
    text_withheld,
)
from contract.tape.outline import (  # noqa: F401  (re-exported: the tape's vocabulary)
    ANSWER_OUTLINE_BYTES,
    REDACTED,
    BodySink,
    compact_list,
    frame_outline,
    mask,
    outline,
    outline_json,
    scrub_text,
    secret_key,
)

TAPE_FORMAT = "gs-parity-tape"
#: Version 2 added out-of-line bodies (``blob`` lines) and skeletons (``rebuild``, ``frame``).
TAPE_VERSION = 2
READ_VERSIONS = (1, 2)
LINE_KINDS = ("meta", "server", "exchange", "blob", "frame", "end")
#: Request headers kept besides Authorization (whose value becomes a token label).
REQUEST_HEADERS = ("content-type", "x-snowflake-authorization-token-type", "idempotency-key")
RESPONSE_HEADERS = ("content-type", REQUEST_ID_HEADER.lower(), "retry-after", "location", "allow")
#: The label of the fake's admin credential in a tape (a replay sends its own there).
ADMIN_LABEL = "Bearer <admin-token>"
#: A known secret shorter than this is not searched for in a tape's text and bodies: it
#: would match ordinary text (``fake-gs --token T`` would turn every ``GET`` into
#: ``GE<redacted>``). It still never reaches a tape as a header (labelled) or under a
#: credential-named key (masked).
SEARCHED_SECRET_CHARS = 8


def token_label(authorization: str | None, tokens: tuple[str, ...],
                admin: str | None = None) -> str | None:
    """``Authorization`` as a label: ``Bearer <token-N>`` for the N-th known token,
    :data:`ADMIN_LABEL` for the admin credential, ``Bearer <token-other>`` for any other
    credential; None when the header is absent."""
    if authorization is None:
        return None
    token = bearer_token(authorization)
    if token is None:
        scheme, _, rest = authorization.strip().partition(" ")
        return f"{scheme} <credential>" if rest.strip() else authorization.strip()
    for i, known in enumerate(tokens, 1):
        if token == known:
            return f"Bearer <token-{i}>"
    return ADMIN_LABEL if admin and token == admin else "Bearer <token-other>"


# --- bodies ---------------------------------------------------------------------------------


# --- routes ---------------------------------------------------------------------------------


def on_service(path: str) -> bool:
    """A path of the service: under its prefix, the SQL API's statements (spec §2.1), or its
    root (where the suite's reachability probe calls)."""
    from contract.logs import STATEMENTS_PATH

    return (split_path(path) is not None or path in ("/", STATEMENTS_PATH)
            or path.startswith(STATEMENTS_PATH + "/"))


def admin_route(path: str) -> str | None:
    """``admin:state``, ``admin:faults``, ``admin:jobs``: the fake's admin API by area."""
    if not path.startswith("/_fake/"):
        return None
    return "admin:" + path[len("/_fake/"):].split("/", 1)[0]


# --- writing --------------------------------------------------------------------------------


@dataclass
class Exchange:
    """One HTTP exchange as the recorder saw it (before it becomes a tape line)."""

    method: str
    path: str
    query: list[tuple[str, str]]
    request_headers: Mapping[str, str]
    request_body: BodySink
    status: int
    response_headers: Mapping[str, str]
    response_body: BodySink
    started: float
    seconds: float
    server: str = "target"
    group: str = ""
    #: Set when the answer never (completely) arrived: what the connection did instead.
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _headers(headers: Mapping[str, str], names: tuple[str, ...]) -> dict[str, str]:
    lower = {k.lower(): v for k, v in headers.items()}
    return {n: lower[n] for n in names if n in lower}


class TapeWriter:
    """Appends exchanges to a tape file, thread-safely, with credentials scrubbed."""

    def __init__(self, path: str, source: str, tokens: Iterable[str] = (), keep_bytes: int = KEEP_BYTES,
                 meta: Mapping[str, Any] | None = None, append: bool = False, bodies: str = DEFAULT_BODY_MODE,
                 budget_mib: float = BUDGET_MIB, warn: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.tokens = tuple(t for t in tokens if t)
        #: The fake's admin credential, labelled apart from other unknown credentials.
        self.admin: str | None = None
        self.keep_bytes = keep_bytes
        #: What request bodies keep so that a replay can send them again.
        self.store = BodyStore(bodies, budget_mib, keep_bytes, warn or _warn, path)
        self.group = ""
        self._lock = threading.Lock()
        self._seq = 0
        self._t0 = time.time()
        self._servers: set[str] = set()
        self._gzip = path.endswith(".gz")
        self._file: TextIO | None = open_text(path, "a" if append else "w")
        if not append:
            self._write({"kind": "meta", "format": TAPE_FORMAT, "version": TAPE_VERSION, "source": source,
                         "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self._t0)),
                         **mask(dict(meta or {}))})

    def add_secret(self, secret: str | None) -> None:
        if secret and secret not in self.tokens:
            self.tokens = (*self.tokens, secret)

    def add_admin(self, secret: str | None) -> None:
        """Label this credential :data:`ADMIN_LABEL` (it is scrubbed like a token too)."""
        if secret:
            self.admin = secret
            self.tokens = tuple(t for t in self.tokens if t != secret)

    def server(self, name: str, info: Mapping[str, Any]) -> None:
        """Describe a server once (its fake settings, if embedded) before its exchanges."""
        with self._lock:
            if name in self._servers:
                return
            self._servers.add(name)
        self._write({"kind": "server", "name": name, **mask(dict(info))})

    @property
    def searched(self) -> tuple[str, ...]:
        """The known secrets searched for in every line and kept body."""
        return tuple(t for t in (*self.tokens, self.admin) if t and len(t) >= SEARCHED_SECRET_CHARS)

    def request_sink(self, data: bytes | bytearray | memoryview | str | None = None) -> BodySink:
        """A sink for one request body (fed ``data`` at once when given)."""
        sink = self.store.sink(self.searched)
        if data:
            sink.feed(data.encode() if isinstance(data, str) else data)
        return sink

    def next_seq(self) -> int:
        """The next exchange's number (taken when it ends, before it is written)."""
        with self._lock:
            self._seq += 1
            return self._seq

    def record(self, ex: Exchange, seq: int | None = None) -> None:
        seq = self.next_seq() if seq is None else seq
        line = self.line(ex, seq)
        body = line["request"]["body"]
        for extra in self.store.keep(ex.request_body, body, seq, self._withheld):
            self._write(extra)
        self._write(line)

    def _withheld(self, body: dict[str, Any], packed: bytes | None, secret_seen: bool) -> str | None:
        return text_withheld(self.searched, body, packed, secret_seen)

    def line(self, ex: Exchange, seq: int) -> dict[str, Any]:
        req_headers = _headers(ex.request_headers, REQUEST_HEADERS)
        auth = {k.lower(): v for k, v in ex.request_headers.items()}.get("authorization")
        label = token_label(auth, self.tokens, self.admin)
        if label is not None:
            req_headers["authorization"] = label
        split = split_path(ex.path)
        rest = split[1] if split else None
        r = match_route(ex.method, rest) if rest is not None else None
        name = r.name if r else admin_route(ex.path)
        ctype_in = req_headers.get("content-type", "")
        resp_headers = _headers(ex.response_headers, RESPONSE_HEADERS)
        return {
            "kind": "exchange",
            "seq": seq,
            "server": ex.server,
            "group": ex.group or self.group,
            "t": round(ex.started - self._t0, 4),
            "ms": round(ex.seconds * 1000, 2),
            "request": {
                "method": ex.method,
                "path": ex.path,
                "prefix": split[0] if split else None,
                "route": name,
                "template": r.path if r else None,
                "query": [[k, REDACTED if secret_key(k) and v else v] for k, v in ex.query],
                "headers": req_headers,
                "body": ex.request_body.describe(ctype_in),
            },
            "response": {
                "status": ex.status,
                "headers": resp_headers,
                "body": ex.response_body.describe(resp_headers.get("content-type", "")),
                **({"error": ex.error} if ex.error else {}),
                **ex.extra,
            },
        }

    def _write(self, obj: dict[str, Any]) -> None:
        # A blob's bytes were searched for every known secret before they were kept; its
        # base64 text is no place for the text scrub (which could only corrupt it).
        payload = obj.pop("z64") if obj.get("kind") == "blob" else None
        text = scrub_text(json.dumps(obj, separators=(",", ":")), self.searched)
        if payload is not None:
            text = f'{text[:-1]},"z64":"{payload}"}}'
        with self._lock:
            if self._file is not None:
                self._file.write(text + "\n")
                if not self._gzip:
                    self._file.flush()

    def close(self, summary: Mapping[str, Any] | None = None) -> None:
        """Close the file; an ``end`` line records the run's duration (and ``summary``)."""
        if self._file is not None:
            self._write({"kind": "end", "seconds": round(time.time() - self._t0, 3),
                         "exchanges": self._seq, "bodies": self.store.summary(), **dict(summary or {})})
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def _warn(message: str) -> None:
    import sys

    print(f"warning: {message}", file=sys.stderr, flush=True)


def answer_sink() -> BodySink:
    """A sink for an answer's body: outlined (big JSON pages too), never kept."""
    return BodySink(keep=ANSWER_OUTLINE_BYTES)


def sink_of(data: bytes | bytearray | memoryview | str | None) -> BodySink:
    """A sink holding ``data`` (an answer's body: outlined, never kept)."""
    sink = answer_sink()
    if data:
        sink.feed(data.encode() if isinstance(data, str) else data)
    return sink


def open_text(path: str, mode: str = "r") -> TextIO:
    """A tape file for text I/O; a ``.gz`` name is gzip-compressed (how the corpus is kept)."""
    if path.endswith(".gz"):
        return cast(TextIO, gzip.open(path, mode + "t", encoding="utf-8"))
    return cast(TextIO, open(path, mode, encoding="utf-8"))  # noqa: SIM115


def raw_body(body: Mapping[str, Any], blobs: Mapping[str, Mapping[str, Any]] | None = None) -> bytes | None:
    """The request bytes a tape kept, inline or as a blob (None when it kept neither), never
    more than the body's declared size (:func:`contract.tape.bounds.inflate`)."""
    declared = int(body.get("bytes", 0))
    if "z64" in body:
        return bounds.inflate(body["z64"], declared, "the request body")
    if body.get("blob") and blobs is not None and body.get("sha256") in blobs:
        blob = blobs[body["sha256"]]
        return bounds.inflate(blob["z64"], min(declared, int(blob["bytes"])),
                              f"the blob at line {blob.get(bounds.LINE_KEY)}")
    return None


def blob_bytes(line: Mapping[str, Any]) -> bytes:
    """The body a ``blob`` line holds."""
    return bounds.inflate(line["z64"], int(line["bytes"]), "a blob")


def read_tape(path: str, check_paths: bool = True) -> list[dict[str, Any]]:
    """Every line of a tape; ValueError (:class:`~contract.tape.bounds.TapeRefused` for what a
    recording cannot hold) names the first line that is not a tape line. A tape is untrusted:
    each line is read, counted and checked under ``contract.tape.bounds`` before it is parsed
    or used, and carries its number under :data:`~contract.tape.bounds.LINE_KEY`. ``check_paths``
    False: a recorder's own parts being merged (a path off the service is refused on replay)."""
    import os

    lines: list[dict[str, Any]] = []
    budget = None
    if path.endswith(".gz"):
        budget = max(bounds.INFLATION_FREE_CHARS, int(bounds.MAX_TAPE_INFLATION * os.path.getsize(path)))
    read = 0
    with open_text(path) as f:
        n = 0
        while True:
            text = f.readline(bounds.MAX_LINE_CHARS + 1)
            if not text:
                break
            n += 1
            read += len(text)
            if len(text) > bounds.MAX_LINE_CHARS:
                raise bounds.TapeRefused(f"{path}:{n}: a line longer than {bounds.MAX_LINE_CHARS} characters; "
                                         "no recording holds one")
            if budget is not None and read > budget:
                raise bounds.TapeRefused(f"{path}:{n}: the compressed tape expands past {bounds.MAX_TAPE_INFLATION:g} "
                                         "times its size; refused as a decompression bomb")
            if not text.strip():
                continue
            if bounds.count_values(text) > bounds.MAX_LINE_VALUES:
                raise bounds.TapeRefused(f"{path}:{n}: a line of more than {bounds.MAX_LINE_VALUES} JSON values")
            try:
                obj = json.loads(text)
            except RecursionError:
                raise bounds.TapeRefused(f"{path}:{n}: JSON nested too deep") from None
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
            if not isinstance(obj, dict) or obj.get("kind") not in LINE_KINDS:
                raise ValueError(f"{path}:{n}: not a tape line")
            try:
                bounds.check_line(obj, on_service if check_paths else lambda _: True)
            except bounds.TapeRefused as exc:
                raise bounds.TapeRefused(f"{path}:{n}: {exc}") from None
            obj[bounds.LINE_KEY] = n
            lines.append(obj)
    if not lines or lines[0].get("format") != TAPE_FORMAT:
        raise ValueError(f"{path}: not a {TAPE_FORMAT} file (no meta line)")
    if lines[0].get("version") not in READ_VERSIONS:
        raise ValueError(f"{path}: tape version {lines[0].get('version')}, this kit reads "
                         f"{', '.join(map(str, READ_VERSIONS))}")
    return in_seq_order(lines)


def in_seq_order(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines with the exchanges in sequence order, each other line where it was: a
    recorder numbers an exchange when it ends, but may write it after a later one."""
    slots = [i for i, line in enumerate(lines) if line["kind"] == "exchange"]
    ordered = sorted((lines[i] for i in slots), key=lambda x: int(x.get("seq", 0)))
    out = list(lines)
    for i, line in zip(slots, ordered, strict=True):
        out[i] = line
    return out


def merge_parts(path: str, parts: list[str]) -> None:
    """One tape from several recorders' parts (xdist workers), each part's exchanges in
    turn and renumbered; one meta line, each blob once, one end line with the longest
    part's duration and the parts' body counts added up."""
    seq, seconds = 0, 0.0
    blobs: set[str] = set()
    bodies: dict[str, Any] = {}
    with open_text(path, "w") as out:
        for n, part in enumerate(parts):
            for line in read_tape(part, check_paths=False):
                if line["kind"] == "end":
                    seconds = max(seconds, float(line.get("seconds", 0)))
                    _add_counts(bodies, line.get("bodies") or {})
                    continue
                if (line["kind"] == "meta" and n) or (line["kind"] == "blob" and line["sha256"] in blobs):
                    continue
                if line["kind"] == "blob":
                    blobs.add(line["sha256"])
                if line["kind"] == "exchange":
                    seq += 1
                    line["seq"] = seq
                line.pop(bounds.LINE_KEY, None)
                out.write(json.dumps(line, separators=(",", ":")) + "\n")
        bodies["blobs"] = len(blobs)
        out.write(json.dumps({"kind": "end", "seconds": seconds, "exchanges": seq, "bodies": bodies}) + "\n")


def _add_counts(total: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if isinstance(value, int) and not isinstance(value, bool) and key not in ("budget_bytes", "over_budget_at"):
            total[key] = total.get(key, 0) + value
        else:
            total.setdefault(key, value)


def tape_summary(path: str) -> str:
    """One sentence on a finished tape: exchanges, size, and what its request bodies kept."""
    import os

    last = ""
    with open_text(path) as f:
        for text in f:
            if text.strip():
                last = text
    end = json.loads(last) if last else {}
    b = end.get("bodies") or {}
    size = os.path.getsize(path) / (1024 * 1024)
    kept = (f"{b.get('inline', 0)} inline, {b.get('stored', 0)} stored out of line ({b.get('blobs', 0)} "
            f"distinct, {b.get('blob_bytes', 0) / (1024 * 1024):.1f} MiB), {b.get('rebuilt', 0)} kept as "
            f"their skeleton, {b.get('withheld', 0)} withheld, {b.get('not_kept', 0)} not kept")
    return f"parity tape {path}: {end.get('exchanges', '?')} exchanges, {size:.1f} MiB; request bodies: {kept}"
