"""Control plane: create, list, get, cancel jobs; capacity; experiment-run names."""

from __future__ import annotations

from functools import partial
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from contract import models as m
from contract.errors import ErrorCode, detail_entry
from contract.ids import SUB_JOB_ID_RE, printable
from contract.jobrules import config_loc, multiplex_job_id
from contract.models import CreateJobRequest, SubJobConfig
from contract.models.catalog import ALL_MODELS, TRAINING_MODELS, is_known_model, is_trainable
from contract.states import JobState
from fake_gs.answers import check as answers
from fake_gs.answers import forms as dialect
from fake_gs.answers.refusals import ApiError
from fake_gs.answers.way_out import AnswerPart
from fake_gs.http.handlers.context import OFF_LOOP_JSON_BYTES, Ctx, json_response
from fake_gs.options import flag_name
from fake_gs.settings import FakeSettings
from fake_gs.state.create_rules import InitFrom, check_config_rules, check_init, requested_job_id
from fake_gs.state.execution_logs import run_name
from fake_gs.state.quotas import check_job_room, weigh_config
from fake_gs.state.records import CheckpointRec, JobRec, SubJobRec, rfc3339

OWNER_ROLE = "FAKE_GS_ROLE"


def sub_job_view(sub: SubJobRec, shown: str) -> m.SubJob:
    """A sub-job as the job object shows it: its configs without unset fields."""
    cfg = sub.config
    item: dict[str, Any] = {}
    if cfg.training_config is not None:
        item["training_config"] = cfg.training_config.model_dump(mode="json", exclude_none=True)
    if cfg.inference_config is not None:
        item["inference_config"] = cfg.inference_config.model_dump(mode="json", exclude_none=True)
    for name in ("global_batch_size", "dtype", "seed"):
        value = getattr(cfg, name)
        if value is not None:
            item[name] = value
    return m.SubJob(sub_job_id=sub.sub_job_id, job_type=sub.job_type, status=shown,
                    model_name=cfg.model_name, **item)


def job_view(ctx: Ctx, job: JobRec, *, count_poll: bool = False) -> m.Job:
    """The job object with every field (spec §5.2), in the configured dialect."""
    status = ctx.store.table.status(job, count_poll=count_poll)
    shown = ctx.job_status_text(status)
    reason = job.reason
    if status == JobState.FAILED:
        reason = ctx.way_out.part(AnswerPart.FAILED_JOB_REASON, reason)
    tokens, forms = ctx.settings.tokens, ctx.forms
    fields: dict[str, Any] = dict(
        job_id=job.public_id,
        status=shown,
        reason=reason,
        created_at=dialect.timestamp(forms, job.created_at, rfc3339(job.created_at)),
        updated_at=dialect.timestamp(forms, job.updated_at, rfc3339(job.updated_at)),
        image_tag="" if status == JobState.PENDING else f"fake-gs/{ctx.settings.engine}:0.1.0",
        submitted_by=f"user_{tokens.index(job.owner)}" if job.owner in tokens else "anonymous",
        owner_role=OWNER_ROLE,
        experiment_name=job.experiment_name,
        sub_jobs=[sub_job_view(sub, shown) for sub in job.sub_jobs],
    )
    return m.Job(**dialect.job_object(forms, fields))


def check_models(ctx: Ctx, body: CreateJobRequest) -> None:
    if ctx.settings.allow_any_model:
        return
    for i, cfg in enumerate(body.sub_job_configs):
        loc = ("sub_job_configs", i, "model_name")
        if not is_known_model(cfg.model_name):
            message = (f"model {printable(cfg.model_name)[:200]!r} is not served here; served: "
                       f"{', '.join(ALL_MODELS)} (training: {', '.join(TRAINING_MODELS)}); "
                       f"start the fake with {flag_name(FakeSettings, 'allow_any_model')} to accept any name")
            raise ApiError(ErrorCode.UNKNOWN_MODEL, message,
                           [detail_entry(loc, "unknown model", ErrorCode.UNKNOWN_MODEL)])
        if (cfg.job_type == "training" and not is_trainable(cfg.model_name)
                and ctx.store.rules.training_needs_trainable_model):
            message = (f"model {printable(cfg.model_name)[:200]!r} is served for inference only; "
                       f"trainable: {', '.join(TRAINING_MODELS)}")
            raise ApiError(ErrorCode.MODEL_NOT_TRAINABLE, message,
                           [detail_entry(loc, "model is inference-only", ErrorCode.MODEL_NOT_TRAINABLE)])


