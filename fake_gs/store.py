"""The in-memory state of the fake: jobs, requests, chunk groups, checkpoints, exports.

One re-entrant lock guards it all (critical sections are short; engines run outside it).
Job start-up and request latency are computed lazily on read, so nothing sleeps in the
background: ``polls:N`` counts reads, ``seconds:T`` compares clocks.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from contract.errors import ErrorCode, error_body
from contract.models import SUB_JOB_ID_WORD, CreateJobRequest
from contract.states import JOB_STARTUP_ORDER, JobState, normalize_job_state
from fake_gs import delivery, results
from fake_gs.chunks import ChunkGroup
from fake_gs.errors import ApiError
from fake_gs.execution_logs import ExecutionLogs
from fake_gs.executor import Executors
from fake_gs.idempotency import KeyStore
from fake_gs.records import CheckpointRec, ExportRec, JobRec, RequestRec, SubJobRec

if TYPE_CHECKING:
    from fake_gs.engines.base import Engine
    from fake_gs.settings import FakeSettings

log = logging.getLogger("fake_gs.store")

ACTIVE = {s.value for s in JOB_STARTUP_ORDER}
STARTING = ("pending", "placing", "initializing")
TERMINAL = {"cancelled", "terminated", "failed", "done"}
#: Request failures caused by the request's content rather than by a bug.
INPUT_ERRORS = (ValueError, LookupError, TypeError, RuntimeError, ArithmeticError)


class Store:
    def __init__(self, settings: FakeSettings, engine_factory: Callable[[], Engine]) -> None:
        self.settings = settings
        self._engine_factory = engine_factory
        self._engine: Engine | None = None
        self.lock = threading.RLock()
        self._engine_lock = threading.Lock()
        self.executors = Executors(settings.worker_threads)
        #: Ended jobs' log lines and the S3 stage of the execution-log download (spec §12.2).
        self.execution_logs = ExecutionLogs()
        self._reset_state()

    def _reset_state(self) -> None:
        self.execution_logs.clear()
        self.jobs: dict[str, JobRec] = {}
        #: Ids of jobs being created (between new_job and register_job).
        self._reserved: set[str] = set()
        self.requests: dict[str, RequestRec] = {}
        self.groups: dict[str, dict[str, ChunkGroup]] = {}
        self.exports: dict[str, ExportRec] = {}
        self.ordinal = 0
        #: Set when admission may change (a job arrived or ended), so reads stay O(1).
        self._admit_dirty = False
        self.internal_errors = 0
        self.http_requests = 0
        #: Requests ever submitted (records of ended jobs are dropped; this count is not).
        self.requests_submitted = 0
        self.requests_by_op: Counter[str] = Counter()
        #: Requests whose work ran (at-most-once proofs compare it with client successes).
        self.executed_by_op: Counter[str] = Counter()
        self.idempotency = KeyStore(self.settings.idempotency_window_s,
                                    self.settings.max_idempotency_keys)

    # --- plumbing -------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """Built on first use, so a server starts without importing torch. Its own lock:
        importing an engine may take seconds and must not hold up the store."""
        with self._engine_lock:
            if self._engine is None:
                self._engine = self._engine_factory()
            return self._engine

    def mutant(self, name: str) -> bool:
        return self.settings.mutant == name

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

    # --- jobs -----------------------------------------------------------------------------

    def new_job(self, owner: str, body: CreateJobRequest, job_id: str | None = None) -> JobRec:
        """Record a job (not yet known to the engine: see :meth:`register_job`); a caller's
        ``job_id`` is reserved here, so two creates with one id cannot both succeed."""
        now = time.time()
        with self.lock:
            if job_id is not None and (job_id in self.jobs or job_id in self._reserved):
                raise ApiError(ErrorCode.JOB_CONFLICT, f"a job with id {job_id!r} already exists")
            job_id = job_id or str(uuid.uuid4())
            self._reserved.add(job_id)
            self.ordinal += 1
            ordinal = self.ordinal
        counts: Counter[str] = Counter()
        subs: list[SubJobRec] = []
        for cfg in body.sub_job_configs:
            word = SUB_JOB_ID_WORD[cfg.job_type]
            subs.append(SubJobRec(f"{job_id}:{word}:{counts[word]}", cfg.job_type, cfg))
            counts[word] += 1
        explicit_seed = next((c.seed for c in body.sub_job_configs if c.seed is not None), None)
        seed = explicit_seed if explicit_seed is not None else self.settings.seed * 1_000_003 + ordinal
        return JobRec(
            job_id=job_id,
            owner=owner,
            ordinal=ordinal,
            seed=seed,
            created_at=now,
            sub_jobs=subs,
            experiment_name=body.experiment_name or "default",
            gpus=sum(c.n_gpus for c in body.sub_job_configs),
        )

    def release_id(self, job_id: str) -> None:
        """Forget a reserved id whose job was never registered (create failed)."""
        with self.lock:
            self._reserved.discard(job_id)

    def register_job(self, job: JobRec) -> None:
        with self.lock:
            self._reserved.discard(job.job_id)
            self.jobs[job.job_id] = job
            job.log(f"job created with {len(job.sub_jobs)} sub-job(s), {job.gpus} GPU(s)")
            self._admit_dirty = True
            self._admit()

    def job_for(self, owner: str, job_id: str) -> JobRec:
        """The caller's job, or 404: another token's job does not exist for the caller."""
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None or (job.owner != owner and not self.mutant("cross-token-visible")):
                raise ApiError(ErrorCode.JOB_NOT_FOUND, f"job {job_id!r} not found")
            return job

    def _account(self, job: JobRec) -> str:
        """Capacity is per account (spec §5.4): the owner token, or one for everyone."""
        return "" if self.mutant("capacity-global") else job.owner

    def _admit(self) -> None:
        """Admit pending jobs past ``pending`` in FIFO order while they fit their account's
        free GPUs (``max_total_gpus`` is each account's ceiling)."""
        if not self._admit_dirty:
            return
        self._admit_dirty = False
        used: Counter[str] = Counter()
        for j in self.jobs.values():
            if j.admitted_at is not None and j.status in ACTIVE:
                used[self._account(j)] += j.gpus
        blocked: set[str] = set()
        for job in self.jobs.values():
            account = self._account(job)
            if job.admitted_at is not None or job.status != "pending" or account in blocked:
                continue
            if used[account] + job.gpus > self.settings.max_total_gpus and not self.mutant("capacity-ignored"):
                blocked.add(account)
                continue
            used[account] += job.gpus
            job.admitted_at = time.time()
            job.log("placement granted")

    def status(self, job: JobRec, *, count_poll: bool = False) -> str:
        """The job's status now, advancing start-up lazily and never backwards."""
        with self.lock:
            if job.cancelling_until is not None:
                self._settle_cancel(job, count_poll)
            if job.status not in STARTING:
                return job.status
            self._admit()
            if job.admitted_at is None:
                return job.status
            if count_poll:
                job.polls += 1
            timing = self.settings.startup
            if timing.kind == "instant":
                stage = 3
            elif timing.kind == "polls":
                n = int(timing.amount)
                stage = 3 if job.polls >= n else (3 * job.polls) // n
            else:
                elapsed = time.time() - job.admitted_at
                stage = 3 if elapsed >= timing.amount else int(3 * elapsed / timing.amount)
            current = STARTING.index(job.status) if job.status in STARTING else 3
            if stage > current:
                job.status = JOB_STARTUP_ORDER[stage].value
                job.updated_at = time.time()
                job.log(f"job is {job.status}")
            return job.status

    def _settle_cancel(self, job: JobRec, shown: bool) -> None:
        """Spec dialect: ``cancelling`` is seen once (by a GET, or for a second), then the job
        is ``cancelled``; its work was already stopped and its GPUs freed (end_job)."""
        assert job.cancelling_until is not None
        if shown and time.time() < job.cancelling_until:
            job.cancelling_until = 0.0  # this GET shows cancelling; the next one settles it
            return
        if time.time() >= job.cancelling_until:
            job.status, job.cancelling_until = "cancelled", None
            job.updated_at = time.time()

    def list_jobs(self, owner: str, status: str | None) -> list[JobRec]:
        with self.lock:
            self._admit()
            jobs = [j for j in self.jobs.values()
                    if j.owner == owner or self.mutant("cross-token-visible")]
            if status and not self.mutant("status-filter-ignored"):
                wanted = {normalize_job_state(s) for s in status.split(",") if s.strip()}
                jobs = [j for j in jobs if normalize_job_state(self.status(j)) in wanted]
            return jobs

    def capacity(self, owner: str) -> dict[str, Any]:
        """The caller's account: its ceiling is reserved for it, so has_reservation is true
        and the deprecated reserved_gpus repeats max_total_gpus (spec §5.4)."""
        with self.lock:
            account = "" if self.mutant("capacity-global") else owner
            in_use = sum(j.gpus for j in self.jobs.values()
                         if self._account(j) == account and self.status(j) in ACTIVE)
            total = self.settings.max_total_gpus
            return {
                "has_reservation": True,
                "max_total_gpus": total,
                "reserved_gpus": total,
                "in_use_gpus": in_use,
                "available_gpus": max(0, total - in_use),
            }

    def cancel(self, job: JobRec) -> None:
        with self.lock:
            status = self.status(job)
            if status in ("cancelling", "cancelled"):
                if status == "cancelled" and self.mutant("cancel-twice-409"):
                    raise ApiError(ErrorCode.JOB_CONFLICT, f"job {job.job_id} is already cancelled")
                if status == "cancelling" and self.mutant("cancel-cancelling-409"):
                    raise ApiError(ErrorCode.JOB_CONFLICT, f"job {job.job_id} is being cancelled")
                return
            if status in ACTIVE:
                self.end_job(job, "cancelled", "cancelled by user")
                if self.settings.spec_dialect or self.mutant("cancel-cancelling-409"):
                    job.status, job.cancelling_until = "cancelling", time.time() + 1.0
                return
            raise ApiError(ErrorCode.JOB_CONFLICT, f"job {job.job_id} is {status} and cannot be cancelled")

    def end_job(self, job: JobRec, status: str, reason: str) -> None:
        """Move a job to a terminal state: free GPUs, drop engine state, cancel queued work."""
        with self.lock:
            job.status = status
            job.reason = reason
            job.updated_at = time.time()
            job.log(f"job {status}: {reason}" if reason else f"job {status}")
            self.executors.close_job(job.job_id)
            for req in self.requests.values():
                if req.job_id == job.job_id and req.final_status is None and not req.executed:
                    self._cancel_request(req)
            # Unreachable now (polls need a running job): free results, forget the records
            # (a running executor keeps its own reference), so ended jobs hold no memory.
            for rid in [rid for rid, req in self.requests.items() if req.job_id == job.job_id]:
                req = self.requests.pop(rid)
                req.result_raw = req.events_raw = None
                req.stream_events.clear()
            results.forget(job)
            for group in self.groups.pop(job.job_id, {}).values():
                group.release()
            self.execution_logs.keep(job)
            job.forget_logs()
            engine = self._engine
            self._admit_dirty = True
            self._admit()
        if engine is not None:
            engine.drop_job(job.job_id)
        trim_heap()

    def force_state(self, job: JobRec, status: str, reason: str) -> None:
        """Admin: put a job in any state (a failed job always carries a reason)."""
        status = normalize_job_state(status)
        valid = {s.value for s in JobState}
        if status not in valid:
            raise ApiError(ErrorCode.INVALID_ARGUMENT, f"status must be one of {sorted(valid)}")
        with self.lock:
            if status in TERMINAL or status == "cancelling":
                if status == "failed" and not reason:
                    reason = "failed (forced by the fake's admin API)"
                self.end_job(job, status, reason)
                return
            job.status = status
            job.reason = reason
            job.updated_at = time.time()
            if status != "pending" and job.admitted_at is None:
                job.admitted_at = time.time()
            self._admit_dirty = True
            job.log(f"job forced to {status}")

    # --- checkpoints ----------------------------------------------------------------------

    def checkpoint(self, job: JobRec, checkpoint_id: str) -> CheckpointRec:
        with self.lock:
            ckpt = job.checkpoints.get(checkpoint_id)
            if ckpt is None:
                raise ApiError(ErrorCode.CHECKPOINT_NOT_FOUND,
                               f"checkpoint {checkpoint_id!r} not found in job {job.job_id}")
            return ckpt

    def add_checkpoint(self, job: JobRec, ckpt: CheckpointRec) -> None:
        with self.lock:
            job.checkpoints.pop(ckpt.checkpoint_id, None)
            job.checkpoints[ckpt.checkpoint_id] = ckpt
            job.log(f"checkpoint {ckpt.checkpoint_id} saved ({ckpt.checkpoint_type})")

    def delete_checkpoint(self, job: JobRec, checkpoint_id: str) -> None:
        with self.lock:
            self.checkpoint(job, checkpoint_id)
            if not self.mutant("deleted-checkpoint-listed"):
                del job.checkpoints[checkpoint_id]
            job.log(f"checkpoint {checkpoint_id} deleted")

    def add_export(self, data: bytes, filename: str) -> tuple[str, ExportRec]:
        import secrets

        token = secrets.token_urlsafe(24)
        rec = ExportRec(data=data, filename=filename, expires_at=time.time() + self.settings.export_ttl_s)
        with self.lock:
            now = time.time()
            for key in [k for k, v in self.exports.items() if v.expires_at <= now]:
                del self.exports[key]
            self.exports[token] = rec
        return token, rec

    def export(self, token: str) -> ExportRec | None:
        with self.lock:
            rec = self.exports.get(token)
            if rec is None or rec.expires_at <= time.time():
                return None
            return rec

    # --- requests -------------------------------------------------------------------------

    def submit(
        self,
        job: JobRec,
        op: str,
        work: Callable[[], Any],
        *,
        force_frame: bool = False,
        stream: bool = False,
        group_id: str | None = None,
    ) -> RequestRec:
        """Queue ``work`` on the job's serial executor and return its request record."""
        req = RequestRec(
            request_id=str(uuid.uuid4()),
            job_id=job.job_id,
            op=op,
            created_at=time.time(),
            work=work,
            force_frame=force_frame,
            stream=stream,
            group_id=group_id,
        )
        with self.lock:
            # Checked again here, under the lock: the job may have ended while the call's
            # body was arriving; a call that loses that race leaves nothing behind (409).
            if job.status in TERMINAL | {"cancelling"} and not (self.mutant("terminated-accepts")
                                                                or self.mutant("late-body-accepted")):
                raise ApiError(ErrorCode.JOB_NOT_RUNNING,
                               f"job {job.job_id} is {job.status}: it ended before the call's body arrived")
            self.requests[req.request_id] = req
            self.requests_submitted += 1
            job.requests_total += 1
            self.requests_by_op[op] += 1
            self.executors.queue(job.job_id).submit(lambda: self._execute(req))
        return req

    def request_for(self, job: JobRec, request_id: str) -> RequestRec:
        with self.lock:
            req = self.requests.get(request_id)
            if req is None or req.job_id != job.job_id:
                raise ApiError(ErrorCode.REQUEST_NOT_FOUND, f"request {request_id!r} not found in job {job.job_id}")
            return req

    def _execute(self, req: RequestRec) -> None:
        with self.lock:
            work, req.work = req.work, None
            if req.cancelled or work is None:
                self._finish(req)
                return
            req.started = True
            req.updated_at = time.time()
        error: dict[str, Any] | None = None
        delivered: delivery.Delivered | None = None
        events: list[dict[str, Any]] = []
        try:
            result = work()
            if req.stream:
                events = list(result)
            else:
                s = self.settings
                delivered = delivery.prepare(result, force_frame=req.force_frame,
                                             mode=s.result_delivery, chunk_bytes=s.result_chunk_bytes)
        except ApiError as exc:
            error = exc.body()
        except INPUT_ERRORS as exc:
            log.info("request %s (%s) failed: %s", req.request_id, req.op, exc)
            error = error_body(ErrorCode.INVALID_ARGUMENT, f"{req.op} failed: {exc}"[:2000])
        except Exception as exc:
            log.exception("request %s (%s) crashed", req.request_id, req.op)
            with self.lock:
                self.internal_errors += 1
            error = error_body(ErrorCode.INTERNAL, f"{req.op} crashed: {type(exc).__name__}: {exc}"[:2000])
        del work
        with self.lock:
            req.executed = True
            self.executed_by_op[req.op] += 1
            req.updated_at = time.time()
            if not req.cancelled:
                req.error = error
                if delivered is not None:
                    req.result_raw, req.events_raw = delivered.raw, delivered.events
                    req.result_form = delivered.form
                    req.result_bytes = delivered.nbytes
                req.stream_events.extend(events)
            job = self.jobs.get(req.job_id)
            if job is not None:
                if delivered is not None and not req.cancelled and job.status not in TERMINAL:
                    results.stored(self.settings, job, req)
                job.log(f"request {req.request_id} ({req.op}) {'failed' if error else 'done'}")
            self._finish(req)

    def _finish(self, req: RequestRec) -> None:
        req.done_event.set()
        waiters, req.waiters = req.waiters, []
        for loop, fut in waiters:
            try:
                loop.call_soon_threadsafe(_resolve, fut)
            except RuntimeError:  # loop closed: nobody is waiting any more
                pass

    def gate_passed(self, req: RequestRec) -> bool:
        """Has the configured latency elapsed for this request (execution aside)?"""
        timing = self.settings.latency
        if timing.kind == "instant":
            return True
        if timing.kind == "polls":
            return req.polls >= int(timing.amount)
        return time.time() - req.created_at >= timing.amount

    def waiter(self, req: RequestRec) -> asyncio.Future[None] | None:
        """A future resolved when ``req`` executes, or None if it already has."""
        with self.lock:
            if req.executed:
                return None
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[None] = loop.create_future()
            req.waiters.append((loop, fut))
            return fut

    def _cancel_request(self, req: RequestRec) -> None:
        req.cancelled = True
        req.final_status = "cancelled"
        req.updated_at = time.time()
        req.result_raw = req.events_raw = None
        req.stream_events.clear()
        job = self.jobs.get(req.job_id)
        if job is not None and req.request_id in job.results:
            results.free(job, req)

    def cancel_request(self, req: RequestRec) -> tuple[bool, str]:
        """cancel-request (spec §7.7): a request that has not started is cancelled and never
        runs; one running or done is not (cancelled false, with its visible status)."""
        with self.lock:
            if req.final_status is not None:
                return False, req.final_status
            if req.started and not self.mutant("cancel-request-lies"):
                if req.executed and self.gate_passed(req) and not (req.stream and req.stream_events):
                    return False, "failed" if req.error else "done"
                return False, "running"
            if req.executed and self.gate_passed(req) and not (req.stream and req.stream_events):
                return False, "failed" if req.error else "done"
            self._cancel_request(req)
            return True, "cancelled"

    # --- chunk groups ---------------------------------------------------------------------

    def job_groups(self, job_id: str) -> dict[str, ChunkGroup]:
        with self.lock:
            return self.groups.setdefault(job_id, {})

    def expire_groups(self, job_id: str | None = None) -> int:
        """Drop open groups idle longer than ``chunk_group_idle_s`` (abandoned uploads) of
        one job, or of every job when ``job_id`` is None; returns how many were dropped."""
        if self.mutant("group-never-expires"):
            return 0
        limit = time.monotonic() - self.settings.chunk_group_idle_s
        dropped = 0
        with self.lock:
            per_job = [self.groups.get(job_id, {})] if job_id is not None else list(self.groups.values())
            for groups in per_job:
                for gid in [g for g, grp in groups.items() if grp.status == "open" and grp.touched_at < limit]:
                    groups.pop(gid).release()
                    dropped += 1
        if dropped:
            trim_heap()
        return dropped

    def lose_groups(self, job_id: str) -> int:
        """Forget the job's open (unfinished) chunk groups, as a restarted server would.

        Groups already finalizing or done are kept: their execution is under way or over, and
        a replay must still resolve to it (fault injection, ``lose_group``)."""
        with self.lock:
            groups = self.groups.get(job_id, {})
            lost = [gid for gid, grp in groups.items() if grp.status == "open"]
            for gid in lost:
                groups.pop(gid).release()
        return len(lost)

    def buffered_bytes(self) -> int:
        """Chunk bytes buffered by every job together."""
        with self.lock:
            return sum(g.buffered_bytes for per_job in self.groups.values() for g in per_job.values())

    def group_usage(self, owner: str) -> tuple[int, int, int]:
        """(open groups of ``owner``, bytes they reserve, bytes every open group reserves)."""
        account_open = account_bytes = total = 0
        with self.lock:
            for per_job in self.groups.values():
                for g in per_job.values():
                    reserved = g.reserved_bytes
                    total += reserved
                    if g.owner == owner:
                        account_bytes += reserved
                        account_open += g.status not in ("done", "failed")
        return account_open, account_bytes, total

    def note_execution(self, job: JobRec, group: ChunkGroup | None, *, forward_backward: bool) -> None:
        with self.lock:
            if group is not None:
                group.executions += 1
            if forward_backward:
                job.fb_executions += 1

    # --- admin ----------------------------------------------------------------------------

    def dump(self, labels: Callable[[str], str] | None = None) -> dict[str, Any]:
        """Everything tests want to assert on, as JSON (tokens never appear, only indices;
        ``labels`` names owners, e.g. minted tokens as their accounts)."""
        tokens = self.settings.tokens
        with self.lock:
            jobs = {}
            for job in self.jobs.values():
                if labels is not None:
                    owner = labels(job.owner)
                else:
                    owner = f"token#{tokens.index(job.owner)}" if job.owner in tokens else "anonymous"
                jobs[job.job_id] = {
                    "status": self.status(job),
                    "reason": job.reason,
                    "owner": owner,
                    "gpus": job.gpus,
                    "admitted": job.admitted_at is not None,
                    "global_steps": job.global_steps,
                    "forward_backward_executions": job.fb_executions,
                    "requests": job.requests_total,
                    "checkpoints": list(job.checkpoints),
                    "weight_versions": {s.sub_job_id: s.weight_version for s in job.sub_jobs
                                        if s.job_type != "training"},
                    "sub_jobs": [s.sub_job_id for s in job.sub_jobs],
                }
            groups = [g.describe() for per_job in self.groups.values() for g in per_job.values()]
            return {
                "jobs": jobs,
                "chunk_groups": groups,
                "open_chunk_groups": sum(1 for g in groups if g["status"] != "done"),
                "buffered_bytes": sum(g["buffered_bytes"] for g in groups),
                "requests": {
                    "total": self.requests_submitted,
                    "by_op": dict(self.requests_by_op),
                    "executed_by_op": dict(self.executed_by_op),
                    "in_flight": sum(1 for r in self.requests.values() if not r.executed and not r.cancelled),
                },
                "exports": len(self.exports),
                "idempotency": self.idempotency.describe(),
                "http_requests": self.http_requests,
                "internal_errors": self.internal_errors,
                "settings": {
                    "profile": self.settings.profile,
                    "engine": self.settings.engine,
                    "mutant": self.settings.mutant,
                    "status_style": self.settings.status_style,
                    "startup": str(self.settings.startup),
                    "latency": str(self.settings.latency),
                    "result_delivery": self.settings.result_delivery,
                    "auth": bool(tokens),
                },
            }


def trim_heap() -> None:
    """Hand freed heap pages back to the OS (glibc keeps them otherwise), so the fake's RSS
    falls once big chunk buffers and results are gone. A no-op where malloc_trim is absent."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes
            import ctypes.util

            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _MALLOC_TRIM = libc.malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM: Any = None


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
