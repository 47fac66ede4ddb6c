"""Reading request bodies so memory follows the bytes a client sends, never what it declares.

A body grows as its bytes arrive (a ``Content-Length`` is only checked against the limit),
or is handed on piece by piece as it arrives (:meth:`BodyReader.chunks`: chunk uploads go
straight into their group's buffer); a body that stalls longer than ``body_idle_s`` is
answered 408 and freed, and the bytes of every body being received at once are bounded by
one budget shared fairly between accounts (503 + Retry-After past it). Without these, 40
connections that declare 60 MiB and send one byte each made the fake allocate 2.4 GB and
stall its event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn

from starlette.requests import ClientDisconnect, Request

from contract.errors import ErrorCode, detail_entry
from fake_gs.answers.refusals import ApiError
from fake_gs.chunking import shares
from fake_gs.http.connections import BODY_DEADLINE_KEY
from fake_gs.settings import FakeSettings

#: How much of an unwanted body is read and discarded so the client sees the answer.
DRAIN_CAP = 1024 * 1024 * 1024


class InflightBudget:
    """Bytes held by bodies still being received, across every connection of one fake,
    shared fairly between accounts (:mod:`fake_gs.chunking.shares`): when it is full, an account
    within its share gets room from the bodies of accounts over theirs (their least
    recently active bodies still arriving are dropped: 503 + Retry-After, their bytes freed
    at once), an account over its share is answered 503 at once.

    Only touched on the event loop, so it needs no lock."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.peak = 0
        #: Bytes in flight per account, and the readers holding them.
        self.by_account: dict[str, int] = {}
        self.readers: dict[str, set[BodyReader]] = {}
        #: Bodies dropped to make room for another account (``GET /_fake/budgets``).
        self.evicted = 0

    def describe(self) -> dict[str, int]:
        return {"limit": self.limit, "held": self.held, "peak": self.peak, "evicted": self.evicted}

    def take(self, reader: BodyReader, n: int) -> None:
        owner = reader.owner
        if self.held + n > self.limit:
            self._make_room(owner, n)
        self.held += n
        self.by_account[owner] = self.by_account.get(owner, 0) + n
        self.readers.setdefault(owner, set()).add(reader)
        reader.held += n
        self.peak = max(self.peak, self.held)

    def _full(self, owner: str, n: int, share: int) -> ApiError:
        return ApiError(ErrorCode.UNAVAILABLE,
                        f"the server is receiving {self.held} body bytes at once (the cap is {self.limit}; this "
                        f"account's share while others send is {share}); retry later", headers={"retry-after": "1"})

    def _make_room(self, owner: str, n: int) -> None:
        verdict = shares.judge(self.by_account, owner, n, self.limit)
        if verdict.outcome == shares.OVER_SHARE:
            raise self._full(owner, n, verdict.share)
        while self.held + n > self.limit:
            victim = self._victim(owner)
            if victim is None:
                raise self._full(owner, n, verdict.share)
            self.give(victim, victim.held)
            victim.evict()
            self.evicted += 1

    def _victim(self, owner: str) -> BodyReader | None:
        """The least recently active body still arriving of the account most over its share."""
        for account in shares.over_share(self.by_account, owner, self.limit):
            arriving = [r for r in self.readers.get(account, ()) if not r.done and r.held]
            if arriving:
                return min(arriving, key=lambda r: r.last_active)
        return None

    def give(self, reader: BodyReader, n: int) -> None:
        owner = reader.owner
        n = min(n, reader.held)
        reader.held -= n
        self.held = max(0, self.held - n)
        left = self.by_account.get(owner, 0) - n
        if left > 0:
            self.by_account[owner] = left
        else:
            self.by_account.pop(owner, None)
        if not reader.held:
            self.readers.get(owner, set()).discard(reader)


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
        #: Set by the connection once the body is not complete in time (fake_gs.http.connections).
        self.deadline = request.scope.get(BODY_DEADLINE_KEY)
        #: The account sending (set once the call is authenticated): whose share it uses.
        self.owner = ""
        self.last_active = time.monotonic()
        #: Set when the budget dropped this body for another account; ``on_evict`` frees
        #: whatever its consumer kept of it.
        self.evicted = False
        self.on_evict: Callable[[], None] | None = None
        #: Sees every piece as it arrives (the proposed profile's key fingerprint).
        self.tap: Callable[[Any], None] | None = None

    def media_type(self) -> str:
        return self.request.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def require_media_type(self, expected: str, what: str, *, checked: bool = True) -> None:
        """415 unless the body is sent as ``expected`` (``what`` takes it; ``checked``: the
        rule in force)."""
        got = self.media_type()
        if checked and got != expected:
            raise ApiError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, f"{what} takes {expected}, got {got or 'no content type'}")

    @staticmethod
    def refuse_unwanted(data: bytes | bytearray, what: str) -> None:
        """A body sent to a call that takes none (``what``) is refused."""
        if data:
            message = f"{what} takes no body"
            raise ApiError(ErrorCode.VALIDATION_FAILED, message, [detail_entry((), message, "no_body")])

    async def _receive(self) -> Any:
        if self.idle_s <= 0:
            message = await self.request.receive()
        else:
            try:  # a timeout scope, not wait_for: no task made per message (one per 64-256 KiB)
                async with asyncio.timeout(self.idle_s):
                    message = await self.request.receive()
            except TimeoutError:
                self._time_out(f"no body bytes arrived for {self.idle_s:g} s")
        if self.deadline is not None and self.deadline.passed:
            self._time_out(f"the body did not complete within {self.deadline.seconds:g} s of its head")
        return message

    def _time_out(self, why: str) -> NoReturn:
        self.done = self.timed_out = True
        raise ApiError(ErrorCode.REQUEST_TIMEOUT, f"{why}; the request is dropped",
                       headers={"connection": "close"}) from None

    def unread(self, data: bytearray) -> None:
        """Hand back what was read of the body so far: the next reader gets it first, then
        the rest as it arrives (a caller that needed only the frame header)."""
        self._peeked = data

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

    async def chunks(self, limit: int) -> AsyncIterator[bytes | bytearray]:
        """The body's bytes as they arrive (never buffered here), within ``limit``; each
        piece counts against the in-flight budget from its arrival to :meth:`release`."""
        seen = 0
        if self._peeked is not None:  # read before (a peek, or a head handed back): first
            data, self._peeked = self._peeked, None
            seen = len(data)
            if seen > limit:
                raise ApiError(ErrorCode.PAYLOAD_TOO_LARGE,
                               f"body exceeds the {limit}-byte limit; split it into request chunks")
            if data:
                if self.tap is not None:
                    self.tap(data)
                yield data
        else:
            self._declared(limit)
        while not self.done:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self.done = True
                raise ClientDisconnect()
            if not message.get("more_body", False):
                self.done = True  # all of it is in: a refusal below is answered at once
            self._check_evicted()
            chunk = message.get("body", b"")
            if chunk:
                seen += len(chunk)
                if seen > limit:
                    raise ApiError(ErrorCode.PAYLOAD_TOO_LARGE,
                                   f"body exceeds the {limit}-byte limit; split it into request chunks")
                self.last_active = time.monotonic()
                if self.budget is not None:
                    self.budget.take(self, len(chunk))
                if self.tap is not None:
                    self.tap(chunk)
                yield chunk

    async def read(self, limit: int) -> bytearray:
        if self._peeked is not None and self.done and len(self._peeked) <= limit:
            data, self._peeked = self._peeked, None  # read whole before (a peek): as it is
            if self.tap is not None:
                self.tap(data)
            return data
        buf = bytearray()  # grows with what arrives: a declared length reserves nothing
        self.on_evict = buf.clear
        try:
            async for chunk in self.chunks(limit):
                buf += chunk
        finally:
            self.on_evict = None
        return buf

    def evict(self) -> None:
        """Dropped by the budget for another account: free what was kept; the next piece
        (or the handler) answers 503."""
        self.evicted = True
        if self.on_evict is not None:
            with contextlib.suppress(BufferError):  # still viewed: freed when the call ends
                self.on_evict()
            self.on_evict = None

    def _check_evicted(self) -> None:
        if self.evicted:  # answered now and the connection closed: the rest is not waited for
            self.done = True
            raise ApiError(ErrorCode.UNAVAILABLE, "this body was dropped while it arrived, to make room for "
                           "another account's; send it again", headers={"retry-after": "1", "connection": "close"})

    def release(self) -> None:
        """The call is over: its body bytes no longer count as in flight."""
        if self.budget is not None and self.held:
            self.budget.give(self, self.held)
        self.held = 0
        self._peeked = None
        self.on_evict = None

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
