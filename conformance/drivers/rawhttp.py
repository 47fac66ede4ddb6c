"""HTTP/1.1 spoken by hand over a socket, for calls no HTTP library will make: a body that
arrives late or never (LIMIT-IDLE-1, the hardening properties and the stress attacks)."""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping


def request_head(
    netloc: str, path: str, length: int, ctype: str, headers: Mapping[str, str] | None = None
) -> bytes:
    """The head of a ``POST path`` that declares a ``length``-byte body of type ``ctype``."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"POST {path} HTTP/1.1\r\nHost: {netloc}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


#: The most of one answer :func:`read_answer` keeps (the answers these calls get are error
#: envelopes); past it the rest is not read.
MAX_RAW_ANSWER_BYTES = 1024 * 1024


def read_answer(sock: socket.socket, timeout_s: float, max_bytes: int = MAX_RAW_ANSWER_BYTES
                ) -> tuple[int, bytes]:
    """The status and body of the answer on ``sock`` (status 0 when the server closed the
    connection, or ``timeout_s`` passed, without one). ``timeout_s`` bounds the whole read,
    not each piece, and at most ``max_bytes`` are kept: a server dripping its answer or
    sending one without end cannot hold the reader."""
    deadline = time.monotonic() + timeout_s
    data = b""
    try:
        while b"\r\n\r\n" not in data and len(data) <= max_bytes:
            got = _recv(sock, deadline)
            if not got:
                break
            data += got
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < min(length, max_bytes):
            got = _recv(sock, deadline)
            if not got:
                break
            rest += got
    except (OSError, ValueError):
        return 0, data
    parts = data.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return status, rest[:max_bytes]


def _recv(sock: socket.socket, deadline: float) -> bytes:
    """One piece, waiting no longer than the whole read's deadline allows."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the answer did not arrive in time")
    sock.settimeout(left)
    return sock.recv(65536)
