"""Deadlines and a cap for the fake's connections, below the ASGI app.

uvicorn closes an idle keep-alive connection only after a response. A socket that never
sends, sends half a request head, or trickles its body one byte every 20 s (under
``--body-idle-s``) stayed open for good: 200 partial heads and 50 such bodies were still
open after 75 s, and 20,000 idle sockets used up the fake's file descriptors, so
``/_fake/health`` could not even be accepted.

Here the HTTP protocol of every connection reports to one :class:`ConnectionGuard`, and a
sweep reading the fake's injected clock enforces:

- **head deadline** (``head_timeout_s``): a request head is complete within that time of
  the connection opening, or of its first byte after an earlier answer; otherwise the
  connection is answered 408 (if any of the head arrived) and closed;
- **body deadline** (``body_timeout_s``): a request body is complete within that time of
  its head. The handler reading it answers 408 ``request_timeout`` (``fake_gs.http.body``
  sees the passed :class:`BodyDeadline`); a body nobody reads any more is cut;
- **cap** (``max_connections``): one connection over the cap closes the connection that
  has waited longest for a request head (idle or partial), so health still gets in; when
  every open connection is busy with a request, the new one gets 503 and is closed.

An idle keep-alive connection (nothing sent since its last answer) keeps uvicorn's own
keep-alive timeout.

The protocol also hands a request's body bytes to it without h11 where they can only be
body bytes (:meth:`GuardedH11Protocol._body_bytes`): h11 and uvicorn copied every byte of
a 60 MiB chunk three times on its way to the handler. That reads h11's private reader
state, fenced in :mod:`fake_gs.http.h11_internals` (checked at import; h11's public path
when it is not there).
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import functools
import json
import logging
import resource
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.h11_impl import H11Protocol

from contract.errors import ErrorCode
from fake_gs.clock import Clock
from fake_gs.http import h11_internals
from fake_gs.settings import FakeSettings

log = logging.getLogger("fake_gs.http.connections")

#: Where the scope of a request with a body carries its :class:`BodyDeadline`.
BODY_DEADLINE_KEY = "fake_gs.body_deadline"
#: File descriptors kept free beside the connections (engine, tapes, logs, the listener).
FD_RESERVE = 64
#: Connections looked at for one eviction (a flood of requests about to start is refused).
EVICTION_LOOKS = 256
#: Real seconds a handler gets to answer 408 after its body deadline before the cut.
ANSWER_GRACE_S = 2.0


@dataclass
class BodyDeadline:
    """Shared between a connection and the handler reading its body: set once it passed."""

    seconds: float
    passed: bool = False


def _raw_answer(status: int, reason: str, message: str) -> bytes:
    """A complete ``Connection: close`` answer written past h11 (no request to answer)."""
    code = ErrorCode.REQUEST_TIMEOUT if status == 408 else ErrorCode.UNAVAILABLE
    body = json.dumps({"code": str(code), "message": message}).encode()
    retry = b"Retry-After: 1\r\n" if status == 503 else b""
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\n%s"
            b"Content-Length: %d\r\n\r\n" % (status, reason.encode(), retry, len(body))) + body


class ConnectionGuard:
    """Every open connection of one server, its deadlines and the cap (module docstring)."""

    def __init__(self, settings: FakeSettings, clock: Clock) -> None:
        self.head_s = settings.head_timeout_s
        self.body_s = settings.body_timeout_s
        self.cap = effective_cap(settings.max_connections)
        self.clock = clock
        self.open: set[GuardedH11Protocol] = set()
        #: Connections waiting for a request head, the longest waiting first.
        self.waiting: OrderedDict[GuardedH11Protocol, None] = OrderedDict()
        #: head_timeouts, body_timeouts, evicted (closed for a newer one), refused (503).
        self.counts: Counter[str] = Counter()
        self._sweeper: asyncio.Task[None] | None = None

    def now(self) -> float:
        return self.clock.monotonic()

    def stats(self) -> dict[str, int]:
        """For the admin state dump and the tests."""
        return {"open": len(self.open), "waiting_for_head": len(self.waiting), "cap": self.cap,
                **{k: self.counts[k] for k in ("head_timeouts", "body_timeouts", "evicted", "refused",
                                               "body_pieces_past_h11")}}

    # --- membership ---------------------------------------------------------------------

    def opened(self, conn: GuardedH11Protocol) -> None:
        self._start_sweeping()
        self.open.add(conn)
        self.waiting[conn] = None
        if len(self.open) <= self.cap:
            return
        victim = self._victim()
        if victim is None:  # every other connection is busy with a request
            self.counts["refused"] += 1
            conn.refuse(503, "Service Unavailable", "the server has too many connections open; retry later")
        else:
            self.counts["evicted"] += 1
            victim.refuse(503, "Service Unavailable", "closed to make room for a newer connection")

    def _victim(self) -> GuardedH11Protocol | None:
        """The connection waiting longest for a head, passing over those whose bytes are
        already in the socket (a request about to start: health in a flood of idle
        sockets); None when only the newest connection waits."""
        for looked, conn in enumerate(self.waiting):
            if looked >= EVICTION_LOOKS or conn is next(reversed(self.waiting)):
                return None
            if conn.head_bytes or not unread_bytes(conn.transport):
                return conn
        return None

    def forget(self, conn: GuardedH11Protocol) -> None:
        self.open.discard(conn)
        self.waiting.pop(conn, None)

    def waits(self, conn: GuardedH11Protocol) -> None:
        """``conn`` waits for a head (a wait already counted keeps its place in the queue)."""
        if conn in self.open and conn not in self.waiting:
            self.waiting[conn] = None

    def busy(self, conn: GuardedH11Protocol) -> None:
        self.waiting.pop(conn, None)

    # --- the sweep ----------------------------------------------------------------------

    def _start_sweeping(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    def interval(self) -> float:
        """A fraction of the shortest deadline, so a deadline is kept to within it."""
        shortest = min((s for s in (self.head_s, self.body_s) if s > 0), default=2.0)
        return min(max(shortest / 8, 0.02), 0.25)

    async def _sweep_forever(self) -> None:
        while self.open:
            await asyncio.sleep(self.interval())
            try:
                self.sweep()
            except Exception:  # never let the sweep die: log and keep sweeping
                log.exception("connection sweep failed")

    def sweep(self) -> None:
        now, loop_now = self.now(), asyncio.get_running_loop().time()
        for conn in list(self.open):
            conn.check(now, loop_now)

    def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()


def unread_bytes(transport: asyncio.BaseTransport) -> int:
    """Bytes waiting in a connection's socket that the server has not read yet."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        import fcntl
        import termios

        found = array.array("i", [0])
        fcntl.ioctl(sock.fileno(), termios.FIONREAD, found)
        return int(found[0])
    except (ImportError, OSError, ValueError):
        return 0


