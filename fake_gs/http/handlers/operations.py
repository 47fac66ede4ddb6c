"""POST /{job_id}/operation: routing hints, then one handler per operation type (spec §7).

``forward`` and ``weight-sync`` answer a request id to poll; the rest answer inline.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import Response

from contract import models as m
from contract.errors import ErrorCode, detail_entry
from contract.jobrules import lora_config
from contract.models import (
    OPERATION_ANSWERS,
    OPERATION_NATURAL_TARGET,
    OPERATION_PAYLOADS,
    OPERATIONS_ALLOWED_WHILE_PLACING,
    BootstrapRouterReplayPayload,
    CancelRequestPayload,
    ForwardPayload,
    OperationEnvelope,
    RouterReplayDiscardPayload,
    TailLogsPayload,
    WeightSyncPayload,
)
from contract.states import JobState
from fake_gs.answers import check as answers
from fake_gs.answers import forms
from fake_gs.answers.refusals import ApiError
from fake_gs.answers.way_out import AnswerPart
from fake_gs.chunking.intake import decode_frame, refuse_legacy
from fake_gs.http.handlers.context import Ctx, json_response
from fake_gs.state.records import JobRec, SubJobRec
from fake_gs.state.training import Training, forward_object

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


def route_operation(ctx: Ctx, job: JobRec, env: OperationEnvelope) -> SubJobRec:
    """The sub-job an operation goes to, from its hints or its natural target."""
    by_id: SubJobRec | None = None
    if env.sub_job_id:
        by_id = job.sub_job(env.sub_job_id)
        if by_id is None:
            raise ApiError(ErrorCode.SUB_JOB_NOT_FOUND, f"sub_job_id {env.sub_job_id!r} is not a sub-job of job {job.public_id}",
                           [detail_entry(("sub_job_id",), "unknown sub-job", "value_error")])
    if env.sub_job_type:
        wanted = _job_type(env.sub_job_type)
        if by_id is not None:
            if by_id.job_type != wanted and ctx.store.rules.routing_conflict_refused:
                raise ApiError(ErrorCode.ROUTING_CONFLICT,
                               f"sub_job_id {by_id.sub_job_id} is a {by_id.job_type} sub-job, not {wanted}",
                               [detail_entry(("sub_job_type",), "disagrees with sub_job_id", ErrorCode.ROUTING_CONFLICT)])
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
            and ctx.store.rules.routing_hint_required):
        raise ApiError(ErrorCode.ROUTING_HINT_REQUIRED,
                       f"job {job.public_id} has {len(job.sub_jobs)} sub-jobs; name the receiver of "
                       f"{env.operation_type} with sub_job_id or sub_job_type",
                       [detail_entry(("sub_job_id",), "required on a job with several sub-jobs", "missing")])
    natural = job.of_type(OPERATION_NATURAL_TARGET[env.operation_type])
    return natural[0] if natural else job.sub_jobs[0]


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


async def op_forward(ctx: Ctx, job: JobRec, target: SubJobRec, payload: Any) -> Response:
    assert isinstance(payload, ForwardPayload)
    try:
        data = base64.b64decode(payload.payload_b64, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(ErrorCode.MALFORMED_FRAME, "payload.payload_b64 is not valid base64",
                       [detail_entry(("payload", "payload_b64"), "invalid base64", "value_error")]) from None
    limit = ctx.store.rules.payload_limit
    if limit is not None and len(data) > limit:
        raise ApiError(ErrorCode.PAYLOAD_TOO_LARGE,
                       f"forward payload of {len(data)} bytes exceeds {ctx.settings.max_body_bytes}; operations are not chunked")
    if not data:
        raise ApiError(ErrorCode.MALFORMED_FRAME, "payload.payload_b64 is empty")
    refuse_legacy(data)
    request = forward_object(await decode_frame(ctx.settings, ctx.settings.seams, data))
    work = Training(ctx.store).forward_work(job, request, reference=bool(request.get("reference_model")))
    return ctx.submitted(job, ctx.store.queue.submit(job, "op:forward", work, force_frame=True))


async def op_weight_sync(ctx: Ctx, job: JobRec, target: SubJobRec, payload: Any) -> Response:
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
    if payload.weight_format == "lora" and ctx.store.rules.lora_needs_peft:
        check_lora(job, source, targets)
    store = ctx.store

    def work() -> dict[str, Any]:
        version = store.engine.weight_sync(job.job_id, source.sub_job_id, list(payload.target_sub_job_ids or []))
        with store.lock:
            for sub in job.sub_jobs:
                if sub.sub_job_id in targets:
                    sub.weight_version = version
        return answers.render(m.WeightSyncResult(weight_version=version, source_sub_job_id=source.sub_job_id,
                                                 target_sub_job_ids=targets, weight_format=payload.weight_format))

    return ctx.submitted(job, store.queue.submit(job, "op:weight-sync", work))


async def op_bootstrap(ctx: Ctx, job: JobRec, target: SubJobRec, payload: Any) -> Response:
    assert isinstance(payload, BootstrapRouterReplayPayload)
    src = _own_sub_job(job, payload.source_sub_job_id, ("payload", "source_sub_job_id"))
    dst = _own_sub_job(job, payload.target_sub_job_id, ("payload", "target_sub_job_id"))
    if ctx.store.rules.bootstrap_direction_checked:
        for sub, want, loc in ((src, "sampling", ("payload", "source_sub_job_id")),
                               (dst, "training", ("payload", "target_sub_job_id")),
                               (target, "training", ("sub_job_id",))):
            if sub.job_type != want:
                raise ApiError(ErrorCode.WRONG_SUB_JOB_TYPE,
                               f"bootstrap-router-replay goes from a sampling source to a training target "
                               f"(the receiver); {sub.sub_job_id} is a {sub.job_type} sub-job",
                               [detail_entry(loc, f"must be a {want} sub-job", ErrorCode.WRONG_SUB_JOB_TYPE)])
    result = m.BootstrapRouterReplayResult(
        bootstrapped=True, source_sub_job_id=src.sub_job_id, target_sub_job_id=dst.sub_job_id,
        max_cache_bytes=payload.max_cache_bytes)
    if ctx.forms.use("bootstrap-polled"):  # spec §7: "poll if a deployment returns a request id"
        ctx.expect(model=m.SubmitResponse)
        return ctx.submitted(job, ctx.store.queue.submit(job, "op:bootstrap-router-replay", lambda: answers.render(result)))
    return json_response(result)


async def op_discard(ctx: Ctx, job: JobRec, target: SubJobRec, payload: Any) -> Response:
    assert isinstance(payload, RouterReplayDiscardPayload)
    return json_response(m.RouterReplayDiscardResult(discarded=len(payload.sample_ids), sub_job_id=target.sub_job_id))


async def op_reset_prefix_cache(ctx: Ctx, job: JobRec, target: SubJobRec, payload: Any) -> Response:
    if target.job_type != "sampling" and ctx.store.rules.reset_sampler_only:
        raise ApiError(ErrorCode.WRONG_SUB_JOB_TYPE,
                       f"reset-prefix-cache is a sampling call; {target.sub_job_id} is a {target.job_type} sub-job",
                       [detail_entry(("sub_job_id",), "must be a sampling sub-job", ErrorCode.WRONG_SUB_JOB_TYPE)])
    return json_response(m.ResetPrefixCacheResult(reset=True, sub_job_id=target.sub_job_id))


async def op_cancel_request(ctx: Ctx, job: JobRec, target: SubJobRec, payload: Any) -> Response:
    assert isinstance(payload, CancelRequestPayload)
    req = ctx.store.queue.request_for(job, payload.request_id)
    cancelled, status = ctx.store.queue.cancel_request(req)
    # No "request_id" key: an operation answer holding one is a request to poll (spec §7).
    return json_response(m.CancelRequestResult(cancelled_request_id=req.request_id, cancelled=cancelled,
                                               status=ctx.request_status_text(status)))


async def op_tail_logs(ctx: Ctx, job: JobRec, target: SubJobRec, payload: Any) -> Response:
    assert isinstance(payload, TailLogsPayload)
    spec = ctx.forms.use("log-cursor")
    cursor_in = forms.log_cursor(payload.cursor) if ctx.settings.dialect != "kit" else payload.cursor
    try:
        start = int(cursor_in) if cursor_in not in (None, "") else 0
    except (TypeError, ValueError):
        raise ApiError(ErrorCode.INVALID_ARGUMENT, "payload.cursor is not a cursor this server issued",
                       [detail_entry(("payload", "cursor"), "unknown cursor", "value_error")]) from None
    if start < 0:
        raise ApiError(ErrorCode.INVALID_ARGUMENT, "payload.cursor must be >= 0",
                       [detail_entry(("payload", "cursor"), "negative cursor", "value_error")])
    lines = min(payload.max_lines or DEFAULT_LOG_LINES, MAX_LOG_LINES)
    with ctx.store.lock:
        start = max(start, job.log_base)  # lines before log_base were dropped (a long job)
        first = start - job.log_base
        entries = job.logs[first : first + lines]
        end = start + len(entries)
        eof = end >= job.log_base + len(job.logs)
    if spec:
        placing = ctx.store.table.status(job) == JobState.PLACING
        return json_response(m.TailLogsResult(**forms.log_page(entries, end, eof, placing, payload.cursor)))
    page = answers.render(m.TailLogsResult(entries=entries, next_cursor=str(end), eof=eof))
    return json_response(ctx.way_out.part(AnswerPart.TAIL_LOGS_PAGE, page))


Handler = Callable[[Ctx, JobRec, SubJobRec, Any], Awaitable[Response]]
OPERATIONS: dict[str, Handler] = {
    "forward": op_forward,
    "weight-sync": op_weight_sync,
    "bootstrap-router-replay": op_bootstrap,
    "router-replay-discard": op_discard,
    "reset-prefix-cache": op_reset_prefix_cache,
    "cancel-request": op_cancel_request,
    "tail-logs": op_tail_logs,
}


async def operation(ctx: Ctx) -> Response:
    ctx.job(allowed=frozenset())  # 404 before anything else
    env = await ctx.json_model(OperationEnvelope)
    op = env.operation_type
    ctx.note("op", op)
    handler = OPERATIONS.get(op)
    if handler is None or op not in OPERATION_PAYLOADS:
        if ctx.store.rules.unknown_operations_run:
            return json_response({})
        raise ApiError(ErrorCode.UNKNOWN_OPERATION_TYPE, f"unknown operation_type {op!r}",
                       [detail_entry(("operation_type",), f"must be one of {sorted(OPERATIONS)}", "enum")])
    job = ctx.job(allowed=LOGS_STATES if op in OPERATIONS_ALLOWED_WHILE_PLACING else RUNNING)
    payload = await ctx.validated(OPERATION_PAYLOADS[op], env.payload, ("payload",))
    ctx.expect(model=OPERATION_ANSWERS[op])
    target = route_operation(ctx, job, env)
    return await handler(ctx, job, target, payload)
