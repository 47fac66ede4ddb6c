"""Every answer read under a total byte cap and a total time bound.

``requests`` bounds neither: its read timeout is per socket read, so a server dripping one
byte every 0.5 s kept a call with ``call_timeout_s=3`` waiting 40 s; a body is read whole
however long it runs (the suite read 3 GiB of an endless JSON body in 14 s); and a 0.6 MB
gzip of JSON floats decoded to 600 MiB took the client past 4 GiB.

A :class:`BoundedAdapter` mounted on a session bounds each exchange:

- **time**: the read timeout of the call (``timeout=(connect, read)``) bounds the whole
  exchange, head and body, not each gap: a watchdog shuts the socket down when it runs out
  and the exchange fails with :class:`AnswerTooSlow` (a ``requests`` ReadTimeout); the
  watched connections it learns the socket from are :mod:`client.calls.urllib3_pools`'s;
- **bytes**: at most ``max_bytes`` of body, counted after decompression
  (:class:`AnswerTooBig`), whether the caller streams it or ``requests`` reads it;
- **inflation**: a compressed body may decode to at most ``max_inflation`` times the bytes
  it took on the wire once past ``INFLATION_FREE_BYTES`` (:class:`AnswerTooBig` again).

The client (``client.calls.session``), the conformance suite's sessions and the parity replayer
mount it; memory then follows bytes received.
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from client.calls.urllib3_pools import SENDING, watched_pools
from contract.limits import INFLATION_FREE_BYTES, MAX_ANSWER_BYTES, MAX_ANSWER_INFLATION, MiB

#: Bytes of a compressed body read (and decoded) at once: a piece of a chunked gzip body is
#: decoded whole, and gzip inflates at most ~1032x, so one piece stays under 17 MiB.
COMPRESSED_PIECE_BYTES = 16 * 1024
_PIECE_BYTES = MiB


class AnswerOverBound(requests.RequestException):
    """An answer went past a bound of its exchange (base of the two below)."""


class AnswerTooBig(AnswerOverBound):
    """More body bytes (decoded) than the cap, or a compressed body inflating past its bound."""


class AnswerTooSlow(AnswerOverBound, requests.exceptions.ReadTimeout):
    """The exchange did not complete within its time bound (the call's read timeout)."""


class _Exchange:
    """One exchange in flight: its deadline, its connection, whether the watchdog cut it."""

    def __init__(self, total_s: float) -> None:
        self.total_s = total_s
        self.deadline = time.monotonic() + total_s
        self.connection: Any = None
        self.cut = False
        self.finished = False
        self._lock = threading.Lock()

    def expire(self) -> None:
        """Past the deadline: shut the socket down, which wakes any read blocked on it."""
        with self._lock:
            if self.finished:
                return
            self.cut = True
            sock = getattr(self.connection, "sock", None)
        if sock is not None:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the raw socket, TLS or not
            except OSError:
                pass

    def finish(self) -> None:
        with self._lock:
            self.finished = True

    def too_slow(self) -> AnswerTooSlow:
        return AnswerTooSlow(f"the answer did not complete within {self.total_s:g} s "
                             "(the call's read timeout bounds the whole exchange)")


class _Watchdog:
    """One daemon thread that expires exchanges at their deadlines."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Exchange]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, exchange: _Exchange) -> None:
        with self._cond:
            if len(self._heap) > 4096:  # finished exchanges wait for their time: drop them
                self._heap = [e for e in self._heap if not e[2].finished]
                heapq.heapify(self._heap)
            heapq.heappush(self._heap, (exchange.deadline, next(self._order), exchange))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="answer-watchdog", daemon=True)
                self._thread.start()
            elif self._heap[0][2] is exchange:
                # Woken only when this deadline comes first: an exchange due later than the
                # head is found when the head's wait ends, so a call costs no thread switch.
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                while not self._heap or self._heap[0][0] > now:
                    self._cond.wait(self._heap[0][0] - now if self._heap else None)
                    now = time.monotonic()
                _, _, due = heapq.heappop(self._heap)
            due.expire()


_WATCHDOG = _Watchdog()


class _BoundedBody:
    """``response.raw`` under the exchange's bounds (everything else is the urllib3 response's)."""

    def __init__(self, raw: Any, exchange: _Exchange, max_bytes: int, max_inflation: float) -> None:
        self._raw, self._exchange = raw, exchange
        self._max_bytes, self._max_inflation = max_bytes, max_inflation
        self._compressed = bool(raw.headers.get("content-encoding", "identity").strip().lower()
                                not in ("", "identity"))
        self._decoded = 0
        self._wire_bound = 0  # bytes read off the wire, at most (chunked bodies don't tell)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def stream(self, amt: int | None = 2**16, decode_content: bool | None = None) -> Iterator[bytes]:
        piece = COMPRESSED_PIECE_BYTES if self._compressed else (amt or _PIECE_BYTES)
        try:
            for data in self._raw.stream(piece, decode_content=decode_content):
                self._wire_bound += piece
                self._count(data)
                yield data
        except AnswerOverBound:
            raise
        except Exception as exc:
            if self._exchange.cut:
                raise self._exchange.too_slow() from exc
            raise
        finally:
            self._exchange.finish()

    def read(self, amt: int | None = None, *args: Any, **kwargs: Any) -> bytes:
        if amt is None:  # the whole body: in pieces, so the bounds see each one
            return b"".join(self.stream(_PIECE_BYTES, kwargs.get("decode_content")))
        try:
            data = self._raw.read(amt, *args, **kwargs)
        except Exception as exc:
            if self._exchange.cut:
                self._exchange.finish()
                raise self._exchange.too_slow() from exc
            raise
        self._wire_bound += amt
        self._count(data)
        if not data:
            self._exchange.finish()
        return bytes(data)

    def close(self) -> None:
        self._exchange.finish()
        self._raw.close()

    def _count(self, data: bytes) -> None:
        self._decoded += len(data)
        if self._decoded > self._max_bytes:
            raise AnswerTooBig(f"the answer sent more than {self._max_bytes} bytes (decoded); "
                               "refused before reading it all")
        wire = max(self._raw.tell() or self._wire_bound, 1)
        if self._compressed and self._decoded > max(INFLATION_FREE_BYTES, self._max_inflation * wire):
            raise AnswerTooBig(f"the compressed answer decoded to {self._decoded} bytes from about {wire} "
                               f"on the wire, over {self._max_inflation:g}x; refused as a decompression bomb")
        if time.monotonic() > self._exchange.deadline:
            raise self._exchange.too_slow()


class BoundedAdapter(HTTPAdapter):
    """An HTTPAdapter whose exchanges keep the module's bounds."""

    def __init__(self, max_bytes: int = MAX_ANSWER_BYTES, max_inflation: float = MAX_ANSWER_INFLATION,
                 **kwargs: Any) -> None:
        self.max_bytes, self.max_inflation = max_bytes, max_inflation
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = watched_pools()

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = watched_pools()
        return manager

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             *args: Any, **kwargs: Any) -> requests.Response:
        exchange = _Exchange(_total_s(timeout))
        _WATCHDOG.watch(exchange)
        SENDING.exchange = exchange
        try:
            response = super().send(request, True, timeout, *args, **kwargs)
        except requests.RequestException as exc:
            exchange.finish()
            if exchange.cut:
                raise exchange.too_slow() from exc
            raise
        finally:
            SENDING.exchange = None
        response.raw = _BoundedBody(response.raw, exchange, self.max_bytes, self.max_inflation)
        if not stream:
            try:
                response.content  # noqa: B018 - read now, under the bounds
            except BaseException:
                response.close()
                raise
            finally:
                exchange.finish()
        return response


def _total_s(timeout: Any) -> float:
    """The exchange's time bound: the read part of ``timeout`` (10 minutes when none)."""
    if isinstance(timeout, tuple):
        timeout = timeout[1]
    return float(timeout) if timeout is not None else 600.0


class _HeadersAsSet(requests.auth.AuthBase):
    """Auth that leaves a request as it is. With no auth of its own a ``requests`` session
    looks the host up in ``~/.netrc`` on every call and, on a match, replaces the
    ``Authorization`` header set on the session (the PAT) with Basic credentials; with this
    one the session's own headers are what go, and no call reads the netrc file."""

    def __call__(self, request: Any) -> Any:
        return request


def mount_bounds(session: requests.Session, max_bytes: int = MAX_ANSWER_BYTES,
                 max_inflation: float = MAX_ANSWER_INFLATION) -> requests.Session:
    """``session`` with a :class:`BoundedAdapter` for http and https (and the headers it is
    given kept as they are: :class:`_HeadersAsSet`); returned for chaining."""
    adapter = BoundedAdapter(max_bytes, max_inflation)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    if session.auth is None:
        session.auth = _HeadersAsSet()
    return session
