"""Cancel, at interpreter exit, the jobs this process created and never shut down.

SkyRL's driver creates the jobs, hands their ids to a Ray worker and returns without ever
calling ``shutdown()``: without this guard the job kept its GPUs after the run ended. A
job is guarded from creation until ``shutdown()``; a reattached client (a worker that was
handed the ids) is never guarded, so it never cancels what another process owns. The
guard holds the transport strongly: the driver's client object is long gone by exit.
A forked child inherits the registry but not the job, so only the creating pid cancels.
``cancel_on_exit=False`` (``CORTEX_CANCEL_ON_EXIT=0``) keeps the job running instead.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class _Guard:
    job_id: str
    cancel: Callable[[], None]
    pid: int = field(default_factory=os.getpid)


_GUARDS: dict[int, _Guard] = {}
_LOCK = threading.Lock()


def guard(owner: object, job_id: str, cancel: Callable[[], None]) -> None:
    """Cancel ``job_id`` with ``cancel()`` at exit unless :func:`release` comes first."""
    with _LOCK:
        _GUARDS[id(owner)] = _Guard(job_id, cancel)


def release(owner: object) -> None:
    """``owner`` shut down (or handed the job over for good): nothing to do at exit."""
    with _LOCK:
        _GUARDS.pop(id(owner), None)


def guarded_jobs() -> list[str]:
    """The job ids this process would cancel if it exited now."""
    with _LOCK:
        return [g.job_id for g in _GUARDS.values() if g.pid == os.getpid()]


def cancel_guarded() -> None:
    """Cancel every guarded job of this process; a failure is logged, never raised."""
    with _LOCK:
        guards = [g for g in _GUARDS.values() if g.pid == os.getpid()]
        _GUARDS.clear()
    for g in guards:
        log.warning("cancelling job %s: this process created it and is exiting without "
                    "shutdown() (cancel_on_exit=False / CORTEX_CANCEL_ON_EXIT=0 keeps it)",
                    g.job_id)
        try:
            g.cancel()
        except Exception as exc:  # exit must go on; say what was left behind
            log.error("could not cancel job %s at exit: %s", g.job_id, exc)


atexit.register(cancel_guarded)
