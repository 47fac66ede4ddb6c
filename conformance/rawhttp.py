"""HTTP/1.1 spoken by hand over a socket, for calls no HTTP library will make: a body that
arrives late or never (LIMIT-IDLE-1, the hardening properties and the stress attacks)."""

from __future__ import annotations

import socket
from collections.abc import Mapping


def request_head(
    netloc: str, path: str, length: int, ctype: str, headers: Mapping[str, str] | None = None
) -> bytes:
    """The head of a ``POST path`` that declares a ``length``-byte body of type ``ctype``."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"POST {path} HTTP/1.1\r\nHost: {netloc}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


def read_answer(sock: socket.socket, timeout_s: float) -> tuple[int, bytes]:
    """The status and body of the answer on ``sock`` (status 0 when the server closed the
    connection, or ``timeout_s`` passed, without one)."""
    sock.settimeout(timeout_s)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            got = sock.recv(65536)
            if not got:
                break
            data += got
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < length:
            got = sock.recv(65536)
            if not got:
                break
            rest += got
    except OSError:
        return 0, data
    parts = data.split(b" ", 2)
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0), rest
