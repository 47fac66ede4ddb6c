"""Jobs the suite creates: the shared session job, a budget for extra ones, and cleanup.

On a real service every job costs GPUs, so a run creates one job (or reuses
``--gs-job-id``) and records what its start-up showed: the create answer, the statuses
it went through, a data-plane call made before it was running and a ``tail-logs`` call
made while it was placing. Properties for JOB-CREATE-1, JOB-STATE-1, JOB-RUNNING-1,
OP-RUNNING-1 and OP-LOGS-2 judge those records instead of paying for more jobs.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.drivers.raw import Answer, RawDriver
from conformance.inputs.valid_bodies import shared_job
from contract.states import JOB_ACTIVE, JobState, normalize_job_state


class SetupFailed(RuntimeError):
    """Shared set-up failed: ``clause`` is the rule the failure breaks, ``answer`` the
    exchange that shows it (the run reports it once, as a root cause)."""

    def __init__(self, clause: str, summary: str, answer: Answer | None = None) -> None:
        super().__init__(f"{summary}: {answer}" if answer is not None else summary)
        self.clause, self.summary, self.answer = clause, summary, answer


@dataclass
class SharedJob:
    """The session job and the evidence its start-up produced."""

    job_id: str
    created: bool
    job: dict[str, Any]
    create_body: dict[str, Any] | None = None
    create_answer: Answer | None = None
    startup_statuses: list[str] = field(default_factory=list)
    not_running_probes: list[tuple[str, Answer]] = field(default_factory=list)
    #: An operation other than tail-logs tried before running (spec §7 refuses it).
    not_running_ops: list[tuple[str, Answer]] = field(default_factory=list)
    placing_tail_logs: Answer | None = None

    def sub_job(self, job_type: str) -> dict[str, Any] | None:
        for sub in self.job.get("sub_jobs") or []:
            if isinstance(sub, Mapping) and sub.get("job_type") == job_type:
                return dict(sub)
        return None

    @property
    def training(self) -> str | None:
        sub = self.sub_job("training")
        return str(sub["sub_job_id"]) if sub else None

    @property
    def sampling(self) -> str | None:
        sub = self.sub_job("sampling")
        return str(sub["sub_job_id"]) if sub else None

    @property
    def sampling_max_seq_len(self) -> int | None:
        sub = self.sub_job("sampling") or {}
        cfg = sub.get("inference_config") or {}
        value = cfg.get("max_seq_len") if isinstance(cfg, Mapping) else None
        return int(value) if isinstance(value, int) else None

    @property
    def peak_memory_logged(self) -> bool:
        sub = self.sub_job("training") or {}
        cfg = sub.get("training_config") or {}
        return bool(isinstance(cfg, Mapping) and cfg.get("step_peak_memory_log"))


class JobBudget:
    """How many jobs the run may still create (None: unlimited)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, n: int = 1, why: str = "") -> None:
        """Reserve ``n`` jobs or skip the calling test saying how to allow it."""
        with self._lock:
            if self.limit is not None and self.used + n > self.limit:
                pytest.skip(
                    f"needs {n} more job(s) on the target{' (' + why + ')' if why else ''}; "
                    f"the run may create {self.limit} (raise --gs-max-jobs to allow)"
                )
            self.used += n


class JobLedger:
    """Every job the run created, cancelled at the end of the session."""

    def __init__(self) -> None:
        self.created: list[tuple[RawDriver, str]] = []
        self._lock = threading.Lock()

    def add(self, driver: RawDriver, job_id: str) -> None:
        with self._lock:
            self.created.append((driver, job_id))

    def cancel_all(self) -> list[str]:
        problems: list[str] = []
        with self._lock:
            items, self.created = self.created, []
        for driver, job_id in items:
            try:
                ans = driver.cancel(job_id)
                if not ans.ok and ans.status not in (404, 409):
                    problems.append(f"cancel {job_id}: {ans.status}")
            except Exception as exc:  # cleanup must not mask the run's result
                problems.append(f"cancel {job_id}: {exc}")
        return problems


def start_shared_job(
    driver: RawDriver,
    model: str,
    reuse_job_id: str | None,
    timeout_s: float,
) -> SharedJob:
    """Create (or reuse) the session job, wait until running and record its start-up."""
    body: dict[str, Any] | None = None
    create_answer: Answer | None = None
    if reuse_job_id:
        job_id = reuse_job_id
    else:
        body = shared_job(model)
        create_answer = driver.create_job(body)
        job_id = create_answer.field("job_id")
        if not create_answer.ok or not isinstance(job_id, str):
            raise SetupFailed("JOB-CREATE-1", "the session job could not be created "
                              "(a valid create answered no 2xx {job_id})", create_answer)
    shared = SharedJob(
        job_id=job_id,
        created=not reuse_job_id,
        job={},
        create_body=body,
        create_answer=create_answer,
    )
    probed: set[str] = set()

    def on_status(raw: str) -> None:
        state = normalize_job_state(raw)
        if state in JOB_ACTIVE and state != JobState.RUNNING and state not in probed:
            probed.add(state)
            shared.not_running_probes.append(
                (raw, driver.call("step", json_body={}, job_id=job_id))
            )
            shared.not_running_ops.append((raw, driver.operation(job_id, {
                "operation_type": "router-replay-discard", "sub_job_type": "sampling",
                "payload": {"sample_ids": ["gs-not-running-probe"]}})))
            if state == JobState.PLACING and shared.placing_tail_logs is None:
                # Routed by type (spec §7's hints): the sub-jobs' ids come with the job once
                # it runs, and the job has several (spec §7.8's example names its receiver).
                shared.placing_tail_logs = driver.operation(job_id, {
                    "operation_type": "tail-logs", "sub_job_type": "training", "payload": {"max_lines": 5}})

    ans, seen = driver.wait_job(job_id, timeout_s=timeout_s, on_status=on_status)
    shared.startup_statuses = seen
    if not ans.ok or normalize_job_state(ans.field("status")) != JobState.RUNNING:
        raise SetupFailed("JOB-STATE-1", f"the session job {job_id} did not reach running "
                          f"(statuses seen: {', '.join(seen) or 'none'})", ans)
    shared.job = dict(ans.body)
    return shared
