"""The fake's jobs: creation, admission against GPU capacity, start-up, cancellation,
checkpoints and exports.

Start-up is computed lazily on read (``polls:N`` counts reads, ``seconds:T`` reads the
injected clock), so nothing runs in the background. Ending a job touches its requests and
chunk groups too, so the table hands that to the store (``end_job``).
"""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from collections.abc import Callable, Container
from typing import Any

from contract.errors import ErrorCode
from contract.ids import sub_job_ids
from contract.models import CreateJobRequest
from contract.states import (
    JOB_CANCEL_IDEMPOTENT,
    JOB_CANCELLABLE,
    JOB_HOLDS_GPUS,
    JOB_STARTUP_ORDER,
    JOB_TERMINAL,
    JobState,
    normalize_job_state,
)
from fake_gs.answers.refusals import ApiError
from fake_gs.chunking.groups import ChunkGroup
from fake_gs.clock import Clock
from fake_gs.settings import FakeSettings
from fake_gs.state.outward import KIT_OUTWARD, Outward
from fake_gs.state.records import CheckpointRec, ExportRec, JobRec, SubJobRec
from fake_gs.state.rules import Rules

#: Start-up states a read may advance (the last of JOB_STARTUP_ORDER is where it ends).
STARTING = JOB_STARTUP_ORDER[:-1]
#: States in which a job takes no new work: ended, or being cancelled.
JOB_ENDED_OR_ENDING = JOB_TERMINAL | {JobState.CANCELLING}
#: How long a cancelled job shows ``cancelling`` at most (``Outward.shows_cancelling``).
CANCELLING_SHOWN_S = 1.0
#: Joins a public id and a counter into the key of a job whose name another account's job
#: already has as its key. No id the fake or a caller makes holds one (caller ids are UUIDs,
#: the outward job ids are hex and ``-``), and a key stays valid wherever it goes: a
#: URL path segment (the admin API) and an IAM role name (the log stage's per-run role).
KEY_SEPARATOR = "."

EndJob = Callable[[JobRec, str, str], None]


