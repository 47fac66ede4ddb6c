"""gs-proxy's relay on the wire: a body of known size passes byte for byte (its tail through
the kernel when both ends are plain TCP), a chunked body through h11, and a request
pipelined behind a body is the next exchange on the same connection."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import h11
import pytest

from conformance.judge.exchange import Exchange
from conformance.proxy import splice as kernel
from conformance.proxy.relay import Relay, Relayed
from contract.routes import prefix

UPLOAD = f"{prefix('CORTEX', 'PUBLIC')}/job-1/forward-backward"


class _Digest(BaseHTTPRequestHandler):
    """Answers every call with the size and sha256 of the body it received."""

    protocol_version = "HTTP/1.1"

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while size := int(self.rfile.readline().split(b";")[0], 16):
                out += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            return bytes(out)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self) -> None:
        body = self._body()
        data = json.dumps({"size": len(body), "sha256": hashlib.sha256(body).hexdigest(),
                           "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def _relay() -> Iterator[tuple[tuple[str, int], list[Exchange]]]:
    """A digest upstream and a :class:`Relay` in front of it, each on its own thread."""
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Digest)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    seen: list[Exchange] = []

    def observed(ex: Exchange, _relayed: Relayed) -> None:
        seen.append(ex)

    loop = asyncio.new_event_loop()
    relay = Relay(f"http://127.0.0.1:{upstream.server_address[1]}", observed)
    server = loop.run_until_complete(relay.start_server("127.0.0.1", 0, None))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield server.sockets[0].getsockname()[:2], seen
    finally:
        asyncio.run_coroutine_threadsafe(relay.close_all(), loop).result(30)
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        upstream.shutdown()
        upstream.server_close()


def _answers(sock: socket.socket, count: int) -> list[dict[str, Any]]:
    """``count`` answers read off ``sock`` (their JSON bodies)."""
    conn, body = h11.Connection(h11.CLIENT), bytearray()
    out: list[dict[str, Any]] = []
    conn.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))  # h11 pairs answers with requests
    while len(out) < count:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = sock.recv(65536)
            assert data, "the relay closed the connection"
            conn.receive_data(data)
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            out.append(json.loads(body))
            body = bytearray()
            if len(out) < count:
                conn.send(h11.EndOfMessage())
                conn.start_next_cycle()
                conn.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))
    return out


def test_a_big_body_passes_byte_for_byte_through_the_kernel_and_a_pipelined_call_follows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spliced: list[int] = []
    real = kernel.splice

    def counting(src: int, dst: int, size: int, stopping: threading.Event) -> None:
        spliced.append(size)
        real(src, dst, size, stopping)

    monkeypatch.setattr(kernel, "splice", counting)
    body = os.urandom(5 * 1024 * 1024 + 17)
    with _relay() as (address, seen), socket.create_connection(address) as sock:
        sock.settimeout(20)
        sock.sendall(b"POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                     + f"POST {UPLOAD} HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body
                     + b"GET /last HTTP/1.1\r\nHost: x\r\n\r\n")
        small, big, last = _answers(sock, 3)
    assert small == {"size": 5, "sha256": hashlib.sha256(b"hello").hexdigest(), "path": "/small"}
    assert big == {"size": len(body), "sha256": hashlib.sha256(body).hexdigest(), "path": UPLOAD}
    assert last["path"] == "/last" and last["size"] == 0
    assert spliced and sum(spliced) < len(body)  # the tail went socket to socket
    assert [ex.sent for ex in seen] == [5, len(body), 0] and [ex.status for ex in seen] == [200] * 3


def test_a_chunked_body_passes_byte_for_byte_and_is_hashed_for_the_judge() -> None:
    pieces = [os.urandom(n) for n in (1, 70_000, 3, 300_000)]
    coded = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    whole = b"".join(pieces)
    with _relay() as (address, seen), socket.create_connection(address) as sock:
        sock.settimeout(20)
        sock.sendall(b"POST /plain HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + coded
                     + b"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
        first, second = _answers(sock, 2)
    assert first == {"size": len(whole), "sha256": hashlib.sha256(whole).hexdigest(), "path": "/plain"}
    assert second["path"] == "/after"
    assert seen[0].sent == len(whole) and seen[0].body_sha256 == hashlib.sha256(whole).hexdigest()
