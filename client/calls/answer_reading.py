"""Reading one answer: its body under the client's size cap, then JSON or a typed error.

Memory follows bytes received, never bytes declared: a ``Content-Length`` over the cap is
refused before a byte of the body is read, and any body (declared, chunked or cut by the
connection's close) is read in pieces and abandoned as soon as it crosses the cap, so a
hostile or broken server cannot make the client hold more than the cap plus one piece.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import requests

from client.calls.bounded_read import AnswerTooBig
from client.errors import (
    AnswerTooLarge,
    ChunkGroupConflict,
    ChunkGroupMissingChunks,
    ChunkGroupRestartRequired,
    CortexHTTPError,
    ProtocolError,
)
from contract.errors import REQUEST_ID_HEADER, ErrorCode, error_code_of, find_error_code
from contract.limits import MiB
from contract.routes import Route

#: The most read from the socket at once (smaller when the cap is smaller).
READ_PIECE_BYTES = MiB

_ERROR_CLASSES: dict[str, type[CortexHTTPError]] = {
    ErrorCode.CHUNK_GROUP_RESTART_REQUIRED: ChunkGroupRestartRequired,
    ErrorCode.CHUNK_GROUP_CONFLICT: ChunkGroupConflict,
    ErrorCode.CHUNK_GROUP_MISSING_CHUNKS: ChunkGroupMissingChunks,
}


@dataclass
class ReadAnswer:
    """A successful answer: parsed JSON (``{}`` when empty) plus the request id header."""

    status: int
    body: Any
    snowflake_request_id: str | None


@dataclass(frozen=True)
class Received:
    """One answer as read off the wire: status, headers and the whole (capped) body."""

    route: Route
    url: str
    response: requests.Response
    content: bytes

    @property
    def status(self) -> int:
        return self.response.status_code

    @property
    def snowflake_request_id(self) -> str | None:
        return self.response.headers.get(REQUEST_ID_HEADER)

    @property
    def text(self) -> str:
        return self.content.decode(self.response.encoding or "utf-8", errors="replace")

    def context(self) -> dict[str, Any]:
        """What every error about this answer names (route, method, url, status, id)."""
        return {"route": self.route.name, "method": self.route.method, "url": self.url,
                "status": self.status, "snowflake_request_id": self.snowflake_request_id}


def _declared_length(response: requests.Response) -> int | None:
    try:
        return int(response.headers.get("Content-Length", ""))
    except ValueError:
        return None


def read_answer(route: Route, url: str, response: requests.Response, cap: int) -> Received:
    """Read a streamed response's body, refusing it (AnswerTooLarge) past ``cap`` bytes.

    Transport failures while reading (a cut, a time-out) surface as ``requests``
    exceptions, as they did when requests read the body itself.
    """
    with response:  # a refused answer's connection is closed, not left half-read
        declared = _declared_length(response)
        if declared is not None and declared > cap:
            raise _too_large(route, url, response, _over_cap(route, cap, f"declares {declared} bytes"))
        body = bytearray()
        try:
            for piece in response.iter_content(min(READ_PIECE_BYTES, cap + 1)):
                body += piece
                if len(body) > cap:
                    raise _too_large(route, url, response, _over_cap(route, cap, f"sent more than {cap} bytes"))
        except AnswerTooBig as exc:  # the session's bounds (client.calls.bounded_read), decoded bytes counted
            raise _too_large(route, url, response,
                             f"{route.name}: {exc} (max_answer_bytes, max_answer_inflation)") from None
        return Received(route, url, response, bytes(body))


def _over_cap(route: Route, cap: int, what: str) -> str:
    return (f"{route.name} answered a body that {what}, over the client's {cap}-byte bound for "
            "one answer of this route (max_answer_bytes, or the most the route can legitimately "
            "answer: contract.limits.answer_bound); refused before reading it all")


def _too_large(route: Route, url: str, response: requests.Response, message: str) -> AnswerTooLarge:
    return AnswerTooLarge(message, **Received(route, url, response, b"").context())


def _parse(content: bytes) -> Any:
    """JSON, or ``ValueError`` (a deeply nested body's RecursionError included)."""
    try:
        return json.loads(content)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _error_message(body: Any, text: str) -> str:
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
        detail = body.get("detail")
        if isinstance(detail, list) and detail:
            parts = []
            for item in detail:
                if isinstance(item, Mapping):
                    loc = ".".join(str(p) for p in item.get("loc", []))
                    parts.append(f"{loc}: {item.get('msg')}" if loc else str(item.get("msg")))
            if parts:
                return "; ".join(parts)
        if isinstance(detail, str) and detail:
            return detail
    return text[:500] or "no error body"


def error_from_answer(received: Received) -> CortexHTTPError:
    """The typed error for a non-2xx answer (code searched in nested/wrapped JSON)."""
    text = received.text
    try:
        body: Any = _parse(received.content)
    except ValueError:  # not JSON, or too deeply nested: the text is the body
        body = text
    code = find_error_code(body)
    cls = _ERROR_CLASSES.get(code or "", CortexHTTPError)
    # Integer codes and bare detail lists (spec §3.6) still name a code in the error.
    return cls(_error_message(body, text), body=body, code=code or error_code_of(body),
               **received.context())


def answer_of(received: Received) -> ReadAnswer:
    """Every service route answers JSON: anything else (a proxy's HTML page, a cut-off
    body) is a ProtocolError naming the route, status and request id, never a bare
    ValueError from deep inside the caller."""
    body: Any = {}
    if received.content:
        try:
            body = _parse(received.content)
        except ValueError:
            raise ProtocolError(
                f"{received.route.name} answered {received.status} with a body that is not "
                f"JSON: {received.text[:200]!r}",
                **received.context(),
            ) from None
    return ReadAnswer(received.status, body, received.snowflake_request_id)
