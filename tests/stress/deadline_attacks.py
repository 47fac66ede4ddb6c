"""The red-team pass's attacks (deadlines, readers, work), each returning what it
measured: shared by the stress tests (small sizes, bounds asserted with margin) and
``benchmarks/bench_hardening.py`` (the full sizes, figures printed).

The fake runs as a subprocess (``stress_helpers.fake_process``) so its RSS is its own; a
``Prober`` times ``/_fake/health`` while an attack runs.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from typing import Any

import requests
from hostile_attacks import Measured, Prober
from stress_helpers import PeakSampler

from conformance.drivers.rawhttp import request_head

OCTET = "application/octet-stream"
#: How long a health probe may take before it counts as failed (a liveness bound).
PROBE_TIMEOUT_S = 30.0


def _addr(base_url: str) -> tuple[str, int]:
    host, port = base_url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def health_prober(base_url: str, every_s: float = 0.1) -> Prober:
    url = base_url + "/_fake/health"
    return Prober(lambda: requests.get(url, timeout=PROBE_TIMEOUT_S).raise_for_status(), every_s)


def _closed_within(sock: socket.socket, until: float) -> tuple[int, float | None]:
    """(status of the answer or 0, when the fake closed the connection or None)."""
    data = b""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return 0, None
        sock.settimeout(left)
        try:
            got = sock.recv(65536)
        except TimeoutError:
            return 0, None
        except OSError:
            got = b""
        if not got:
            parts = data.split(b" ", 2)
            status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            return status, time.monotonic()
        data += got


def stalled_connections(fake: Any, *, heads: int = 200, tricklers: int = 50, trickle_every_s: float = 20.0,
                        within_s: float = 60.0) -> Measured:
    """``heads`` connections that send half a request head and stop, and ``tricklers`` that
    send a whole head declaring 1 MiB, then one body byte every ``trickle_every_s``; each
    is watched until the fake closes it (or ``within_s`` passes)."""
    host, port = _addr(fake.base_url)
    netloc = f"{host}:{port}"
    partial = f"POST /_fake/reset HTTP/1.1\r\nHost: {netloc}\r\nX-Slow: ".encode()
    trickle_head = request_head(netloc, "/_fake/faults", 1024 * 1024, "application/json") + b"["
    out = Measured(rss_before=fake.rss())
    stop = threading.Event()
    with PeakSampler(fake.pid, every_s=0.05) as sampler:
        prober = health_prober(fake.base_url)
        prober.start()
        started = time.monotonic()
        half = [_open(host, port, partial) for _ in range(heads)]
        slow = [_open(host, port, trickle_head) for _ in range(tricklers)]
        dripper = threading.Thread(target=_drip, args=(slow, trickle_every_s, stop), daemon=True)
        dripper.start()
        until = started + within_s
        ends = [_closed_within(s, until) for s in half + slow]
        stop.set()
        out.latencies = prober.stop()
        out.extra["probe_failures"] = prober.failures
    for s in half + slow:
        s.close()
    out.statuses = [status for status, _ in ends]
    closed_after = [at - started for _, at in ends if at is not None]
    out.extra["closed"] = len(closed_after)
    out.extra["last_closed_after_s"] = max(closed_after, default=None)
    out.extra["bytes_sent"] = heads * len(partial) + tricklers * len(trickle_head)
    out.rss_peak, out.rss_after = sampler.peak, fake.rss()
    return out


def _open(host: str, port: int, first: bytes) -> socket.socket:
    s = socket.create_connection((host, port))
    s.sendall(first)
    return s


def _drip(socks: list[socket.socket], every_s: float, stop: threading.Event) -> None:
    while not stop.wait(every_s):
        for s in socks:
            try:
                s.sendall(b" ")
            except OSError:
                pass


#: A child process that opens N idle sockets to HOST:PORT, says how many, and holds them
#: until its stdin closes (so the attack's descriptors are not the measuring process's).
_IDLE_SOCKETS = """
import socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
held, failed = [], 0
for _ in range(n):
    try:
        held.append(socket.create_connection((host, port), timeout=30))
    except OSError:
        failed += 1
print(len(held), failed, flush=True)
sys.stdin.read()
"""


def idle_sockets(fake: Any, *, sockets: int = 20_000, per_process: int = 5_000, hold_s: float = 5.0) -> Measured:
    """``sockets`` connections that never send a byte (opened by child processes), while
    ``/_fake/health`` is timed; then the fake's own view of its connections."""
    host, port = _addr(fake.base_url)
    out = Measured(rss_before=fake.rss())
    children = []
    with PeakSampler(fake.pid, every_s=0.05) as sampler:
        prober = health_prober(fake.base_url)
        prober.start()
        started = time.monotonic()
        for i in range(0, sockets, per_process):
            n = min(per_process, sockets - i)
            children.append(subprocess.Popen([sys.executable, "-c", _IDLE_SOCKETS, host, str(port), str(n)],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        opened = [tuple(map(int, c.stdout.readline().split())) for c in children]  # type: ignore[union-attr]
        out.extra["open_s"] = time.monotonic() - started
        time.sleep(hold_s)
        out.latencies = prober.stop()
        out.extra["probe_failures"] = prober.failures
        out.extra["fake_connections"] = requests.get(fake.base_url + "/_fake/connections",
                                                     timeout=PROBE_TIMEOUT_S).json()
    for child in children:
        child.communicate("")
    out.extra["opened"] = sum(o[0] for o in opened)
    out.extra["connect_failures"] = sum(o[1] for o in opened)
    out.rss_peak, out.rss_after = sampler.peak, fake.rss()
    return out
