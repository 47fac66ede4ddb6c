"""A loopback HTTP fault proxy: loses, cuts and delays exchanges between a client and a server.

It sits on ``127.0.0.1`` (an OS-chosen port) in front of a loopback upstream and handles one
exchange per connection (it asks the upstream to close after each answer, so an answer
ends at EOF). For each exchange that ``match(method, path)`` selects it picks an action,
from a fixed ``script`` (the n-th selected exchange gets ``script[n]``, then ``pass``) or
at random with probability ``rate`` (seeded):

* ``pass``: forward, relay the answer;
* ``drop_before``: read the request, close without forwarding (the call never ran);
* ``drop_after``: forward, read the whole answer, close without relaying it (the call ran,
  its answer is lost);
* ``reset``: forward, relay only the answer's status line and headers (the body is
  announced, not sent), then reset the connection (TCP RST);
* ``delay``: forward, hold the answer ``delay_s`` (past the client's read time-out), then
  relay it to whoever is still listening.

Everything is bounded: concurrent connections, bytes per request and answer, socket
time-outs. ``wait_idle()`` returns once no exchange is in flight, so a test reads the
server's counters only after every forwarded call has been answered upstream.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

Action = Literal["pass", "drop_before", "drop_after", "reset", "delay"]
FAULTS: tuple[Action, ...] = ("drop_before", "drop_after", "reset", "delay")
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024 + MAX_HEAD_BYTES
MAX_ANSWER_BYTES = 256 * 1024 * 1024


class ProxyError(Exception):
    """A request the proxy cannot carry (too large, malformed, chunked upload)."""


def _read_head(conn: socket.socket) -> tuple[bytes, bytes] | None:
    """(head up to the blank line, body bytes already read), None on a closed connection."""
    data = bytearray()
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD_BYTES:
            raise ProxyError("request head too large")
        piece = conn.recv(65536)
        if not piece:
            return None
        data += piece
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    return head, rest


def _content_length(head: bytes) -> int:
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"transfer-encoding":
            raise ProxyError("chunked request bodies are not carried")
        if name == b"content-length":
            length = int(value.strip())
    if not 0 <= length <= MAX_BODY_BYTES:
        raise ProxyError(f"request body of {length} bytes is over the proxy's bound")
    return length


def _close_after(head: bytes) -> bytes:
    """The head with ``Connection: close``, so the upstream ends its answer at EOF."""
    lines = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"connection:")]
    return b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n"


def _recv_exact(conn: socket.socket, have: bytes, size: int) -> bytes:
    data = bytearray(have)
    while len(data) < size:
        piece = conn.recv(min(1 << 20, size - len(data)))
        if not piece:
            raise ProxyError("client closed mid-body")
        data += piece
    return bytes(data[:size])


def _recv_all(conn: socket.socket) -> bytes:
    data = bytearray()
    while True:
        piece = conn.recv(1 << 20)
        if not piece:
            return bytes(data)
        data += piece
        if len(data) > MAX_ANSWER_BYTES:
            raise ProxyError("upstream answer over the proxy's bound")


def _reset(conn: socket.socket) -> None:
    """Close with a TCP RST instead of a FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


class FaultProxy:
    """``with FaultProxy(upstream, rate=0.2) as proxy: ... proxy.url ...``"""

    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.0,
        faults: Sequence[Action] = FAULTS,
        script: Sequence[Action] | None = None,
        delay_s: float = 1.0,
        seed: int = 0,
        match: Callable[[str, str], bool] | None = None,
        max_connections: int = 32,
        io_timeout_s: float = 30.0,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.hostname not in LOOPBACK or parts.port is None:
            raise ValueError(f"the fault proxy only fronts a loopback host:port, not {upstream!r}")
        if not 0.0 <= rate <= 1.0 or not 0.0 <= delay_s <= 60.0:
            raise ValueError("rate must be in [0, 1] and delay_s in [0, 60]")
        self.upstream = (parts.hostname, parts.port)
        self.rate, self.faults, self.delay_s = rate, tuple(faults), delay_s
        self.script = list(script or [])
        self.match = match or (lambda method, path: True)
        self.io_timeout_s = io_timeout_s
        self.counts: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._selected = 0
        self._lock = threading.Condition()
        self._in_flight = 0
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        from conformance.reporting.recorder import (
            RECORDER,  # a parity tape names what it went through
        )

        RECORDER.tape_server(self.url, f"fault-proxy {self.url.rsplit(':', 1)[-1]}",
                             {"embedded": False, "fault_proxy": True, "upstream": upstream})
        self._thread = threading.Thread(target=self._accept_loop, name="fault-proxy", daemon=True)
        self._thread.start()

    # --- life -------------------------------------------------------------------------------
    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Block until no exchange is in flight (True) or ``timeout_s`` passed (False)."""
        end = time.monotonic() + timeout_s
        with self._lock:
            while self._in_flight:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"in_flight": self._in_flight, **dict(self.counts)}

    # --- work -------------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            if not self._slots.acquire(timeout=0.1):
                continue
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                self._slots.release()
                continue
            with self._lock:
                self._in_flight += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _choose(self, method: str, path: str) -> Action:
        if not self.match(method, path):
            return "pass"
        with self._lock:
            n, self._selected = self._selected, self._selected + 1
            if self.script:
                return self.script[n] if n < len(self.script) else "pass"
            if self.faults and self._rng.random() < self.rate:
                return self._rng.choice(self.faults)
        return "pass"

    def _serve(self, conn: socket.socket) -> None:
        action = "error"
        try:
            conn.settimeout(self.io_timeout_s)
            action = self._exchange(conn)
        except (OSError, ProxyError, ValueError):
            action = "error"
        finally:
            try:
                conn.close()
            except OSError:
                pass
            with self._lock:
                self.counts[action] += 1
                self._in_flight -= 1
                self._lock.notify_all()
            self._slots.release()

    def _exchange(self, conn: socket.socket) -> str:
        got = _read_head(conn)
        if got is None:
            return "empty"
        head, rest = got
        body = _recv_exact(conn, rest, _content_length(head))
        method, path = (head.split(b"\r\n", 1)[0].decode("latin-1").split(" ") + ["", ""])[:2]
        action = self._choose(method, path.split("?", 1)[0])
        if action == "drop_before":
            return action
        with socket.create_connection(self.upstream, timeout=self.io_timeout_s) as up:
            up.sendall(_close_after(head) + body)
            answer = _recv_all(up)
        if action == "drop_after":
            return action
        if action == "reset":
            conn.sendall(answer.partition(b"\r\n\r\n")[0] + b"\r\n\r\n")
            _reset(conn)
            return action
        if action == "delay":
            self._stop.wait(self.delay_s)
        try:
            conn.sendall(answer)
        except OSError:  # the client gave up (a delay past its read time-out)
            pass
        return action
