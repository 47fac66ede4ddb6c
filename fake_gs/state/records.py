"""Plain records the store keeps: jobs, sub-jobs, checkpoints, requests, exports.

Mutated only under the store lock; the serial executor reads a request's ``work`` once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contract.errors import ErrorCode, detail_entry
from contract.models import SubJobConfig
from contract.states import JobState, RequestState
from fake_gs.answers.refusals import ApiError
from fake_gs.clock import format_rfc3339


@dataclass
class SubJobRec:
    sub_job_id: str
    job_type: str
    config: SubJobConfig
    weight_version: int = 0

    @property
    def max_seq_len(self) -> int:
        return self.config.max_seq_len


@dataclass
class CheckpointRec:
    checkpoint_id: str
    global_steps: int
    avg_loss: float | None
    created_at: float
    checkpoint_type: str
    snapshot: Any
    #: n_gpus of the sub-job that saved it: a load across another DP size needs
    #: load_optimizer_states false (spec §6.4). None: unknown (no rule applies).
    n_gpus: int | None = None


@dataclass
class ExportRec:
    """Bytes of an exported file, reachable only through its random URL token."""

    data: bytes
    filename: str
    expires_at: float
    #: The account whose job it was exported from (its exports are capped).
    owner: str = ""


@dataclass
class RequestRec:
    """One asynchronous request: what to run, and what the polls see."""

    request_id: str
    #: The job's key (``JobRec.job_id``), never shown.
    job_id: str
    op: str
    created_at: float
    work: Callable[[], Any] | None
    #: Encode the result as a DSSST1 frame even without tensors (tensor ops).
    force_frame: bool = False
    stream: bool = False
    updated_at: float = 0.0
    started: bool = False
    executed: bool = False
    cancelled: bool = False
    #: Visible terminal status, fixed the first time a poll (or cancel) sees it.
    final_status: str | None = None
    polls: int = 0
    #: Delivery, encoded once (see fake_gs.answers.delivery): the poll's ``result`` as JSON bytes,
    #: or the ``result_chunk`` events as JSON bytes each; None once freed (fake_gs.state.result_retention).
    result_raw: bytes | None = None
    events_raw: list[bytes] | None = None
    #: How the result is delivered: json, inline or chunks (``Delivered.form``).
    result_form: str = "json"
    result_bytes: int = 0
    #: When a poll delivered the result's last page (monotonic clock), and whether the
    #: result has been freed since (its polls then answer 410 result_expired).
    read_at: float | None = None
    expired: bool = False
    error: dict[str, Any] | None = None
    stream_events: deque[dict[str, Any]] = field(default_factory=deque)
    #: Chunk group that produced this request (for at-most-once counting), if any.
    group_id: str | None = None
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(default_factory=list)
    done_event: threading.Event = field(default_factory=threading.Event)
    #: How often each cursor offset was read (the cursor bends).
    cursor_reads: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.updated_at:
            self.updated_at = self.created_at

    def delivered_as(self) -> str | None:
        """How a finished request's result was delivered: ``json``, ``inline``, ``chunks``
        or ``stream`` (the traffic log's ``delivery``); None while it is not done."""
        if self.final_status != RequestState.DONE:
            return None
        return "stream" if self.stream else self.result_form


#: Log lines a job keeps (tail-logs cursors past dropped lines resume at the oldest kept).
MAX_LOG_ENTRIES = 10_000


@dataclass
class JobRec:
    """One job. Two ids: ``job_id`` is the fake-wide key every part of the store, the
    engine, the executors and the chunk-group registry know the job by; ``public_id`` is
    its name in its owner's account, the id every answer to the owner shows and every path
    or body of the owner names (job ids are per account: another account may hold a job of
    the same name). They are equal unless another account held that name first."""

    job_id: str
    owner: str
    ordinal: int
    seed: int
    created_at: float
    sub_jobs: list[SubJobRec]
    experiment_name: str
    gpus: int
    status: str = JobState.PENDING.value
    reason: str = ""
    updated_at: float = 0.0
    admitted_at: float | None = None
    #: GETs of this job since it was admitted (start-up ``polls:N``).
    polls: int = 0
    global_steps: int = 0
    last_loss: float | None = None
    fb_executions: int = 0
    requests_total: int = 0
    checkpoints: dict[str, CheckpointRec] = field(default_factory=dict)
    logs: list[dict[str, Any]] = field(default_factory=list)
    #: Requests holding a result, in completion order, and their bytes (fake_gs.state.result_retention).
    results: dict[str, RequestRec] = field(default_factory=dict)
    results_bytes: int = 0
    #: Index (as tail-logs cursors count) of ``logs[0]``: old lines are dropped past a cap.
    log_base: int = 0
    #: The outward form may show a cancelled job as ``cancelling`` to its first GET (or until
    #: this time passes), then ``cancelled``; None: no such passage.
    cancelling_until: float | None = None
    #: JSON bytes of the create body this job keeps (its account's share, fake_gs.state.quotas).
    config_bytes: int = 0
    #: The job's id as its owner sees it ("": the same as ``job_id``).
    public_id: str = ""
    #: (host job key, n_gpus) of each multiplexed sub-job: its GPUs are the host's, counted
    #: once, while the host holds them.
    gpu_hosts: list[tuple[str, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.updated_at:
            self.updated_at = self.created_at
        if not self.public_id:
            self.public_id = self.job_id

    def sub_job(self, sub_job_id: str) -> SubJobRec | None:
        return next((s for s in self.sub_jobs if s.sub_job_id == sub_job_id), None)

    def named_sub_job(self, field: str, sub_job_id: str) -> SubJobRec:
        """The sub-job a call's ``field`` names, or a ``sub_job_not_found`` refusal naming it."""
        found = self.sub_job(sub_job_id)
        if found is None:
            raise ApiError(ErrorCode.SUB_JOB_NOT_FOUND,
                           f"{field} {sub_job_id!r} is not a sub-job of job {self.public_id}",
                           [detail_entry((field,), "not a sub-job of this job", "value_error")])
        return found

    def of_type(self, job_type: str) -> list[SubJobRec]:
        want = "log_probability" if job_type == "log_prob" else job_type
        return [s for s in self.sub_jobs if s.job_type == want]

    def log(self, message: str, level: str = "INFO", sub_job_id: str | None = None) -> None:
        entry: dict[str, Any] = {"timestamp": format_rfc3339(time.time()), "level": level, "message": message}
        if sub_job_id:
            entry["sub_job_id"] = sub_job_id
        self.logs.append(entry)
        if len(self.logs) > MAX_LOG_ENTRIES:  # a long job keeps its newest lines only
            drop = len(self.logs) - MAX_LOG_ENTRIES // 2
            del self.logs[:drop]
            self.log_base += drop

    def forget_logs(self) -> None:
        """An ended job's logs can no longer be tailed (tail-logs needs a live job): drop
        them, so they pin no memory."""
        self.log_base += len(self.logs)
        self.logs = []
