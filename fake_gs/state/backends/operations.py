"""The operation route's backend: routing hints, then one method per operation type (spec §7).

Each method checks its operation's rules, asking the store's
:class:`~fake_gs.state.rules.Rules` for those a variation may waive, and does the work:
``forward`` and ``weight-sync`` submit a request to poll; the rest answer at once. The
handler (``fake_gs.http.handlers.operations``) parses the envelope and the payload, calls
a method and renders its answer as the answer side spells it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from contract import models as m
from contract.errors import ErrorCode, detail_entry
from contract.jobrules import lora_config
from contract.models import (
    OPERATION_NATURAL_TARGET,
    OPERATION_PAYLOADS,
    OPERATIONS_ALLOWED_WHILE_PLACING,
    BootstrapRouterReplayPayload,
    OperationEnvelope,
    WeightSyncPayload,
)
from contract.states import JobState
from fake_gs.answers.refusals import ApiError
from fake_gs.answers.render import render
from fake_gs.chunking.intake import decode, refuse_legacy
from fake_gs.state.backends.training import Training, forward_object
from fake_gs.state.records import JobRec, RequestRec, SubJobRec
from fake_gs.state.store import Store

RUNNING = frozenset({JobState.RUNNING})
#: tail-logs also works while the job starts (placing, and initializing after it).
LOGS_STATES = frozenset({JobState.PLACING, JobState.INITIALIZING, JobState.RUNNING})
#: Operations whose receiver the caller must name when the job has several sub-jobs (spec §7.4:
#: the service does not infer it).
HINT_REQUIRED = frozenset({"weight-sync", "bootstrap-router-replay", "router-replay-discard"})
DEFAULT_LOG_LINES = 100
MAX_LOG_LINES = 1000


def _job_type(hint: str) -> str:
    return "log_probability" if hint == "log_prob" else hint


def _own_sub_job(job: JobRec, sub_job_id: str, loc: tuple[str | int, ...]) -> SubJobRec:
    sub = job.sub_job(sub_job_id)
    if sub is None:
        raise ApiError(ErrorCode.SUB_JOB_NOT_FOUND, f"{sub_job_id!r} is not a sub-job of job {job.public_id}",
                       [detail_entry(loc, "unknown sub-job", "value_error")])
    return sub


def check_lora(job: JobRec, source: SubJobRec, targets: list[str]) -> None:
    """spec §7.3: LoRA sync needs peft_config on the source and every target at creation,
    agreeing on r, lora_alpha and target_modules."""
    want = lora_config(source.config)
    if want is None:
        raise ApiError(ErrorCode.LORA_NOT_CONFIGURED,
                       f"weight_format lora needs training_config.peft_config on {source.sub_job_id} at creation",
                       [detail_entry(("payload", "weight_format"), "source sub-job has no peft_config", "lora")])
    for i, tid in enumerate(targets):
        sub = job.sub_job(tid)
        got = lora_config(sub.config) if sub is not None else None
        if got != want:
            why = "has no peft_config" if got is None else f"peft_config {got} differs from the source's {want}"
            raise ApiError(ErrorCode.LORA_NOT_CONFIGURED, f"weight_format lora: target {tid} {why}",
                           [detail_entry(("payload", "target_sub_job_ids", i), why, "lora")])


@dataclass(frozen=True)
class OperationCall:
    """One operation: its job, the sub-job it goes to (from its hints) and its payload."""

    job: JobRec
    target: SubJobRec
    payload: Any


@dataclass(frozen=True)
class LogPage:
    """A page of a job's log lines: the lines, the cursor after them, whether they are all."""

    entries: list[Any]
    end: int
    eof: bool


