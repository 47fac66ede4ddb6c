"""One HTTP exchange as an observer saw it: what was sent, what came back, how long it took.

gs-load's meter (:mod:`conformance.load.measure.meter`), gs-proxy and a tape
(:mod:`conformance.judge.tape`) build it; the judge (:mod:`conformance.judge`) and
Locust's statistics read it. Nothing here sends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from contract.errors import find_error_code
from contract.routes import Route
from contract.wire import WireError, frame_head_size, read_chunk_head


def path_params(route: Route, url: str) -> dict[str, str]:
    """The path parameters (job_id, request_id, ...) of a call to ``route`` at ``url``."""
    return route.match(url) or {}


def final_chunk(route: Route | None, body: bytes | None) -> bool:
    """Is this body the last (or only) piece of its call? Anything but a request chunk is;
    a request chunk is when its index is its group's last. ``body`` may be the chunk's
    header alone (what :func:`kept_body` keeps of a body sent as pieces)."""
    if route is None or not route.chunked or not body:
        return True
    try:
        head = read_chunk_head(body)
    except WireError:
        return True
    if head is None:
        return True
    return int(head.desc.get("chunk_idx", 0)) == int(head.desc.get("total_chunks", 1)) - 1


def kept_body(data: Any) -> tuple[bytes | None, int]:
    """What the meter keeps of a request body, and the body's size. Bytes are kept whole; a
    body sent as pieces (the kit client's chunk uploads: a length, then views of the frame)
    only up to its frame header, which is all :func:`final_chunk` reads: copying every
    chunk would double the client's memory under load."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data), len(data)
    if not hasattr(data, "__len__") or not hasattr(data, "__iter__") or isinstance(data, (str, Mapping)):
        return None, 0
    head = bytearray()
    for piece in data:
        head += piece
        need = frame_head_size(head)
        if need is not None and len(head) >= need:
            break
    return bytes(head), len(data)


@dataclass
class Exchange:
    """One try of one call. ``status`` None: no answer (``error`` says why)."""

    route: Route | None
    method: str
    url: str
    started: float
    sent: int
    request_body: bytes | None = None
    key: str | None = None
    query: Mapping[str, Any] = field(default_factory=dict)
    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    elapsed_ms: float = 0.0
    error: BaseException | None = None
    #: Bytes of the answer on the wire (status line, headers, body); 0 without one.
    received: int = 0
    #: The request's headers (a passive observer's; the load meter sets ``key`` only).
    request_headers: Mapping[str, str] = field(default_factory=dict)
    #: The request chunk's descriptor and payload size when known without the body (a
    #: tape keeps the descriptor, not the frame); else read off ``request_body``.
    chunk_desc: Mapping[str, Any] | None = None
    chunk_payload: int = 0
    #: sha256 of the whole request body ('' when the observer did not hash it).
    body_sha256: str = ""
    #: False when the answer body was too large to keep whole (its models are not judged).
    body_whole: bool = True
    #: A request chunk's group frame hash through this chunk's payload (a hashlib object),
    #: when the observer hashed it (:meth:`conformance.judge.requests.RequestRules.group_hash`).
    frame_hash: Any = None

    @property
    def final(self) -> bool:
        """Is this the last (or only) piece of its call (:func:`final_chunk`)?"""
        if self.chunk_desc is not None and self.route is not None and self.route.chunked:
            desc = self.chunk_desc
            return int(desc.get("chunk_idx", 0)) == int(desc.get("total_chunks", 1)) - 1
        return final_chunk(self.route, self.request_body)

    def header(self, name: str) -> str | None:
        """A request header, by case-insensitive name."""
        lower = name.lower()
        for key, value in self.request_headers.items():
            if key.lower() == lower:
                return value
        return None

    @property
    def name(self) -> str:
        return self.route.name if self.route else "other"

    @cached_property
    def params(self) -> dict[str, str]:
        return path_params(self.route, self.url) if self.route else {}

    @cached_property
    def operation_type(self) -> str | None:
        if self.name != "operation" or not self.request_body:
            return None
        found = self.request_json
        kind = found.get("operation_type") if isinstance(found, Mapping) else None
        return kind if isinstance(kind, str) else None

    @cached_property
    def request_json(self) -> Any:
        """The request body as JSON (None when it is not JSON or was not kept)."""
        if not self.request_body or self.request_body[:1] not in (b"{", b"["):
            return None
        try:
            return json.loads(self.request_body)
        except (ValueError, RecursionError, UnicodeDecodeError):
            return None

    @property
    def fake_op(self) -> str:
        """The op name the fake's counters use: the route, or ``op:<operation_type>``."""
        kind = self.operation_type
        return f"op:{kind}" if kind else self.name

    @property
    def submits(self) -> bool:
        """A data-plane POST (a call the server may execute)."""
        return self.method == "POST" and self.route is not None and self.route.data_plane

    @cached_property
    def json(self) -> Any:
        """The answer body as JSON (None when it is not JSON)."""
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None

    @property
    def code(self) -> str | None:
        return find_error_code(self.json)

    def describe(self) -> str:
        """``POST .../step -> 500 {...}``: the exchange in one line, for a report's examples."""
        path = urlsplit(self.url).path
        shown = path.split("/", 8)[-1] if path.count("/") > 8 else path
        what = f"{self.status}" if self.status is not None else f"no answer ({self.error!r})"
        return f"{self.method} .../{shown} -> {what} {self.body[:160]!r}"
