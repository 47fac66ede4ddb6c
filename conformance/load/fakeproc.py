"""The embedded fake of a run without ``--url``: ``python -m fake_gs`` in a subprocess (so the
load generator and the server do not share a core's worth of Python), its admin API for
the end-of-run judgement, and the CPU it used.
"""

from __future__ import annotations

import atexit
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any

import requests

from contract.auth import AUTHORIZATION_HEADER

READY_PREFIX = "fake-gs serving on "
#: The account's GPU capacity: room for every job a run may create (two GPUs each).
CAPACITY_GPUS = 1_000_000


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGTERM when gs-load dies, however it dies."""
    import ctypes

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class FakeStartError(RuntimeError):
    """The fake did not come up (its last output lines say why)."""


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process (Linux ``/proc``; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class EmbeddedFake:
    """One fake-gs process: started on ``host`` (any free port), stopped once. With
    ``tokens`` (service, admin) it takes only those (``conformance.load.surface``: a fake
    reachable beyond loopback)."""

    def __init__(self, host: str, mutant: str | None = None, args: tuple[str, ...] = (),
                 tokens: tuple[str, str] | None = None) -> None:
        self.token: str | None = tokens[0] if tokens else None
        self.admin_token: str | None = tokens[1] if tokens else None
        auth = ["--token", tokens[0], "--admin-token", tokens[1]] if tokens else []
        self.argv = [sys.executable, "-m", "fake_gs", "--host", host, "--port", "0",
                     "--max-total-gpus", str(CAPACITY_GPUS), "--log-level", "warning",
                     *(["--variation", mutant] if mutant else []), *args, *auth]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.tail: deque[str] = deque(maxlen=40)
        self.started = 0.0
        self.cpu_s: float | None = None
        self.wall_s = 0.0

    def __repr__(self) -> str:  # the argv holds the tokens
        return f"EmbeddedFake(url={self.url!r})"

    def start(self, timeout_s: float = 60.0) -> str:
        """Start the fake and return its base URL once it accepts connections."""
        linux = sys.platform.startswith("linux")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, bufsize=1,
                                     preexec_fn=_die_with_parent if linux else None)
        atexit.register(self.stop)
        self.started = time.monotonic()
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, args=(lines,), daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while not self.url:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.stop()
                raise FakeStartError("the embedded fake did not start: " + " | ".join(self.tail))
            if line.startswith(READY_PREFIX):
                self.url = line[len(READY_PREFIX):].strip()
        return self.url

    def _drain(self, lines: queue.Queue[str | None]) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.tail.append(line.rstrip())
            lines.put(line)
        lines.put(None)

    def state(self) -> dict[str, Any]:
        """The fake's state dump (``/_fake/state``: execution counters, jobs)."""
        headers = {AUTHORIZATION_HEADER: f"Bearer {self.admin_token}"} if self.admin_token else {}
        answer = requests.get(f"{self.url}/_fake/state", headers=headers, timeout=60)
        answer.raise_for_status()
        return dict(answer.json())

    def drained(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """The state once no request is still queued or running (or the time is up)."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.state()
            if not state["requests"]["in_flight"] or time.monotonic() > deadline:
                return state
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the fake (once), keeping the CPU it used and how long it ran."""
        if self.proc is None or self.proc.returncode is not None:
            return
        self.cpu_s = cpu_seconds(self.proc.pid)
        self.wall_s = time.monotonic() - self.started
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
