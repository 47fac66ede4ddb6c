"""What the raw driver keeps of an answer: one HTTP answer whole (:class:`Answer`) and a
request polled to its end with every page (:class:`Settled`), readable in whichever
delivery form its result came."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import requests
from requests.structures import CaseInsensitiveDict

from contract.errors import REQUEST_ID_HEADER, error_code_of, find_error_code
from contract.routes import JSON
from contract.states import REQUEST_TERMINAL, normalize_request_state

ResultForm = Literal["json", "inline", "chunks", "none"]


@dataclass
class Answer:
    """One HTTP answer, as received."""

    route: str
    method: str
    url: str
    status: int
    headers: CaseInsensitiveDict[str]
    raw: bytes
    body: Any
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def is_json(self) -> bool:
        return self.content_type == JSON or self.content_type.endswith("+json")

    @property
    def code(self) -> str | None:
        return find_error_code(self.body if self.body is not None else self.raw)

    @property
    def any_code(self) -> str | None:
        """The error code in any form spec §3.6 allows (string, integer, detail type)."""
        return error_code_of(self.body if self.body is not None else self.raw)

    @property
    def request_id_header(self) -> str | None:
        return self.headers.get(REQUEST_ID_HEADER)

    def field(self, name: str, default: Any = None) -> Any:
        return self.body.get(name, default) if isinstance(self.body, Mapping) else default

    def __str__(self) -> str:
        text = self.raw[:300].decode("utf-8", "replace")
        return f"{self.method} {self.url} -> {self.status} {text}"


@dataclass
class Settled:
    """A request polled to a terminal state, every page kept."""

    job_id: str
    request_id: str
    pages: list[Answer] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)

    @property
    def last(self) -> Answer:
        return self.pages[-1]

    @property
    def final_body(self) -> dict[str, Any]:
        """The last terminal page's body (cursor pages after it included)."""
        for page in reversed(self.pages):
            if isinstance(page.body, Mapping) and "status" in page.body:
                return dict(page.body)
        return {}

    @property
    def status(self) -> str:
        return normalize_request_state(self.final_body.get("status"))

    @property
    def raw_status(self) -> str:
        return str(self.final_body.get("status"))

    @property
    def result(self) -> Any:
        """The result a terminal page carries (None when none does): a page of a request
        still in flight may hold any empty form (``{}``, ``null``, absent; spec §6.8), so
        no page before the request ended is read as its result."""
        for page in self.pages:
            if not isinstance(page.body, Mapping):
                continue
            if normalize_request_state(page.body.get("status")) not in REQUEST_TERMINAL:
                continue
            if page.body.get("result") is not None:
                return page.body["result"]
        return None

    @property
    def error(self) -> Any:
        return self.final_body.get("error")

    @property
    def chunk_events(self) -> list[dict[str, Any]]:
        return [
            e for e in self.events if isinstance(e, Mapping) and e.get("type") == "result_chunk"
        ]

    @property
    def form(self) -> ResultForm:
        from contract.wire import is_inline_frame

        if self.chunk_events:
            return "chunks"
        if is_inline_frame(self.result):
            return "inline"
        return "json" if self.result is not None else "none"

    def frame_bytes(self) -> bytes | None:
        """The raw DSSST1 result frame (inline or reassembled), None for JSON results."""
        from contract import wire

        if self.form == "chunks":
            return wire.decode_result_chunk_events(self.chunk_events)
        if self.form == "inline":
            return wire.decode_inline(self.result)
        return None

    def decoded(self) -> Any:
        """The result object whatever the delivery form (``{}`` for none); raises WireError."""
        from contract import wire

        form = self.form
        if form == "chunks":
            return wire.loads(wire.decode_result_chunk_events(self.chunk_events))
        if form == "inline":
            return wire.loads(wire.decode_inline(self.result))
        return self.result if self.result is not None else {}



def answer_of(name: str, method: str, resp: requests.Response, elapsed: float) -> Answer:
    """The :class:`Answer` of ``resp``, its body parsed when it is JSON."""
    raw = resp.content or b""
    body: Any = None
    ctype = resp.headers.get("content-type", "")
    if raw and ("json" in ctype or raw[:1] in (b"{", b"[")):
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
    return Answer(
        name,
        method,
        resp.url,
        resp.status_code,
        CaseInsensitiveDict(resp.headers),
        raw,
        body,
        elapsed,
    )