def _resolve_checkpoint(ctx: Ctx, i: int, cfg: SubJobConfig) -> CheckpointRec | None:
    """The checkpoint ``source_checkpoint_info`` names: it must exist (spec §6.5, §8.4)."""
    info = cfg.source_checkpoint_info
    if info is None:
        return None
    loc = ("sub_job_configs", i, "source_checkpoint_info")
    if "stage_info" in (info.model_extra or {}) and ctx.store.rules.init_credentials_refused:
        # CKPT-INIT-7: the server stamps it (spec §6.5)
        message = "stage_info credentials are stamped by the server; clients must not send them"
        raise ApiError(ErrorCode.VALIDATION_FAILED, message, [detail_entry((*loc, "stage_info"), message)])
    if not info.source_job_id and ctx.store.rules.init_from_any_job:
        for job in reversed(ctx.store.table.list_jobs(ctx.owner, None)):
            if info.checkpoint_id in job.checkpoints:
                return job.checkpoints[info.checkpoint_id]
    if not info.source_job_id:  # CKPT-INIT-6: a new job's checkpoint is always another job's
        message = (f"checkpoint {info.checkpoint_id!r}: name the job that saved it with "
                   "source_job_id (spec §8.4)")
        raise ApiError(ErrorCode.VALIDATION_FAILED, message,
                       [detail_entry((*loc, "source_job_id"), message, ErrorCode.CHECKPOINT_NOT_FOUND)])
    try:
        src = ctx.store.table.job_for(ctx.owner, info.source_job_id)
        return ctx.store.table.checkpoint(src, info.checkpoint_id)
    except ApiError as exc:
        raise ApiError(ErrorCode.VALIDATION_FAILED, exc.message,
                       [detail_entry(loc, exc.message, exc.code)]) from None


def source_checkpoints(ctx: Ctx, body: CreateJobRequest) -> list[InitFrom]:
    """The sub-jobs that start from a checkpoint, each checked against spec §6.5."""
    seams = ctx.settings.seams
    out = []
    for i, cfg in enumerate(body.sub_job_configs):
        try:
            ckpt = _resolve_checkpoint(ctx, i, cfg)
        except ApiError:
            if cfg.job_type != "training" and not ctx.store.rules.sampler_init_checked:
                continue  # the rule waived: an unknown checkpoint starts a fresh sampler
            raise
        if ckpt is not None:
            out.append(check_init(i, cfg, ckpt, seams))
    return out


def multiplex_hosts(ctx: Ctx, body: CreateJobRequest) -> list[tuple[str, int]]:
    """Each ``multiplex_job_id`` names a running sub-job of a job the caller holds
    (JOBV-MULTIPLEX-2; the id's form is JOBV-MULTIPLEX-1's): the (host job key, n_gpus) of
    every multiplexed sub-job, whose GPUs its host already holds. A missing and another
    account's job read the same, so the refusal reveals nothing of other accounts."""
    hosts: list[tuple[str, int]] = []
    enforced = ctx.store.rules.multiplex_target_checked
    for i, cfg in enumerate(body.sub_job_configs):
        value = multiplex_job_id(cfg)
        match = SUB_JOB_ID_RE.match(value) if isinstance(value, str) else None
        if match is None:
            continue
        try:
            host: JobRec | None = ctx.store.table.job_for(ctx.owner, match["job"])
        except ApiError:
            host = None
        problem = None
        if host is None:
            problem = f"you hold no job {match['job']!r}"
        elif (status := ctx.store.table.status(host)) != JobState.RUNNING:
            problem = f"job {host.public_id!r} is {ctx.job_status_text(status)}, not running"
        elif host.sub_job(value) is None:
            problem = (f"job {host.public_id!r} has no sub-job {value!r} "
                       f"(it has {', '.join(s.sub_job_id for s in host.sub_jobs)})")
        if problem is None and host is not None:
            hosts.append((host.job_id, cfg.n_gpus))
        elif enforced:
            message = f"multiplex_job_id {printable(value)[:200]!r}: {problem}; name a running sub-job of one of your jobs"
            raise ApiError(ErrorCode.VALIDATION_FAILED, message,
                           [detail_entry(config_loc(i, cfg, "multiplex_job_id"), message, "multiplex_target")])
    return hosts


