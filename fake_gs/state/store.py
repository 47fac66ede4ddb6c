"""The in-memory state of the fake: the facade handlers, the admin API and tests call.

It composes a :class:`~fake_gs.state.job_table.JobTable` (jobs, admission, start-up,
checkpoints, exports), a :class:`~fake_gs.state.request_queue.RequestQueue` (submission,
execution, waiters, cancellation) and a :class:`~fake_gs.chunking.registry.GroupRegistry`
(chunk groups), all under one re-entrant lock (critical sections are short; engines run
outside it), all reading one injected :class:`~fake_gs.clock.Clock`. Ending a job spans
all three, so it lives here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fake_gs.chunking.groups import DONE, ChunkGroup
from fake_gs.chunking.registry import GroupRegistry
from fake_gs.clock import SYSTEM_CLOCK, Clock
from fake_gs.heap import trim_heap
from fake_gs.state.execution_logs import ExecutionLogs
from fake_gs.state.executor import Executors
from fake_gs.state.idempotency_keys import KeyStore
from fake_gs.state.job_table import JobTable
from fake_gs.state.outward import KIT_OUTWARD, Outward
from fake_gs.state.records import ExportRec, JobRec, RequestRec
from fake_gs.state.request_queue import RequestQueue
from fake_gs.state.rules import Rules

if TYPE_CHECKING:
    from fake_gs.engines.protocol import Engine
    from fake_gs.settings import FakeSettings

__all__ = ["Store"]


class Store:
    def __init__(self, settings: FakeSettings, engine_factory: Callable[[], Engine],
                 clock: Clock = SYSTEM_CLOCK,
                 seed_resources: Callable[[Store], None] | None = None, outward: Outward = KIT_OUTWARD) -> None:
        """``seed_resources``: puts back, after every reset, what a fresh store must hold (the
        app passes the OpenAPI examples' resources; the store knows nothing of the wire);
        ``outward``: the ids it mints and the form its results take (``fake_gs.state.outward``)."""
        self.settings = settings
        self.outward = outward
        self._seed_resources = seed_resources
        self.clock = clock
        self._engine_factory = engine_factory
        self._engine: Engine | None = None
        self.lock = threading.RLock()
        self._engine_lock = threading.Lock()
        self.executors = Executors(settings.worker_threads)
        #: Ended jobs' log lines and the S3 stage of the execution-log download (spec §12.2).
        self.execution_logs = ExecutionLogs(settings)
        self._reset_state()

    def _reset_state(self) -> None:
        self.execution_logs.clear()
        #: The rules the border and the backend ask (what the running variation may waive or bend).
        self.rules = Rules.of(self.settings)
        self.table = JobTable(self.settings, self.rules, self.clock, self.lock, self.end_job, self.outward)
        self.queue = RequestQueue(self.settings, self.rules, self.clock, self.lock, self.executors, self.table.jobs,
                                  self.outward)
        self.chunk_groups = GroupRegistry(self.settings, self.rules, self.clock, self.lock)
        self.http_requests = 0
        self.idempotency = KeyStore(self.settings.idempotency_window_s, self.settings.max_idempotency_keys)
        if self._seed_resources is not None:
            self._seed_resources(self)

    # --- plumbing -------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """Built on first use (a running fake builds it at start-up: ``fake_gs.http.app.warm_up``).
        Its own lock: importing an engine may take seconds and must not hold up the store."""
        with self._engine_lock:
            if self._engine is None:
                self._engine = self._engine_factory()
            return self._engine

    def reset(self) -> None:
        with self.lock:
            self.executors.close_all()
            if self._engine is not None:
                for job_id in list(self.jobs):
                    self._engine.drop_job(job_id)
            self._reset_state()

    def close(self) -> None:
        self.executors.shutdown()
        self.execution_logs.close()

    @property
    def jobs(self) -> dict[str, JobRec]:
        """Every job by its key (``JobRec.job_id``; a caller's names: :meth:`job_for`)."""
        return self.table.jobs

    @property
    def requests(self) -> dict[str, RequestRec]:
        return self.queue.requests

    @property
    def groups(self) -> dict[str, dict[str, ChunkGroup]]:
        return self.chunk_groups.groups

    @property
    def exports(self) -> dict[str, ExportRec]:
        return self.table.exports

    @property
    def internal_errors(self) -> int:
        """Crashes of handlers and of request work (each one is a bug of the fake)."""
        return self.queue.internal_errors

    @internal_errors.setter
    def internal_errors(self, count: int) -> None:
        self.queue.internal_errors = count

    # --- what spans the parts ----------------------------------------------------------------

    def end_job(self, job: JobRec, status: str, reason: str) -> None:
        """Move a job to a terminal state: free GPUs, drop engine state, cancel queued work,
        free its results and chunk groups, keep its logs for the execution-log download."""
        with self.lock:
            self.table.mark_ended(job, status, reason)
            self.queue.drop_job(job)
            self.chunk_groups.drop_job(job.job_id)
            self.execution_logs.keep(job)
            job.forget_logs()
            engine = self._engine
            self.table.readmit()
        if engine is not None:
            engine.drop_job(job.job_id)
        trim_heap()

    # --- admin ----------------------------------------------------------------------------

    def dump(self, labels: Callable[[str], str] | None = None) -> dict[str, Any]:
        """Everything tests want to assert on, as JSON (``GET /_fake/state``). Tokens never
        appear, only indices; ``labels`` names owners (e.g. minted tokens as their accounts)."""
        return _dump(self, labels)


# --- the admin dump -------------------------------------------------------------------------


def _owner(tokens: tuple[str, ...], owner: str, labels: Callable[[str], str] | None) -> str:
    if labels is not None:
        return labels(owner)
    return f"token#{tokens.index(owner)}" if owner in tokens else "anonymous"


def _job(store: Store, job: JobRec, owner: str) -> dict[str, Any]:
    """One job of the dump. The dump keys jobs by their key; a job whose id in its account
    differs from it (another account held that id first) carries that id as ``job_id``."""
    named = {"job_id": job.public_id} if job.public_id != job.job_id else {}
    return {
        **named,
        "status": store.table.status(job),
        "reason": job.reason,
        "owner": owner,
        "gpus": job.gpus,
        "admitted": job.admitted_at is not None,
        "global_steps": job.global_steps,
        "forward_backward_executions": job.fb_executions,
        "requests": job.requests_total,
        "checkpoints": list(job.checkpoints),
        "weight_versions": {s.sub_job_id: s.weight_version for s in job.sub_jobs if s.job_type != "training"},
        "sub_jobs": [s.sub_job_id for s in job.sub_jobs],
    }


def _settings(store: Store) -> dict[str, Any]:
    s = store.settings
    return {
        "profile": s.profile,
        "engine": s.engine,
        "variation": s.variation,
        "status_style": s.status_style,
        "startup": str(s.startup),
        "latency": str(s.latency),
        "result_delivery": s.result_delivery,
        "auth": bool(s.tokens),
    }


def _dump(store: Store, labels: Callable[[str], str] | None = None) -> dict[str, Any]:
    """The store as JSON (taken under its lock, so one consistent moment)."""
    tokens = tuple(store.settings.tokens)
    with store.lock:
        jobs = {job.job_id: _job(store, job, _owner(tokens, job.owner, labels)) for job in store.jobs.values()}
        groups = [g.describe() for g in store.chunk_groups.all()]
        queue = store.queue
        return {
            "jobs": jobs,
            "chunk_groups": groups,
            "open_chunk_groups": sum(1 for g in groups if g["status"] != DONE),
            "buffered_bytes": sum(g["buffered_bytes"] for g in groups),
            "requests": {
                "total": queue.requests_submitted,
                "by_op": dict(queue.requests_by_op),
                "executed_by_op": dict(queue.executed_by_op),
                "in_flight": sum(1 for r in queue.requests.values() if not r.executed and not r.cancelled),
            },
            "exports": len(store.table.exports),
            "idempotency": store.idempotency.describe(),
            "http_requests": store.http_requests,
            "internal_errors": store.internal_errors,
            "settings": _settings(store),
        }
