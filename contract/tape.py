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
import hashlib
import json
import re
import threading
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

from contract import wire
from contract.auth import bearer_token
from contract.errors import REQUEST_ID_HEADER
from contract.routes import PREFIX_TEMPLATE, ROUTES, Route

TAPE_FORMAT = "gs-parity-tape"
TAPE_VERSION = 1
#: A request body is kept (zlib, base64) so a replay can re-send it when it compresses to
#: at most this many bytes; a bigger one is kept as its outline only.
KEEP_BYTES = 96 * 1024
#: Bodies up to this size are parsed for their outline (JSON or frame).
OUTLINE_BYTES = 4 * 1024 * 1024
#: Hex digits of a tensor's content digest in its outline (compared only by exact replays).
TENSOR_DIGEST = 12
#: A list longer than this is kept as its length, first and last items (``$list``).
LIST_HEAD, LIST_TAIL = 4, 2
REDACTED = "<redacted>"
#: Request headers kept besides Authorization (whose value becomes a token label).
REQUEST_HEADERS = ("content-type", "x-snowflake-authorization-token-type", "idempotency-key")
RESPONSE_HEADERS = ("content-type", REQUEST_ID_HEADER.lower(), "retry-after", "location")
_SECRET_KEY = re.compile(
    r"(^|[_-])(access[_-]?token|token|secret|password|passwd|credentials?|authori[sz]ation|"
    r"api[_-]?key|private[_-]?key|cookie|pat)$", re.I)
_SECRET_TEXT = re.compile(r"(Bearer\s+)(?!<)[^\s\"',]+|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")


def secret_key(name: str) -> bool:
    """A JSON key or header whose value is a credential."""
    return bool(_SECRET_KEY.search(name)) and name.lower() != "x-snowflake-authorization-token-type"


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Mask bearer values, JWT-like strings and every known secret in ``text``."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return _SECRET_TEXT.sub(lambda m: (m.group(1) or "") + REDACTED, text)