class Operations:
    """The operation route over one store (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.rules = store.rules

    def admit(self, op: str, implemented: Collection[str]) -> bool:
        """Whether ``op`` is an operation type this server runs (``implemented``: those it
        has an answer for); an unknown one is refused, or (bent) answers an empty result
        (False)."""
        if op in implemented and op in OPERATION_PAYLOADS:
            return True
        if self.rules.unknown_operations_run:
            return False
        raise ApiError(ErrorCode.UNKNOWN_OPERATION_TYPE, f"unknown operation_type {op!r}",
                       [detail_entry(("operation_type",), f"must be one of {sorted(implemented)}", "enum")])

    @staticmethod
    def states(op: str) -> frozenset[str]:
        """The job states an operation of type ``op`` runs in."""
        return LOGS_STATES if op in OPERATIONS_ALLOWED_WHILE_PLACING else RUNNING

    def call(self, job: JobRec, env: OperationEnvelope, payload: Any) -> OperationCall:
        return OperationCall(job, self.target(job, env), payload)

    def target(self, job: JobRec, env: OperationEnvelope) -> SubJobRec:
        """The sub-job an operation goes to, from its hints or its natural target."""
        by_id: SubJobRec | None = None
        if env.sub_job_id:
            by_id = job.named_sub_job("sub_job_id", env.sub_job_id)
        if env.sub_job_type:
            wanted = _job_type(env.sub_job_type)
            if by_id is not None:
                if by_id.job_type != wanted and self.rules.routing_conflict_refused:
                    raise ApiError(ErrorCode.ROUTING_CONFLICT,
                                   f"sub_job_id {by_id.sub_job_id} is a {by_id.job_type} sub-job, not {wanted}",
                                   [detail_entry(("sub_job_type",), "disagrees with sub_job_id",
                                                 ErrorCode.ROUTING_CONFLICT)])
                return by_id
            candidates = job.of_type(wanted)
            if len(candidates) == 1:
                return candidates[0]
            if not candidates:
                raise ApiError(ErrorCode.SUB_JOB_NOT_FOUND, f"job {job.public_id} has no {wanted} sub-job",
                               [detail_entry(("sub_job_type",), "no such sub-job", "value_error")])
            raise ApiError(ErrorCode.ROUTING_CONFLICT,
                           f"job {job.public_id} has {len(candidates)} {wanted} sub-jobs; name one with sub_job_id",
                           [detail_entry(("sub_job_type",), "ambiguous", ErrorCode.ROUTING_CONFLICT)])
        if by_id is not None:
            return by_id
        if (env.operation_type in HINT_REQUIRED and len(job.sub_jobs) > 1
                and self.rules.routing_hint_required):
            raise ApiError(ErrorCode.ROUTING_HINT_REQUIRED,
                           f"job {job.public_id} has {len(job.sub_jobs)} sub-jobs; name the receiver of "
                           f"{env.operation_type} with sub_job_id or sub_job_type",
                           [detail_entry(("sub_job_id",), "required on a job with several sub-jobs", "missing")])
        natural = job.of_type(OPERATION_NATURAL_TARGET[env.operation_type])
        return natural[0] if natural else job.sub_jobs[0]

    async def forward(self, call: OperationCall) -> RequestRec:
        """A forward pass over the base64 frame in the payload (operations are not chunked:
        one body holds it whole)."""
        try:
            data = base64.b64decode(call.payload.payload_b64, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(ErrorCode.MALFORMED_FRAME, "payload.payload_b64 is not valid base64",
                           [detail_entry(("payload", "payload_b64"), "invalid base64", "value_error")]) from None
        limit, settings = self.rules.payload_limit, self.store.settings
        if limit is not None and len(data) > limit:
            raise ApiError(ErrorCode.PAYLOAD_TOO_LARGE, f"forward payload of {len(data)} bytes exceeds "
                           f"{settings.max_body_bytes}; operations are not chunked")
        if not data:
            raise ApiError(ErrorCode.MALFORMED_FRAME, "payload.payload_b64 is empty")
        refuse_legacy(data)
        request = forward_object(await decode(settings, data, deep_crashes=self.rules.deep_frame_crashes))
        work = Training(self.store).forward_work(call.job, request, reference=bool(request.get("reference_model")))
        return self.store.queue.submit(call.job, "op:forward", work, force_frame=True)

    def weight_sync(self, call: OperationCall) -> RequestRec:
        job, target, payload = call.job, call.target, call.payload
        assert isinstance(payload, WeightSyncPayload)
        if payload.source_sub_job_id:
            source = _own_sub_job(job, payload.source_sub_job_id, ("payload", "source_sub_job_id"))
        else:
            trainers = job.of_type("training")
            source = target if target.job_type == "training" or not trainers else trainers[0]
        if payload.target_sub_job_ids:
            targets = [_own_sub_job(job, t, ("payload", "target_sub_job_ids", i)).sub_job_id
                       for i, t in enumerate(payload.target_sub_job_ids)]
        else:
            targets = [s.sub_job_id for s in job.of_type("sampling")]
        if payload.weight_format == "lora" and self.rules.lora_needs_peft:
            check_lora(job, source, targets)
        store = self.store

        def work() -> dict[str, Any]:
            version = store.engine.weight_sync(job.job_id, source.sub_job_id, list(payload.target_sub_job_ids or []))
            with store.lock:
                for sub in job.sub_jobs:
                    if sub.sub_job_id in targets:
                        sub.weight_version = version
            return render(m.WeightSyncResult(weight_version=version, source_sub_job_id=source.sub_job_id,
                                                     target_sub_job_ids=targets, weight_format=payload.weight_format))

        return store.queue.submit(job, "op:weight-sync", work)

    def bootstrap(self, call: OperationCall) -> m.BootstrapRouterReplayResult:
        job, payload = call.job, call.payload
        assert isinstance(payload, BootstrapRouterReplayPayload)
        src = _own_sub_job(job, payload.source_sub_job_id, ("payload", "source_sub_job_id"))
        dst = _own_sub_job(job, payload.target_sub_job_id, ("payload", "target_sub_job_id"))
        if self.rules.bootstrap_direction_checked:
            for sub, want, loc in ((src, "sampling", ("payload", "source_sub_job_id")),
                                   (dst, "training", ("payload", "target_sub_job_id")),
                                   (call.target, "training", ("sub_job_id",))):
                if sub.job_type != want:
                    raise ApiError(ErrorCode.WRONG_SUB_JOB_TYPE,
                                   f"bootstrap-router-replay goes from a sampling source to a training target "
                                   f"(the receiver); {sub.sub_job_id} is a {sub.job_type} sub-job",
                                   [detail_entry(loc, f"must be a {want} sub-job", ErrorCode.WRONG_SUB_JOB_TYPE)])
        return m.BootstrapRouterReplayResult(bootstrapped=True, source_sub_job_id=src.sub_job_id,
                                             target_sub_job_id=dst.sub_job_id, max_cache_bytes=payload.max_cache_bytes)

    def submit_answered(self, job: JobRec, op: str, answer: BaseModel) -> RequestRec:
        """A request whose result is ``answer`` already (an operation a deployment may
        answer with a request id to poll, spec §7)."""
        result = render(answer)
        return self.store.queue.submit(job, f"op:{op}", lambda: result)

    @staticmethod
    def discard(call: OperationCall) -> m.RouterReplayDiscardResult:
        return m.RouterReplayDiscardResult(discarded=len(call.payload.sample_ids), sub_job_id=call.target.sub_job_id)

    def reset_prefix_cache(self, call: OperationCall) -> m.ResetPrefixCacheResult:
        target = call.target
        if target.job_type != "sampling" and self.rules.reset_sampler_only:
            raise ApiError(ErrorCode.WRONG_SUB_JOB_TYPE,
                           f"reset-prefix-cache is a sampling call; {target.sub_job_id} is a {target.job_type} sub-job",
                           [detail_entry(("sub_job_id",), "must be a sampling sub-job", ErrorCode.WRONG_SUB_JOB_TYPE)])
        return m.ResetPrefixCacheResult(reset=True, sub_job_id=target.sub_job_id)

    def cancel_request(self, call: OperationCall) -> tuple[str, bool, str]:
        """Cancel a request of the job: its id, whether it was cancelled, its status."""
        queue = self.store.queue
        req = queue.request_for(call.job, call.payload.request_id)
        cancelled, status = queue.cancel_request(req)
        return req.request_id, cancelled, status

    def tail_logs(self, job: JobRec, cursor: Any, max_lines: int | None) -> LogPage:
        """The job's log lines from ``cursor`` (the kit's line index), at most ``max_lines``."""
        try:
            start = int(cursor) if cursor not in (None, "") else 0
        except (TypeError, ValueError):
            raise ApiError(ErrorCode.INVALID_ARGUMENT, "payload.cursor is not a cursor this server issued",
                           [detail_entry(("payload", "cursor"), "unknown cursor", "value_error")]) from None
        if start < 0:
            raise ApiError(ErrorCode.INVALID_ARGUMENT, "payload.cursor must be >= 0",
                           [detail_entry(("payload", "cursor"), "negative cursor", "value_error")])
        lines = min(max_lines or DEFAULT_LOG_LINES, MAX_LOG_LINES)
        with self.store.lock:
            start = max(start, job.log_base)  # lines before log_base were dropped (a long job)
            first = start - job.log_base
            entries = job.logs[first : first + lines]
            end = start + len(entries)
            eof = end >= job.log_base + len(job.logs)
        return LogPage(entries, end, eof)

    def placing(self, job: JobRec) -> bool:
        return self.store.table.status(job) == JobState.PLACING
