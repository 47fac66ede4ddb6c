"""A hostile HTTP server on a free loopback port, for the readers' bounds: it
drips its answers, streams bodies that never end, sends gzip bombs and endless
result pages. Real sockets; each answer is what ``script(request) -> Answer`` yields, and
the server records how many bytes it got out before the reader hung up.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Answer:
    """Raw bytes to send in pieces; ``pause_s`` between pieces."""

    pieces: Iterator[bytes]
    pause_s: float = 0.0


@dataclass
class Sent:
    """What one answer got out: bytes written, and whether the reader hung up first."""

    bytes: int = 0
    cut: bool = False
    finished: bool = False


Script = Callable[[Request], Answer]


@dataclass
class HostileServer:
    script: Script
    sock: socket.socket = field(init=False)
    sent: list[Sent] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            while not self._stop.is_set():
                request = _read_request(conn)
                if request is None:
                    return
                sent = Sent()
                self.sent.append(sent)
                answer = self.script(request)
                try:
                    for piece in answer.pieces:
                        conn.sendall(piece)
                        sent.bytes += len(piece)
                        if answer.pause_s and self._stop.wait(answer.pause_s):
                            return
                except OSError:
                    sent.cut = True
                    return
                sent.finished = True

    def settled(self, timeout_s: float = 30.0) -> list[Sent]:
        """Every answer so far, once each has ended: sent whole, or cut by the reader."""
        deadline = time.monotonic() + timeout_s
        while any(not (s.cut or s.finished) for s in self.sent) and time.monotonic() < deadline:
            self._stop.wait(0.01)
        return list(self.sent)

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


def _read_request(conn: socket.socket) -> Request | None:
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            got = conn.recv(65536)
        except OSError:
            return None
        if not got:
            return None
        data += got
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        got = conn.recv(65536)
        if not got:
            return None
        rest += got
    return Request(method, path, headers)


@contextmanager
def hostile(script: Script) -> Iterator[HostileServer]:
    server = HostileServer(script)
    try:
        yield server
    finally:
        server.close()


# --- answers ----------------------------------------------------------------------------------


def head(status: int = 200, **headers: str | int) -> bytes:
    lines = [f"HTTP/1.1 {status} X", "Content-Type: application/json",
             *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def json_answer(obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return head(200, Content_Length=len(body)) + body


def drip(whole: bytes, every_s: float) -> Answer:
    """``whole`` (head and body) one byte at a time, ``every_s`` apart."""
    return Answer((whole[i:i + 1] for i in range(len(whole))), pause_s=every_s)


def endless_json(piece_bytes: int = 64 * 1024, limit_bytes: int = 1 << 34) -> Answer:
    """A chunked JSON array of floats that never ends (up to ``limit_bytes``)."""
    item = b"0.125,"
    piece = item * (piece_bytes // len(item))

    def pieces() -> Iterator[bytes]:
        yield head(200, Transfer_Encoding="chunked")
        yield b"1\r\n[\r\n"
        sent = 0
        while sent < limit_bytes:
            sent += len(piece)
            yield b"%x\r\n%s\r\n" % (len(piece), piece)

    return Answer(pieces())


def gzip_bomb(decoded_bytes: int) -> tuple[bytes, int]:
    """(a whole answer, its wire body size): a JSON float array of ``decoded_bytes``,
    gzipped (JSON floats of one value compress ~1000x)."""
    body = b'{"job_id": "j1", "pad": [' + b"0.0," * (decoded_bytes // 4) + b"0.0]}"
    packed = gzip.compress(body, compresslevel=9)
    return head(200, Content_Length=len(packed), Content_Encoding="gzip") + packed, len(packed)


def result_page(job_id: str, request_id: str, n: int, payload: bytes) -> bytes:
    """A valid poll page of one result chunk whose cursor always points further."""
    event = {"type": "result_chunk", "payload_b64": base64.b64encode(payload).decode(),
             "payload_sha256": hashlib.sha256(payload).hexdigest()}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return json_answer({"request_id": request_id, "job_id": job_id, "status": "done", "created_at": stamp,
                        "updated_at": stamp, "result": None, "error": None, "events": [event],
                        "next_cursor": f"c{n + 1}"})