class JobTable:
    """Jobs by key, under the store's lock, and each account's names for them (job ids are
    per account, see :class:`~fake_gs.state.records.JobRec`); ``end_job`` is the store's (it
    frees requests and chunk groups as well)."""

    def __init__(self, settings: FakeSettings, rules: Rules, clock: Clock, lock: threading.RLock, end_job: EndJob,
                 outward: Outward = KIT_OUTWARD) -> None:
        self.settings = settings
        self.rules = rules
        self.outward = outward
        self.clock = clock
        self.lock = lock
        self._end_job = end_job
        self.jobs: dict[str, JobRec] = {}
        #: Keys of jobs being created (between new_job and register_job).
        self._reserved: set[str] = set()
        #: Those jobs by key: what they keep counts against their account's caps already
        #: (``fake_gs.state.quotas``), so two creates awaiting the engine cannot both pass.
        self.creating: dict[str, JobRec] = {}
        #: (owner, public id) -> key, of every job registered or being created.
        self._names: dict[tuple[str, str], str] = {}
        self.exports: dict[str, ExportRec] = {}
        self.ordinal = 0
        #: Set when admission may change (a job arrived or ended), so reads stay O(1).
        self._admit_dirty = False

    # --- creation -------------------------------------------------------------------------

    def new_job(self, owner: str, body: CreateJobRequest, job_id: str | None = None) -> JobRec:
        """Record a job (not yet known to the engine: see :meth:`register_job`).

        Job ids are names in the caller's account: a caller's ``job_id`` answers 409 only
        when the caller already holds (or is creating) a job of that name, so two creates
        with one id cannot both succeed; another account's job of that name is neither
        touched nor revealed (the new job gets a key of its own, :meth:`_free_key`)."""
        now = self.clock.time()
        with self.lock:
            if job_id is not None and self._name_taken(owner, job_id):
                raise ApiError(ErrorCode.JOB_CONFLICT, f"a job with id {job_id!r} already exists")
            while job_id is None:  # an id of the fake's: unused as a name and as a key
                job_id = self.outward.job_id()
                if self._key_taken(job_id) or (owner, job_id) in self._names:
                    job_id = None
            key = self._free_key(job_id)
            self._reserved.add(key)
            self._names[(owner, job_id)] = key
            self.ordinal += 1
            ordinal = self.ordinal
        configs = body.sub_job_configs
        ids = sub_job_ids(job_id, (cfg.job_type for cfg in configs))
        subs = [SubJobRec(sid, cfg.job_type, cfg) for sid, cfg in zip(ids, configs, strict=True)]
        explicit_seed = next((c.seed for c in body.sub_job_configs if c.seed is not None), None)
        seed = explicit_seed if explicit_seed is not None else self.settings.seed * 1_000_003 + ordinal
        job = JobRec(
            job_id=key,
            public_id=job_id,
            owner=owner,
            ordinal=ordinal,
            seed=seed,
            created_at=now,
            sub_jobs=subs,
            experiment_name=body.experiment_name or "default",
            gpus=sum(c.n_gpus for c in body.sub_job_configs),
        )
        with self.lock:
            self.creating[key] = job
        return job

    def _name_taken(self, owner: str, job_id: str) -> bool:
        """Does the caller hold a job of this id (any account, when job ids are not per account)?"""
        if not self.rules.job_ids_per_account:
            return any(name == job_id for _, name in self._names)
        return (owner, job_id) in self._names

    def _key_taken(self, key: str) -> bool:
        return key in self.jobs or key in self._reserved

    def _free_key(self, public_id: str) -> str:
        """The key of a new job named ``public_id``: the name itself while no job has it as
        its key, else ``{public_id}.{n}`` (:data:`KEY_SEPARATOR`)."""
        key, n = public_id, 0
        while self._key_taken(key):
            n += 1
            key = f"{public_id}{KEY_SEPARATOR}{n}"
        return key

    def release(self, job: JobRec) -> None:
        """Forget a job that was never registered (its create failed): its name and key."""
        with self.lock:
            self._reserved.discard(job.job_id)
            self.creating.pop(job.job_id, None)
            if self._names.get((job.owner, job.public_id)) == job.job_id:
                del self._names[(job.owner, job.public_id)]

    def register_job(self, job: JobRec) -> None:
        with self.lock:
            self._reserved.discard(job.job_id)
            self.creating.pop(job.job_id, None)
            self.jobs[job.job_id] = job
            job.log(f"job created with {len(job.sub_jobs)} sub-job(s), {job.gpus} GPU(s)")
            self.readmit()

    def key_for(self, owner: str, job_id: str) -> str | None:
        """The key of the caller's job named ``job_id``, or None (no such job of the caller)."""
        with self.lock:
            key = self._names.get((owner, job_id))
            return key if key is not None and key in self.jobs else None

    def job_for(self, owner: str, job_id: str) -> JobRec:
        """The caller's job named ``job_id``, or 404: another account's jobs do not exist
        for the caller (a job of the same name there included)."""
        with self.lock:
            key = self.key_for(owner, job_id)
            job = self.jobs.get(key) if key is not None else None
            if job is None and not self.rules.tokens_isolate_accounts:
                job = self.jobs.get(job_id)
            if job is None:
                raise ApiError(ErrorCode.JOB_NOT_FOUND, f"job {job_id!r} not found")
            return job

    def serving_job(self, owner: str, job_id: str, wanted: Container[str]) -> JobRec:
        """The caller's job ``job_id`` (404 when the caller holds none), when its state is
        one of ``wanted`` (none: any state); 412 ``job_not_running`` else, unless the
        rules let an ended job serve."""
        job = self.job_for(owner, job_id)
        if wanted:
            status = self.status(job)
            if not self.rules.job_serves(status, wanted):
                raise ApiError(ErrorCode.JOB_NOT_RUNNING, f"job {job.public_id} is {status}, not running")
        return job

    # --- admission and start-up -----------------------------------------------------------

    def account(self, job: JobRec) -> str:
        """Capacity is per account (spec §5.4): the owner token, or one for everyone."""
        return job.owner if self.rules.capacity_per_account else ""

    def readmit(self) -> None:
        """A job arrived or ended: admission may change."""
        self._admit_dirty = True
        self._admit()

    def _admit(self) -> None:
        """Admit pending jobs past ``pending`` in FIFO order while they fit their account's
        free GPUs (``max_total_gpus`` is each account's ceiling)."""
        if not self._admit_dirty:
            return
        self._admit_dirty = False
        used: Counter[str] = Counter()
        for j in self.jobs.values():
            if j.admitted_at is not None and j.status in JOB_HOLDS_GPUS:
                used[self.account(j)] += self.own_gpus(j)
        blocked: set[str] = set()
        for job in self.jobs.values():
            account = self.account(job)
            if job.admitted_at is not None or job.status != JobState.PENDING or account in blocked:
                continue
            need = self.own_gpus(job)
            if used[account] + need > self.settings.max_total_gpus and self.rules.admission_waits_for_capacity:
                blocked.add(account)
                continue
            used[account] += need
            job.admitted_at = self.clock.monotonic()
            job.log("placement granted")

    def own_gpus(self, job: JobRec) -> int:
        """The GPUs ``job`` adds to its account: a multiplexed sub-job's are its host's,
        counted once while the host holds them (JOBV-MULTIPLEX-2)."""
        shared = 0
        for key, n in job.gpu_hosts:
            host = self.jobs.get(key)
            if host is not None and host.status in JOB_HOLDS_GPUS:
                shared += n
        return job.gpus - shared

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
            stage = self._startup_stage(job, job.admitted_at)
            if stage > STARTING.index(job.status):
                job.status = JOB_STARTUP_ORDER[stage].value
                job.updated_at = self.clock.time()
                job.log(f"job is {job.status}")
            return job.status

    def _startup_stage(self, job: JobRec, admitted_at: float) -> int:
        """Index in JOB_STARTUP_ORDER the configured start-up has reached by now."""
        timing, last = self.settings.startup, len(STARTING)
        if timing.kind == "instant":
            return last
        if timing.kind == "polls":
            n = int(timing.amount)
            return last if job.polls >= n else (last * job.polls) // n
        elapsed = self.clock.monotonic() - admitted_at
        return last if elapsed >= timing.amount else int(last * elapsed / timing.amount)

    def _settle_cancel(self, job: JobRec, shown: bool) -> None:
        """When the outward form shows it: ``cancelling`` is seen once (by a GET, or for a second), then the job
        is ``cancelled``; its work was already stopped and its GPUs freed (end_job)."""
        assert job.cancelling_until is not None
        now = self.clock.monotonic()
        if shown and now < job.cancelling_until:
            job.cancelling_until = 0.0  # this GET shows cancelling; the next one settles it
            return
        if now >= job.cancelling_until:
            job.status, job.cancelling_until = JobState.CANCELLED.value, None
            job.updated_at = self.clock.time()

    def held(self) -> list[JobRec]:
        """Every job registered or being created (what the account caps count)."""
        with self.lock:
            return [*self.jobs.values(), *self.creating.values()]

    def list_jobs(self, owner: str, status: str | None) -> list[JobRec]:
        with self.lock:
            self._admit()
            jobs = [j for j in self.jobs.values()
                    if j.owner == owner or not self.rules.tokens_isolate_accounts]
            if status and self.rules.listing_filters_status:
                wanted = {normalize_job_state(s) for s in status.split(",") if s.strip()}
                jobs = [j for j in jobs if normalize_job_state(self.status(j)) in wanted]
            return jobs

    def capacity(self, owner: str) -> dict[str, Any]:
        """The caller's account: its ceiling is reserved for it, so has_reservation is true
        and the deprecated reserved_gpus repeats max_total_gpus (spec §5.4)."""
        with self.lock:
            account = owner if self.rules.capacity_per_account else ""
            in_use = sum(self.own_gpus(j) for j in self.jobs.values()
                         if self.account(j) == account and self.status(j) in JOB_HOLDS_GPUS)
            total = self.settings.max_total_gpus
            return {
                "has_reservation": True,
                "max_total_gpus": total,
                "reserved_gpus": total,
                "in_use_gpus": in_use,
                "available_gpus": max(0, total - in_use),
            }

    # --- what training does to a job -------------------------------------------------------

    def ran_frame(self, job: JobRec, group: ChunkGroup | None, *, forward_backward: bool) -> None:
        """A frame's work ran: one more execution of its chunk group (the at-most-once proof
        the state dump shows) and, for a forward-backward, of the job."""
        with self.lock:
            if group is not None:
                group.executions += 1
            if forward_backward:
                job.fb_executions += 1

    def trained(self, job: JobRec, loss: float) -> None:
        """A forward-backward ran: the job's last loss (a save keeps it with the checkpoint)."""
        with self.lock:
            job.last_loss = loss

    def stepped(self, job: JobRec) -> int:
        """What a step does to a job: one more global step (STEP-COUNT-1); its count."""
        with self.lock:
            if self.rules.steps_counted:
                job.global_steps += 1
            return job.global_steps

    def restored(self, job: JobRec, ckpt: CheckpointRec) -> int:
        """A load ran: the job is back at the checkpoint's global step (SAVE-LOAD-1); its count."""
        with self.lock:
            if self.rules.load_restores_steps:
                job.global_steps = ckpt.global_steps
            return job.global_steps

    # --- ending ---------------------------------------------------------------------------

    def cancel(self, job: JobRec) -> None:
        with self.lock:
            status = self.status(job)
            if status in JOB_CANCEL_IDEMPOTENT:
                if status == JobState.CANCELLED and self.rules.cancelled_cancel_refused:
                    raise ApiError(ErrorCode.JOB_CONFLICT, f"job {job.public_id} is already cancelled")
                if status == JobState.CANCELLING and self.rules.cancelling_lingers:
                    raise ApiError(ErrorCode.JOB_CONFLICT, f"job {job.public_id} is being cancelled")
                return
            if status in JOB_CANCELLABLE:
                self._end_job(job, JobState.CANCELLED.value, "cancelled by user")
                if self.outward.shows_cancelling(job.public_id) or self.rules.cancelling_lingers:
                    job.status = JobState.CANCELLING.value
                    job.cancelling_until = self.clock.monotonic() + CANCELLING_SHOWN_S
                return
            raise ApiError(ErrorCode.JOB_CONFLICT, f"job {job.public_id} is {status} and cannot be cancelled")

    def mark_ended(self, job: JobRec, status: str, reason: str) -> None:
        """The job's own part of ending: its state, reason and log line."""
        job.status = status
        job.reason = reason
        job.updated_at = self.clock.time()
        job.log(f"job {status}: {reason}" if reason else f"job {status}")

    def force_state(self, job: JobRec, status: str, reason: str) -> None:
        """Admin: put a job in any state (a failed job always carries a reason)."""
        status = normalize_job_state(status)
        valid = {s.value for s in JobState}
        if status not in valid:
            raise ApiError(ErrorCode.INVALID_ARGUMENT, f"status must be one of {sorted(valid)}")
        with self.lock:
            if status in JOB_ENDED_OR_ENDING:
                if status == JobState.FAILED and not reason:
                    reason = "failed (forced by the fake's admin API)"
                self._end_job(job, status, reason)
                return
            job.status = status
            job.reason = reason
            job.updated_at = self.clock.time()
            if status != JobState.PENDING and job.admitted_at is None:
                job.admitted_at = self.clock.monotonic()
            self._admit_dirty = True
            job.log(f"job forced to {status}")

    # --- checkpoints and exports ----------------------------------------------------------

    def checkpoint(self, job: JobRec, checkpoint_id: str) -> CheckpointRec:
        with self.lock:
            ckpt = job.checkpoints.get(checkpoint_id)
            if ckpt is None:
                raise ApiError(ErrorCode.CHECKPOINT_NOT_FOUND,
                               f"checkpoint {checkpoint_id!r} not found in job {job.public_id}")
            return ckpt

    def add_checkpoint(self, job: JobRec, ckpt: CheckpointRec) -> None:
        with self.lock:
            job.checkpoints.pop(ckpt.checkpoint_id, None)
            job.checkpoints[ckpt.checkpoint_id] = ckpt
            job.log(f"checkpoint {ckpt.checkpoint_id} saved ({ckpt.checkpoint_type})")

    def delete_checkpoint(self, job: JobRec, checkpoint_id: str) -> None:
        with self.lock:
            self.checkpoint(job, checkpoint_id)
            if self.rules.checkpoint_delete_removes:
                del job.checkpoints[checkpoint_id]
            job.log(f"checkpoint {checkpoint_id} deleted")

    def add_export(self, data: bytes, filename: str, owner: str = "") -> tuple[str, ExportRec]:
        """Keep an export behind a new URL token; the owner's oldest go first past its cap."""
        token = secrets.token_urlsafe(24)
        rec = ExportRec(data=data, filename=filename, expires_at=self.clock.time() + self.settings.export_ttl_s,
                        owner=owner)
        with self.lock:
            now = self.clock.time()
            for key in [k for k, v in self.exports.items() if v.expires_at <= now]:
                del self.exports[key]
            own = [k for k, v in self.exports.items() if v.owner == owner]
            for key in own[: max(0, len(own) + 1 - self.settings.max_exports_per_account)]:
                del self.exports[key]
            self.exports[token] = rec
        return token, rec

    def export(self, token: str) -> ExportRec | None:
        with self.lock:
            rec = self.exports.get(token)
            if rec is None or rec.expires_at <= self.clock.time():
                return None
            return rec
