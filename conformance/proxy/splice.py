"""A body's bytes socket to socket through a kernel pipe (Linux ``splice``), never copied
into the proxy: what keeps a relayed upload's CPU cost near the kernel's own.

Run in a thread (the sockets stay non-blocking; readiness is polled here, not by the event
loop, which owns the sockets' registrations)."""

from __future__ import annotations

import fcntl
import os
import select
import threading

#: The kernel pipe a spliced body passes through (the most Linux grants an unprivileged
#: process by default); the body's bytes never enter the proxy's memory.
PIPE_BYTES = 1024 * 1024
#: How often a splice that waits on a peer checks whether the proxy is stopping.
POLL_MS = 200
#: Can this platform splice?
AVAILABLE = hasattr(os, "splice")


def splice(src: int, dst: int, size: int, stopping: threading.Event) -> None:
    """Move ``size`` bytes from socket ``src`` to socket ``dst`` through a kernel pipe, never
    into this process (both sockets non-blocking; run in a thread)."""
    pipe_out, pipe_in = os.pipe()
    try:
        room = PIPE_BYTES
        try:
            fcntl.fcntl(pipe_in, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:
            room = fcntl.fcntl(pipe_in, fcntl.F_GETPIPE_SZ)
        flags = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
        in_pipe = 0
        while size or in_pipe:
            moved = False
            if size and in_pipe < room:
                try:
                    got = os.splice(src, pipe_in, min(size, room - in_pipe), flags=flags)
                except BlockingIOError:
                    got = -1
                if got == 0:
                    raise ConnectionError("the client closed mid-request")
                if got > 0:
                    size, in_pipe, moved = size - got, in_pipe + got, True
            if in_pipe:
                try:
                    put = os.splice(pipe_out, dst, in_pipe, flags=flags)
                except BlockingIOError:
                    put = 0
                in_pipe, moved = in_pipe - put, moved or put > 0
            if not moved:  # wait for bytes to read only while the pipe has room for them
                wait_ready(src if size and in_pipe < room else None, dst if in_pipe else None, stopping)
    finally:
        os.close(pipe_out)
        os.close(pipe_in)


def wait_ready(src: int | None, dst: int | None, stopping: threading.Event) -> None:
    """Until ``src`` has bytes or ``dst`` has room (ConnectionError once the proxy stops)."""
    poller = select.poll()
    if src is not None:
        poller.register(src, select.POLLIN)
    if dst is not None:
        poller.register(dst, select.POLLOUT)
    while not poller.poll(POLL_MS):
        if stopping.is_set():
            raise ConnectionError("the proxy is stopping")
