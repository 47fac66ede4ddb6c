"""The load meter: a ``requests`` session that times every try of every call the kit's client
makes, counts its bytes, and hands the whole exchange to a judge and to Locust.

The client streams each answer and reads it through ``client.calls.answer_reading.read_answer`` (under
its size cap, closing the response at the end); the meter watches that read: the body's
pieces are kept as they pass (no more than the client itself reads), and the exchange is
complete when the response is closed, so its time covers the whole body. A try that gets
no answer (refused, cut, timed out) is complete when its exception is raised.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import requests

from conformance.drivers.answer_bounds import mount_route_bounds
from conformance.judge.answers import Judge
from conformance.judge.exchange import Exchange, kept_body
from contract.idempotency import IDEMPOTENCY_KEY_HEADER
from contract.routes import route_of

Report = Callable[[Exchange], None]


class AnswerUnread(Exception):
    """The client stopped reading an answer before its end (AnswerTooLarge)."""


def wire_bytes(headers: Mapping[str, str], body: int, first_line: int) -> int:
    """Bytes of one HTTP message: its first line, header lines and body."""
    return first_line + sum(len(k) + len(v) + 4 for k, v in headers.items()) + body + 2


class MeteredSession(requests.Session):
    """A session whose every try is judged (``judge``) and reported (``report``)."""

    def __init__(self, judge: Judge, report: Report) -> None:
        super().__init__()
        # The bounds the client's own session has (it takes this one instead): each answer
        # under its route's bound, decoded bytes and inflation counted, and the read timeout
        # as the bound of the whole exchange (a dripping or endless answer cannot hold a user).
        mount_route_bounds(self)
        self.judge = judge
        self.report = report

    def request(self, method: str | bytes, url: str | bytes, *args: Any,
                **kwargs: Any) -> requests.Response:
        method, url = str(method), str(url)
        data = kwargs.get("data")
        body, size = kept_body(data)
        sent_headers = kwargs.get("headers") or {}
        ex = Exchange(route_of(method, url), method, url, time.time(), size,
                      request_body=body, key=sent_headers.get(IDEMPOTENCY_KEY_HEADER),
                      query=dict(kwargs.get("params") or {}))
        self.judge.sending(ex)
        began = time.perf_counter()
        try:
            response = super().request(method, url, *args, **kwargs)
        except requests.RequestException as exc:
            ex.error = exc
            self._complete(ex, began)
            raise
        prepared = response.request
        ex.sent = wire_bytes(prepared.headers, ex.sent, len(method) + len(url) + 11)
        _watch(response, ex, lambda: self._complete(ex, began))
        return response

    def _complete(self, ex: Exchange, began: float) -> None:
        ex.elapsed_ms = (time.perf_counter() - began) * 1000.0
        self.judge.answered(ex)
        self.report(ex)


def _watch(response: requests.Response, ex: Exchange, done: Callable[[], None]) -> None:
    """Keep the pieces of ``response``'s body as its reader takes them; ``done`` once it is
    closed (exactly once, also when the read failed)."""
    reader, closer = response.iter_content, response.close
    pieces: list[bytes] = []
    finished = read_whole = False

    def iter_content(*args: Any, **kwargs: Any) -> Iterator[bytes]:
        nonlocal read_whole
        try:
            for piece in reader(*args, **kwargs):
                pieces.append(piece)
                yield piece
        except requests.RequestException as exc:
            ex.error = exc
            raise
        read_whole = True

    def close() -> None:
        nonlocal finished
        try:
            closer()
        finally:
            if not finished:
                finished = True
                if ex.error is None and not read_whole:  # refused mid-way (over the size cap)
                    ex.error = AnswerUnread(f"{ex.name} answer abandoned before its end")
                ex.status = response.status_code if ex.error is None else None
                ex.headers = response.headers
                ex.body = b"".join(pieces)
                ex.received = wire_bytes(response.headers, len(ex.body), 17)
                done()

    response.iter_content = iter_content  # type: ignore[method-assign]
    response.close = close  # type: ignore[method-assign]