def check_debug_gate(ctx: Ctx, body: CreateJobRequest) -> None:
    """The fake's debug options are off (spec §5.1: the server gates them): a top-level
    ``debug`` block is refused, not silently ignored (JOB-DEBUG-2)."""
    if "debug" in (body.model_extra or {}) and ctx.store.rules.debug_block_refused:
        message = "debug options are not enabled on this server"
        raise ApiError(ErrorCode.VALIDATION_FAILED, message, [detail_entry(("debug",), message, "not_enabled")])


def config_cost(body: CreateJobRequest, settings: FakeSettings) -> int:
    """The memory the job will keep for ``body`` (texts checked on the way; quotas)."""
    return weigh_config(body.model_dump(mode="json", by_alias=True, exclude_none=True), settings)


async def create_job(ctx: Ctx) -> Response:
    body = await ctx.json_model(CreateJobRequest)
    big = ctx.extras.get("json_bytes", 0) > OFF_LOOP_JSON_BYTES
    config_bytes = await run_in_threadpool(config_cost, body, ctx.settings) if big else \
        config_cost(body, ctx.settings)
    check_job_room(ctx.store, ctx.owner, config_bytes)
    check_debug_gate(ctx, body)
    check_models(ctx, body)
    job_id = requested_job_id(body, ctx.settings.seams)
    check_config_rules(body, job_id, ctx.settings.seams)
    inits = source_checkpoints(ctx, body)
    hosts = multiplex_hosts(ctx, body)
    job = ctx.store.table.new_job(ctx.owner, body, job_id)  # 409 when the caller holds the id
    job.gpu_hosts = hosts
    job.config_bytes = config_bytes
    engine = await run_in_threadpool(lambda: ctx.store.engine)
    names = [sub.sub_job_id for sub in job.sub_jobs]
    try:
        await run_in_threadpool(engine.create_job, job.job_id, list(body.sub_job_configs), job.seed, names)
        for init in inits:
            sub = job.sub_jobs[init.index]
            await run_in_threadpool(partial(engine.load, job.job_id, init.ckpt.snapshot,
                                            sub_job_id=sub.sub_job_id, optimizer=init.optimizer))
            if sub.job_type == "training":
                job.global_steps = init.ckpt.global_steps
    except BaseException as exc:
        engine.drop_job(job.job_id)
        ctx.store.table.release(job)
        if isinstance(exc, (ValueError, KeyError)):
            raise ApiError(ErrorCode.INVALID_ARGUMENT, f"cannot create the job: {exc}") from None
        raise
    ctx.store.table.register_job(job)
    return json_response(*ctx.way_out.created(job.public_id))


async def list_jobs(ctx: Ctx) -> Response:
    """Every job of the caller (bounded by ``max_jobs_per_account`` and the configs they keep,
    ``fake_gs.state.quotas``), rendered off the event loop: a list of big configs takes
    seconds to render, and other accounts' calls go on meanwhile."""
    jobs = ctx.store.table.list_jobs(ctx.owner, ctx.request.query_params.get("status"))

    def render() -> Response:
        entries = [dialect.list_entry(ctx.forms, answers.render(job_view(ctx, j))) for j in jobs]
        return json_response(m.JobList(jobs=entries))

    return await run_in_threadpool(render)


async def get_capacity(ctx: Ctx) -> Response:
    cap = ctx.way_out.part(AnswerPart.CAPACITY, answers.render(m.Capacity(**ctx.store.table.capacity(ctx.owner))))
    cap = dialect.capped(cap, ctx.forms)
    return json_response(dialect.capacity(cap) if ctx.forms.use("capacity-proto3") else cap)


async def get_job(ctx: Ctx) -> Response:
    job = ctx.job()
    return json_response(job_view(ctx, job, count_poll=True))


async def no_body(ctx: Ctx) -> None:
    """A call spec §5.5 / §5.8 sends with no body is refused when it carries one
    (CANCEL-BODY-2)."""
    if await ctx.raw_body() and ctx.store.rules.bodiless_routes_refuse_body:
        message = f"{ctx.route.name} takes no body"
        raise ApiError(ErrorCode.VALIDATION_FAILED, message, [detail_entry((), message, "no_body")])


async def cancel_job(ctx: Ctx) -> Response:
    job = ctx.job()
    await no_body(ctx)
    ctx.store.table.cancel(job)
    shown = ctx.job_status_text(ctx.store.table.status(job))
    return dialect.cancel_answer(ctx.forms, job.public_id, shown)


async def get_experiment_run(ctx: Ctx) -> Response:
    job = ctx.job()
    return json_response(m.ExperimentRun(experiment_name=job.experiment_name,
                                         experiment_run_name=run_name(job.public_id)))