def effective_cap(wanted: int) -> int:
    """``wanted``, lowered to what this process's descriptor limit leaves room for."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft - FD_RESERVE >= wanted:
        return wanted
    room = max(1, soft - FD_RESERVE)
    log.warning("max_connections %d lowered to %d: the descriptor limit is %d", wanted, room, soft)
    return room


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol reporting to a :class:`ConnectionGuard`."""

    def __init__(self, *args: Any, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = guard
        #: When the wait for the current head started (None: idle keep-alive, not timed).
        self.head_since: float | None = None
        self.head_bytes = False
        self.body_since: float | None = None
        self.deadline: BodyDeadline | None = None
        self.cut_after: float | None = None  # loop time of the cut once a 408 is due

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.head_since = self.guard.now()
        self.guard.opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        if self._idle():
            self.head_bytes = self.head_bytes or bool(data)
        if not self._body_bytes(data):
            super().data_received(data)  # uvicorn stops its keep-alive timer here
        self._follow(before)

    def _body_bytes(self, data: bytes) -> bool:
        """Hand ``data`` to the request as body bytes without h11, when it can only be that:
        the request's ``Content-Length`` body is being received, nothing is buffered before
        it, and it ends before the body does (the body's last bytes, and anything after
        them, still go through h11). h11 would copy every byte twice on the way (into its
        buffer, then out of it); here only uvicorn's own copies are left (its buffer, a
        ``bytearray`` in uvicorn 0.55, and ``receive()``'s ``bytes`` of it). The same bookkeeping as h11's (the length left, the
        100-continue wait) and uvicorn's (the flow control, the wake-up) is kept. The
        private state this reads lives in :mod:`fake_gs.http.h11_internals`; without it
        (``BYPASS_OFF``) every byte goes through h11."""
        conn, cycle = self.conn, self.cycle
        if (cycle is None or type(data) is not bytes or conn.their_state is not h11.SEND_BODY
                or conn.our_state is h11.DONE or not 0 < len(data) < h11_internals.body_left(conn)):
            return False
        h11_internals.passed_h11(conn, self, len(data))
        cycle.body += data
        if len(cycle.body) > HIGH_WATER_LIMIT:
            self.flow.pause_reading()
        cycle.message_event.set()
        self.guard.counts["body_pieces_past_h11"] += 1
        return True

    def on_response_complete(self) -> None:
        before = self.cycle
        super().on_response_complete()  # uvicorn starts its keep-alive timer here
        if self.transport.is_closing():
            return
        self.head_since, self.head_bytes = None, False
        self._follow(before)

    def _idle(self) -> bool:
        """Waiting for a request head: no request, or the last one answered and read."""
        cycle = self.cycle
        return self.conn.their_state is h11.IDLE and (cycle is None or cycle.response_complete)

    def _follow(self, before: Any) -> None:
        """After h11 events: a new request (and its body deadline), its body complete, or a
        wait for the next head (timed unless uvicorn's keep-alive timer runs)."""
        cycle = self.cycle
        if cycle is not before and cycle is not None:
            self.guard.busy(self)
            self.head_since, self.head_bytes, self.cut_after = None, False, None
            self.body_since, self.deadline = None, None
            if cycle.more_body:
                self.body_since = self.guard.now()
                self.deadline = BodyDeadline(self.guard.body_s)
                cycle.scope[BODY_DEADLINE_KEY] = self.deadline  # type: ignore[literal-required]
        if cycle is not None and not cycle.more_body:
            self.body_since = None
        if self._idle():
            self.guard.waits(self)
            if self.head_since is None and self.timeout_keep_alive_task is None:
                self.head_since = self.guard.now()

    def check(self, now: float, loop_now: float) -> None:
        """Apply the deadlines (called by the guard's sweep)."""
        if self.transport.is_closing():
            self.guard.forget(self)
            return
        head_s, body_s = self.guard.head_s, self.guard.body_s
        if head_s and self.head_since is not None and now - self.head_since > head_s:
            self.guard.counts["head_timeouts"] += 1
            if self.head_bytes:
                self.refuse(408, "Request Timeout",
                            f"the request head did not complete in {head_s:g} s")
            else:
                self.close()
            return
        if not body_s or self.body_since is None or now - self.body_since <= body_s:
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started and self.cut_after is None:
            self.guard.counts["body_timeouts"] += 1
            if self.deadline is not None:
                self.deadline.passed = True
            self.cut_after = loop_now + ANSWER_GRACE_S
            cycle.message_event.set()  # wake a handler waiting for body bytes: it answers 408
        elif self.cut_after is None or loop_now >= self.cut_after:
            if self.cut_after is None:
                self.guard.counts["body_timeouts"] += 1
            self.close()

    def refuse(self, status: int, reason: str, message: str) -> None:
        """Answer past h11 (no request to answer, or not yet) and close."""
        if not self.transport.is_closing():
            with contextlib.suppress(Exception):
                self.transport.write(_raw_answer(status, reason, message))
        self.close()

    def close(self) -> None:
        self.guard.forget(self)
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.close()


def protocol_factory(guard: ConnectionGuard) -> Any:
    """What ``uvicorn.Config(http=...)`` builds each connection's protocol with."""
    return functools.partial(GuardedH11Protocol, guard=guard)
