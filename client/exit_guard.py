"""Cancel, at interpreter exit, the jobs this process created and never shut down.

SkyRL's driver creates the jobs, hands their ids to a Ray worker and returns without ever
calling ``shutdown()``: without this guard the job kept its GPUs after the run ended. A
job is guarded from creation until ``shutdown()``; a reattached client (a worker that was
handed the ids) is never guarded, so it never cancels what another process owns. The
guard holds the transport strongly: the driver's client object is long gone by exit.
A forked child inherits the registry but not the job, so only the creating pid cancels.
``cancel_on_exit=False`` (``CORTEX_CANCEL_ON_EXIT=0``) keeps the job running instead.

Launchers, schedulers and CI time-outs stop a run with SIGTERM (a closed terminal sends
SIGHUP), which ends the process without interpreter exit, so the guard also handles those:
when the first job is guarded (from the main thread, where Python takes signal handlers),
it installs a handler for each that cancels the guarded jobs and then does what the handler
it replaced would have done: calls the application's own handler, or, for the default
action, ends the process by the same signal (same exit status). A signal the application
ignores (``SIG_IGN``) stays ignored and cancels nothing: the run goes on. A handler the
application installs *after* the job was created replaces this one; the jobs are then
still cancelled if that handler exits the interpreter (``sys.exit``), or it can call
:func:`cancel_guarded` itself. SIGKILL (and a crash of the interpreter itself) cannot be
caught: nothing is cancelled and the job keeps its GPUs until someone cancels it by id
(``CortexRestClient.cancel_job``, or the service's cancel route).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class _Guard:
    job_id: str
    cancel: Callable[[], None]
    pid: int = field(default_factory=os.getpid)


_GUARDS: dict[int, _Guard] = {}
#: Re-entrant: a signal handler runs in the main thread, maybe while it holds the lock.
_LOCK = threading.RLock()
#: The signals that stop a run without interpreter exit, cancelled on too.
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
#: signal -> the handler ours replaced; and the pid that installed ours (a forked child
#: keeps the handlers, and installs again once it guards a job of its own).
_REPLACED: dict[int, Any] = {}
_installed_by: int | None = None


def guard(owner: object, job_id: str, cancel: Callable[[], None]) -> None:
    """Cancel ``job_id`` with ``cancel()`` at exit (or on SIGTERM/SIGHUP) unless
    :func:`release` comes first."""
    with _LOCK:
        _GUARDS[id(owner)] = _Guard(job_id, cancel)
    install_signal_handlers()


def install_signal_handlers() -> bool:
    """Cancel on :data:`STOP_SIGNALS` too, chaining to the handlers they had (once per
    process; only the main thread may install: False elsewhere, at-exit cancelling stays)."""
    global _installed_by
    if threading.current_thread() is not threading.main_thread():
        return False
    with _LOCK:
        if _installed_by == os.getpid():
            return True
        _installed_by = os.getpid()
        for sig in STOP_SIGNALS:
            before = signal.getsignal(sig)
            if before is _on_stop_signal:
                continue
            if before is signal.SIG_IGN or before is None:  # ignored, or not set from Python
                continue
            _REPLACED[sig] = before
            signal.signal(sig, _on_stop_signal)
    return True


def _on_stop_signal(signum: int, frame: FrameType | None) -> Any:
    """Cancel this process's guarded jobs, then act as the replaced handler would."""
    cancel_guarded()
    before = _REPLACED.get(signum, signal.SIG_DFL)
    if callable(before):
        return before(signum, frame)
    # The default action: end the process by this very signal, as it would have ended.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return None


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
