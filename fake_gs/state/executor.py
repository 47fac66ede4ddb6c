"""Per-job serial execution on a small shared thread pool.

Requests of one job run one at a time in submit order (so global steps, checkpoints and
weight versions change in order); different jobs run in parallel. Threads, not the event
loop, because engines may compute for a while (the tiny engine runs a real model).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("fake_gs.state.executor")
#: An admin hold releases itself after this long, so a forgotten one cannot wedge a job.
HOLD_MAX_S = 120.0


class SerialQueue:
    """Runs submitted callables one after another on ``pool``, never two at once."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool
        self._queue: deque[Callable[[], None]] = deque()
        self._lock = threading.Lock()
        self._active = False
        self._closed = False

    def submit(self, task: Callable[[], None]) -> None:
        with self._lock:
            if self._closed:
                return
            self._queue.append(task)
            if self._active:
                return
            self._active = True
        self._pool.submit(self._drain)

    def close(self) -> None:
        """Drop queued tasks (the job ended); a running task finishes."""
        with self._lock:
            self._closed = True
            self._queue.clear()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._active = False
                    return
                task = self._queue.popleft()
            try:
                task()
            except Exception:  # a task reports its own failure; never kill the drain
                log.exception("serial task failed")


class Executors:
    """The shared pool and one :class:`SerialQueue` per job."""

    def __init__(self, threads: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="fake-gs-job")
        self._queues: dict[str, SerialQueue] = {}
        #: Jobs an admin hold blocks: job id -> the event that releases the hold.
        self._holds: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def queue(self, job_id: str) -> SerialQueue:
        with self._lock:
            q = self._queues.get(job_id)
            if q is None:
                q = self._queues[job_id] = SerialQueue(self._pool)
            return q

    def hold(self, job_id: str, on: bool) -> None:
        """Block the job's queue (``on``): tasks submitted meanwhile wait, not started, until
        the hold is released (admin API; lets a test cancel a request that has not started)."""
        with self._lock:
            event = self._holds.pop(job_id, None)
            if on:
                self._holds[job_id] = held = threading.Event()
        if event is not None:
            event.set()
        if on:

            def wait() -> None:
                held.wait(HOLD_MAX_S)

            self.queue(job_id).submit(wait)

    def close_job(self, job_id: str) -> None:
        with self._lock:
            q = self._queues.pop(job_id, None)
            hold = self._holds.pop(job_id, None)
        if hold is not None:
            hold.set()
        if q is not None:
            q.close()

    def close_all(self) -> None:
        with self._lock:
            queues = list(self._queues.values())
            self._queues.clear()
            holds = list(self._holds.values())
            self._holds.clear()
        for hold in holds:
            hold.set()
        for q in queues:
            q.close()

    def shutdown(self) -> None:
        self.close_all()
        self._pool.shutdown(wait=False, cancel_futures=True)
