"""Reading request bodies so memory follows the bytes a client sends, never what it declares.

A body grows as its bytes arrive (a ``Content-Length`` is only checked against the limit),
a body that stalls longer than ``body_idle_s`` is answered 408 and freed, and the bytes
of every body being received at once are bounded by one budget (503 + Retry-After past
it). Without these, 40 connections that declare 60 MiB and send one byte each made the
fake allocate 2.4 GB and stall its event loop (issue 12).
"""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

from starlette.requests import ClientDisconnect, Request

from contract.errors import ErrorCode
from fake_gs.connections import BODY_DEADLINE_KEY
from fake_gs.errors import ApiError
from fake_gs.settings import FakeSettings

#: How much of an unwanted body is read and discarded so the client sees the answer.
DRAIN_CAP = 1024 * 1024 * 1024


class InflightBudget:
    """Bytes held by bodies still being received, across every connection of one fake.

    Only touched on the event loop, so it needs no lock."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.peak = 0

    def take(self, n: int) -> None:
        if self.held + n > self.limit:
            raise ApiError(ErrorCode.UNAVAILABLE,
                           f"the server is receiving {self.held} body bytes at once (the cap is {self.limit}); "
                           "retry later", headers={"retry-after": "1"})
        self.held += n
        self.peak = max(self.peak, self.held)

    def give(self, n: int) -> None:
        self.held = max(0, self.held - n)


class BodyReader:
    """Reads a request body at most once, never buffering past the limit."""

    def __init__(self, request: Request, settings: FakeSettings | None = None,
                 budget: InflightBudget | None = None) -> None:
        self.request = request
        headers = request.headers
        self.done = "content-length" not in headers and "transfer-encoding" not in headers
        self._peeked: bytearray | None = None
        self.idle_s = settings.body_idle_s if settings is not None else 0.0
        self.budget = budget
        #: Bytes this body counts against the in-flight budget (given back by :meth:`release`).
        self.held = 0
        self.timed_out = False
        #: Set by the connection once the body is not complete in time (fake_gs.connections).
        self.deadline = request.scope.get(BODY_DEADLINE_KEY)

    async def _receive(self) -> Any:
        if self.idle_s <= 0:
            message = await self.request.receive()
        else:
            try:
                message = await asyncio.wait_for(self.request.receive(), self.idle_s)
            except TimeoutError:
                self._time_out(f"no body bytes arrived for {self.idle_s:g} s")
        if self.deadline is not None and self.deadline.passed:
            self._time_out(f"the body did not complete within {self.deadline.seconds:g} s of its head")
        return message

    def _time_out(self, why: str) -> NoReturn:
        self.done = self.timed_out = True
        raise ApiError(ErrorCode.REQUEST_TIMEOUT, f"{why}; the request is dropped",
                       headers={"connection": "close"}) from None

    async def peek(self, limit: int) -> bytearray:
        """Read the body now and keep it for the next :meth:`read` (the fault hook peeks at
        an operation's type before the handler runs)."""
        if self._peeked is None:
            self._peeked = await self.read(limit)
        return self._peeked

    def _declared(self, limit: int) -> None:
        raw = self.request.headers.get("content-length")
        if raw is None:
            return
        try:
            declared = int(raw)
        except ValueError:
            raise ApiError(ErrorCode.INVALID_ARGUMENT, "Content-Length is not a number") from None
        if declared > limit:
            raise ApiError(ErrorCode.PAYLOAD_TOO_LARGE,
                           f"body of {declared} bytes exceeds the {limit}-byte limit; split it into request chunks")

    async def read(self, limit: int) -> bytearray:
        if self._peeked is not None:
            data, self._peeked = self._peeked, None
            if len(data) > limit:
                raise ApiError(ErrorCode.PAYLOAD_TOO_LARGE,
                               f"body exceeds the {limit}-byte limit; split it into request chunks")
            return data
        self._declared(limit)
        buf = bytearray()  # grows with what arrives: a declared length reserves nothing
        while not self.done:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.done = True
                raise ClientDisconnect()
            chunk = message.get("body", b"")
            if chunk:
                if len(buf) + len(chunk) > limit:
                    raise ApiError(ErrorCode.PAYLOAD_TOO_LARGE,
                                   f"body exceeds the {limit}-byte limit; split it into request chunks")
                if self.budget is not None:
                    self.budget.take(len(chunk))
                    self.held += len(chunk)
                buf += chunk
            if not message.get("more_body", False):
                self.done = True
        return buf

    def release(self) -> None:
        """The call is over: its body bytes no longer count as in flight."""
        if self.budget is not None and self.held:
            self.budget.give(self.held)
        self.held = 0
        self._peeked = None

    async def drain(self) -> None:
        """Discard what is left of the body so the client is not cut off mid-send (a body
        that stalls is not waited for past the idle time)."""
        seen = 0
        while not self.done and seen < DRAIN_CAP:
            try:
                message = await self._receive()
            except ApiError:
                return
            if message["type"] == "http.disconnect":
                self.done = True
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                self.done = True
