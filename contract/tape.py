"""The parity recording format ("tape"): one JSON object per line, the same whoever records.

The conformance suite (a ``requests`` hook) and the fake (an ASGI middleware) both write
tapes through :class:`TapeWriter`, so a recording of the embedded fake and one of a real
server can be replayed and diffed by the same code (``gs-parity``). It lives in
``contract`` because both sides need it and neither may import the other.

A line is ``{"kind": "meta"|"server"|"exchange", ...}``. Bodies are described, not dumped:
JSON as JSON, DSSST1 frames and chunks as their outline (tree, tensor dtypes and shapes,
sha256), anything else as size + sha256. Raw request bytes are kept (zlib + base64) only
when they compress to ``keep_bytes`` or less, so the request can be re-sent; a body of one
repeated byte is kept as that byte and its length. Credentials never reach the file: Authorization values become a
token label (``<token-1>``), credential-looking JSON keys are masked, and every known
secret is scrubbed from each line as a last guard.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import threading
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

from contract.auth import bearer_token
from contract.errors import REQUEST_ID_HEADER
from contract.routes import PREFIX_TEMPLATE, ROUTES, Route
from contract.tape_outline import (  # noqa: F401  (re-exported: the tape's vocabulary)
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
TAPE_VERSION = 1
#: A request body is kept (zlib, base64) so a replay can re-send it when it compresses to
#: at most this many bytes; a bigger one is kept as its outline only.
KEEP_BYTES = 96 * 1024
#: Request headers kept besides Authorization (whose value becomes a token label).
REQUEST_HEADERS = ("content-type", "x-snowflake-authorization-token-type", "idempotency-key")
RESPONSE_HEADERS = ("content-type", REQUEST_ID_HEADER.lower(), "retry-after", "location", "allow")
#: The label of the fake's admin credential in a tape (a replay sends its own there).
ADMIN_LABEL = "Bearer <admin-token>"


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


def _template_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[a-z_]+\})", template)
    pattern = "".join(f"(?P<{p[1:-1]}>[^/]+)" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(pattern + "$")


_PREFIX_RE = re.compile("^" + _template_regex(PREFIX_TEMPLATE).pattern.rstrip("$"))
_ROUTE_RES: list[tuple[Route, re.Pattern[str]]] = sorted(
    ((r, _template_regex(r.path)) for r in ROUTES),
    key=lambda pair: -len(re.sub(r"\{[a-z_]+\}", "", pair[0].path)),
)


def split_path(path: str) -> tuple[str, str] | None:
    """``(prefix, rest)`` for a path under the service prefix, else None."""
    m = _PREFIX_RE.match(path)
    if m is None:
        return None
    return path[: m.end()], path[m.end() :] or "/"


def admin_route(path: str) -> str | None:
    """``admin:state``, ``admin:faults``, ``admin:jobs``: the fake's admin API by area."""
    if not path.startswith("/_fake/"):
        return None
    return "admin:" + path[len("/_fake/"):].split("/", 1)[0]


def match_route(method: str, rest: str) -> Route | None:
    """The contract route a request path (relative to the prefix) addresses."""
    for r, rx in _ROUTE_RES:
        if r.method == method and rx.match(rest):
            return r
    return None


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
                 meta: Mapping[str, Any] | None = None, append: bool = False) -> None:
        self.path = path
        self.tokens = tuple(t for t in tokens if t)
        #: The fake's admin credential, labelled apart from other unknown credentials.
        self.admin: str | None = None
        self.keep_bytes = keep_bytes
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

    def record(self, ex: Exchange) -> None:
        with self._lock:
            self._seq += 1
            seq = self._seq
        self._write(self.line(ex, seq))

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
                "body": self._safe(ex.request_body.describe(ctype_in)),
            },
            "response": {
                "status": ex.status,
                "headers": resp_headers,
                "body": ex.response_body.describe(resp_headers.get("content-type", "")),
                **({"error": ex.error} if ex.error else {}),
                **ex.extra,
            },
        }

    def _safe(self, body: dict[str, Any] | None) -> dict[str, Any] | None:
        """Withhold kept request bytes that carry a credential (the outline stays)."""
        if not body or "z64" not in body:
            return body
        raw = raw_body(body) or b""
        text = raw.decode("utf-8", "replace")
        if body.pop("masked", False) or any(t in text for t in self.tokens) or scrub_text(text) != text:
            del body["z64"]
            body["withheld"] = "the bytes held a credential"
        return body

    def _write(self, obj: dict[str, Any]) -> None:
        text = scrub_text(json.dumps(obj, separators=(",", ":")), self.tokens)
        with self._lock:
            if self._file is not None:
                self._file.write(text + "\n")
                if not self._gzip:
                    self._file.flush()

    def close(self, summary: Mapping[str, Any] | None = None) -> None:
        """Close the file; an ``end`` line records the run's duration (and ``summary``)."""
        if self._file is not None:
            self._write({"kind": "end", "seconds": round(time.time() - self._t0, 3),
                         "exchanges": self._seq, **dict(summary or {})})
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def sink_of(data: bytes | bytearray | memoryview | str | None, squeeze_cap: int = 0) -> BodySink:
    sink = BodySink(squeeze_cap=squeeze_cap)
    if data:
        sink.feed(data.encode() if isinstance(data, str) else data)
    return sink


def open_text(path: str, mode: str = "r") -> TextIO:
    """A tape file for text I/O; a ``.gz`` name is gzip-compressed (how the corpus is kept)."""
    if path.endswith(".gz"):
        return cast(TextIO, gzip.open(path, mode + "t", encoding="utf-8"))
    return cast(TextIO, open(path, mode, encoding="utf-8"))  # noqa: SIM115


def raw_body(body: Mapping[str, Any]) -> bytes | None:
    """The request bytes a tape kept (None when it kept only their outline)."""
    if "z64" in body:
        return zlib.decompress(base64.b64decode(body["z64"]))
    return None


def read_tape(path: str) -> list[dict[str, Any]]:
    """Every line of a tape; ValueError names the first line that is not a tape line."""
    lines: list[dict[str, Any]] = []
    with open_text(path) as f:
        for n, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
            if not isinstance(obj, dict) or obj.get("kind") not in ("meta", "server", "exchange", "end"):
                raise ValueError(f"{path}:{n}: not a tape line")
            lines.append(obj)
    if not lines or lines[0].get("format") != TAPE_FORMAT:
        raise ValueError(f"{path}: not a {TAPE_FORMAT} file (no meta line)")
    if lines[0].get("version") != TAPE_VERSION:
        raise ValueError(f"{path}: tape version {lines[0].get('version')}, this kit reads {TAPE_VERSION}")
    return lines


def merge_parts(path: str, parts: list[str]) -> None:
    """One tape from several recorders' parts (xdist workers), each part's exchanges in
    turn and renumbered; one meta line, one end line with the longest part's duration."""
    seq, seconds = 0, 0.0
    with open_text(path, "w") as out:
        for n, part in enumerate(parts):
            for line in read_tape(part):
                if line["kind"] == "end":
                    seconds = max(seconds, float(line.get("seconds", 0)))
                    continue
                if line["kind"] == "meta" and n:
                    continue
                if line["kind"] == "exchange":
                    seq += 1
                    line["seq"] = seq
                out.write(json.dumps(line, separators=(",", ":")) + "\n")
        out.write(json.dumps({"kind": "end", "seconds": seconds, "exchanges": seq}) + "\n")
