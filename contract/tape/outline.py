"""How a tape describes a body and keeps credentials out (see ``contract.tape``).

A body becomes its outline: JSON as JSON (inline base64 frames decoded to their outline,
long lists shortened to their ends), a DSSST1 frame as its tree with tensor dtypes, shapes
and a short content digest, a chunk as its descriptor and payload size. Credential-looking
JSON keys are masked and credential-looking text is scrubbed (``contract.redact``).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable
from typing import Any

from contract import wire
from contract.redact import REDACTED, mask, scrub_text, secret_key  # noqa: F401  (the tape's vocabulary)
from contract.wire.frame import parse_frame

#: Bodies up to this size are parsed for their outline (JSON or frame).
OUTLINE_BYTES = 4 * 1024 * 1024
#: Answers up to this size are outlined: a page of result chunks is JSON of tens of MiB,
#: and a replay must read its cursor (a request body's frame is read by its scan instead).
ANSWER_OUTLINE_BYTES = 128 * 1024 * 1024
#: Hex digits of a tensor's content digest in its outline (compared only by exact replays).
TENSOR_DIGEST = 12
#: A list longer than this is kept as its length, first and last items (``$list``).
LIST_HEAD, LIST_TAIL = 4, 2


class BodySink:
    """Collects a body incrementally: its hash, size, a bounded head and one-byte fill; for a
    request body (``squeeze_cap`` > 0) also a zlib stream, kept while it compresses to at most
    ``pack_cap`` bytes (at least ``squeeze_cap``), whether a known secret passed by, and the
    body read as a frame (``scan``, a ``contract.tape.frame_stream.FrameScan``). ``lean``: stop
    compressing a frame past ``squeeze_cap`` once its header is read (its skeleton will do)."""

    def __init__(self, keep: int = OUTLINE_BYTES, squeeze_cap: int = 0, pack_cap: int = 0,
                 scan: Any = None, secrets: Iterable[str] = (), lean: bool = False) -> None:
        self.keep = keep
        self.head = bytearray()
        self.size = 0
        self.fill: int | None = None
        self._uniform = True
        self._sha = hashlib.sha256()
        self._cap = squeeze_cap
        self._pack_cap = max(pack_cap, squeeze_cap)
        self._z: Any = zlib.compressobj(6) if squeeze_cap else None
        self._zparts: list[bytes] = []
        self._zsize = 0
        self.scan = scan
        self.lean = lean
        self.secrets = tuple(s.encode() for s in secrets if s)
        self._tail = b""
        self.secret_seen = False
        #: The body compressed to more than ``pack_cap``: its bytes were let go.
        self.overflowed = False

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
        if self.scan is not None:
            self.scan.feed(mv)
        if self.secrets and not self.secret_seen:
            self._look_for_secrets(mv)
        if self._z is not None:
            self._pack(mv)

    def _pack(self, mv: memoryview) -> None:
        part = self._z.compress(mv)
        self._zparts.append(part)
        self._zsize += len(part)
        framed = self.scan is not None and self.scan.header is not None and self.scan.failed is None
        self.overflowed = self._zsize > self._pack_cap
        if self.overflowed or (self.lean and framed and self._zsize > self._cap):
            self._z, self._zparts = None, []

    def _look_for_secrets(self, mv: memoryview) -> None:
        longest = max(len(s) for s in self.secrets)
        window = self._tail + bytes(mv)
        self.secret_seen = any(s in window for s in self.secrets)
        self._tail = window[-(longest - 1):] if longest > 1 else b""

    @property
    def complete(self) -> bool:
        return len(self.head) == self.size

    def end(self) -> None:
        """The body has ended: a request chunk's place in its frame is settled now (its next
        chunk may arrive before this exchange is written)."""
        if self.scan is not None:
            self.scan.close()

    def packed(self) -> bytes | None:
        """The whole body, zlib-compressed, if it fitted under ``pack_cap``."""
        if self._z is None:
            return b"".join(self._zparts) if self._zparts else None
        data = b"".join(self._zparts) + self._z.flush()
        self._z, self._zparts = None, [data]
        return data if len(data) <= self._pack_cap else None

    def describe(self, content_type: str = "") -> dict[str, Any] | None:
        """The body's outline in a tape (None for an empty body); what a request keeps of its
        bytes is the writer's business (``contract.tape.body_store``)."""
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
    frame = parse_frame(memoryview(data), wire.DEFAULT_LIMITS)
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
