"""A scripted HTTP server on a free loopback port: real sockets, no mocks.

Each incoming request is recorded and answered by ``script(request) -> Reply``; tests use
it where the fake server cannot (yet) produce a situation, e.g. 429 + Retry-After.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"{}")


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False  # close the socket without answering
    #: Send the body as these pieces, chunked (no Content-Length), until the client hangs up.
    pieces: Iterable[bytes] | None = None
    #: The Content-Length to declare instead of the body's own (a lying server).
    declared_length: int | None = None


Script = Callable[[Seen], Reply]

#: Client timing for loopback tests: nothing waits on real back-off.
FAST: dict[str, float] = {
    "backoff_first_s": 0.001,
    "backoff_cap_s": 0.005,
    "poll_first_s": 0.001,
    "poll_cap_s": 0.005,
    "connect_timeout_s": 2.0,
    "read_timeout_s": 5.0,
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    script: Script
    seen: list[Seen]
    release: threading.Event


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        seen = Seen(self.command, parts.path, parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()}, body)
        self.server.seen.append(seen)
        reply = self.server.script(seen)
        if reply.delay_s:  # hold the answer back; closing the server lets it go at once
            self.server.release.wait(reply.delay_s)
        if reply.drop:
            self.close_connection = True
            self.connection.close()
            return
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        if reply.pieces is None:
            length = len(data) if reply.declared_length is None else reply.declared_length
            self.send_header("Content-Length", str(length))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self._send_body(reply, data)
        except (BrokenPipeError, ConnectionResetError):  # the client hung up: it may
            self.close_connection = True

    def _send_body(self, reply: Reply, data: bytes) -> None:
        if reply.pieces is None:
            self.wfile.write(data)
            return
        for piece in reply.pieces:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = do_DELETE = _handle


class Loopback:
    """A started server: ``url``, ``seen`` requests, ``script`` settable."""

    def __init__(self, script: Script, *, listen: bool = True) -> None:
        self.server = _Server(("127.0.0.1", 0), _Handler, bind_and_activate=False)
        self.server.script = script
        self.server.seen = []
        self.server.release = threading.Event()
        self.server.server_bind()
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread: threading.Thread | None = None
        if listen:
            self.listen()

    @property
    def seen(self) -> list[Seen]:
        return self.server.seen

    def listen(self) -> None:
        """Start accepting (before this, connects are refused: a provable connect failure)."""
        if self._thread is None:
            self.server.server_activate()
            self._thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)
            self._thread.start()

    def close(self) -> None:
        self.server.release.set()
        if self._thread is not None:
            self.server.shutdown()
        self.server.server_close()


@contextmanager
def loopback(script: Script, *, listen: bool = True) -> Iterator[Loopback]:
    server = Loopback(script, listen=listen)
    try:
        yield server
    finally:
        server.close()


def sequence(*replies: Reply) -> Script:
    """Answer the given replies in order, then repeat the last one."""
    queue = list(replies)

    def script(_: Seen) -> Reply:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return script