def mask(value: Any) -> Any:
    """A JSON value with credential-looking keys masked."""
    if isinstance(value, dict):
        return {k: (REDACTED if secret_key(str(k)) and isinstance(v, str) and v else mask(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    return value


def token_label(authorization: str | None, tokens: tuple[str, ...]) -> str | None:
    """``Authorization`` as a label: ``Bearer <token-N>`` for the N-th known token,
    ``Bearer <token-other>`` for any other credential; None when the header is absent."""
    if authorization is None:
        return None
    token = bearer_token(authorization)
    if token is None:
        scheme, _, rest = authorization.strip().partition(" ")
        return f"{scheme} <credential>" if rest.strip() else authorization.strip()
    for i, known in enumerate(tokens, 1):
        if token == known:
            return f"Bearer <token-{i}>"
    return "Bearer <token-other>"


# --- bodies ---------------------------------------------------------------------------------


class BodySink:
    """Collects a body incrementally: its hash, size, a bounded head, one-byte fill, and
    (for request bodies) a zlib stream kept while it stays under ``squeeze_cap`` bytes."""

    def __init__(self, keep: int = OUTLINE_BYTES, squeeze_cap: int = 0) -> None:
        self.keep = keep
        self.head = bytearray()
        self.size = 0
        self.fill: int | None = None
        self._uniform = True
        self._sha = hashlib.sha256()
        self._cap = squeeze_cap
        self._z: Any = zlib.compressobj(6) if squeeze_cap else None
        self._zparts: list[bytes] = []
        self._zsize = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        mv = memoryview(data)
        self._sha.update(mv)
        if self._uniform:
            first = mv[0] if self.size == 0 else self.fill
            self._uniform = first is not None and bytes(mv).count(first) == len(mv)
            self.fill = first if self._uniform else None
        self.size += len(mv)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += mv[:room]
        if self._z is not None:
            part = self._z.compress(mv)
            self._zparts.append(part)
            self._zsize += len(part)
            if self._zsize > self._cap:
                self._z, self._zparts = None, []

    @property
    def complete(self) -> bool:
        return len(self.head) == self.size

    def squeezed(self) -> bytes | None:
        """The whole body, zlib-compressed, if it fitted under the cap."""
        if self._z is None:
            return None
        data = b"".join(self._zparts) + self._z.flush()
        self._z, self._zparts = None, [data]
        return data if len(data) <= self._cap else None

    def describe(self, content_type: str = "") -> dict[str, Any] | None:
        """The body's entry in a tape (None for an empty body)."""
        if self.size == 0:
            return None
        out: dict[str, Any] = {"bytes": self.size}
        if self._cap:  # a request: the hash names exactly what was sent
            out["sha256"] = self._sha.hexdigest()
        data = bytes(self.head) if self.complete else b""
        if data:
            out.update(outline(data, content_type))
        if self.fill is not None and self.size > 1:
            out["fill"] = self.fill
        elif not out.get("exact"):
            packed = self.squeezed()
            if packed is not None:
                out["z64"] = base64.b64encode(packed).decode("ascii")
        if not self._cap:
            out.pop("exact", None)  # only a request body needs to say it can be rebuilt
        return out


def outline(data: bytes, content_type: str = "") -> dict[str, Any]:
    """``{"json": value}``, ``{"frame": ...}``, ``{"chunk": ...}``, ``{"text": ...}`` or {}."""
    if data[:1] in (b"{", b"[") or "json" in content_type:
        try:
            value = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            value = None
        else:
            shown = outline_json(value)
            exact = shown == value and json.dumps(value).encode() == data
            masked = mask(shown)
            return {"json": masked, "exact": exact, **({"masked": True} if masked != shown else {})}
    if len(data) >= 8 and data[8:9] == b"{":
        try:
            return frame_outline(data)
        except (wire.WireError, ValueError, KeyError, TypeError):
            pass
    if len(data) <= 2048:
        try:
            return {"text": data.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    return {}


def frame_outline(data: bytes) -> dict[str, Any]:
    """A DSSST1 frame or chunk as structure only: no tensor bytes."""
    frame = wire._parse_frame(memoryview(data), wire._DEFAULT_LIMITS)
    op = mask(frame.op) if frame.op else None
    chunk = wire.split_chunk(data)
    if chunk is not None:
        kind, desc, payload = chunk
        body: dict[str, Any] = {"kind": kind, "descriptor": mask(desc), "payload_bytes": len(payload)}
        return {"chunk": body}

    def node(n: Any) -> Any:
        tag = n[0]
        if tag == "j":
            return n[1]
        if tag == "t":
            entry = frame.entries[n[1]]
            digest = hashlib.sha256(frame.data[entry.begin:entry.end]).hexdigest()[:TENSOR_DIGEST]
            return {"$tensor": entry.code, "shape": list(entry.shape), "sha": digest}
        if tag == "d":
            return {k: node(v) for k, v in n[1]}
        return [node(v) for v in n[1]]

    return {"frame": {"tree": mask(outline_json(node(frame.tree))), "op": op}}


def outline_json(value: Any) -> Any:
    """JSON with inline base64 frames replaced by their outline and chunk payloads by size."""
    if isinstance(value, dict):
        if wire.is_inline_frame(value):
            try:
                raw = wire.decode_inline(value)
                return {"$inline": frame_outline(raw), "bytes": len(raw)}
            except (wire.WireError, ValueError, KeyError, TypeError):
                return {**value, "payload_b64": f"<{len(value['payload_b64'])} base64 chars>"}
        out = {}
        for k, v in value.items():
            if k.endswith("_b64") and isinstance(v, str) and len(v) > 64:
                out[k] = {"$b64": len(v)}
            else:
                out[k] = outline_json(v)
        return out
    if isinstance(value, list):
        return compact_list([outline_json(v) for v in value])
    return value


def compact_list(items: list[Any]) -> Any:
    """A long list as ``{"$list": length, "head": [...], "tail": [...]}`` (tapes stay small;
    the comparison sees the length and the items at both ends)."""
    if len(items) <= LIST_HEAD + LIST_TAIL + 2:
        return items
    return {"$list": len(items), "head": items[:LIST_HEAD], "tail": items[-LIST_TAIL:]}


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
        label = token_label(auth, self.tokens)
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
