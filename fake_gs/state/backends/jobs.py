"""The control plane's backend: create, list, get, cancel jobs; capacity; experiment runs.

One method per route, next to the job table it changes: each checks the route's rules
(spec §5, §6.5, §8) and asks the store's :class:`~fake_gs.state.rules.Rules` for the
rules a variation may waive. The handlers (``fake_gs.http.handlers.jobs``) parse the
call, call a method, and render its answer as the answer side spells it; what a job shows
(:class:`JobFacts`) is decided here, how it is spelled there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contract import models as m
from contract.errors import ErrorCode, detail_entry
from contract.ids import SUB_JOB_ID_RE, printable
from contract.jobrules import config_loc, multiplex_job_id
from contract.models import CreateJobRequest, SubJobConfig
from contract.models.catalog import ALL_MODELS, TRAINING_MODELS, is_known_model, is_trainable
from contract.states import JobState
from fake_gs.answers.refusals import ApiError
from fake_gs.options import flag_name
from fake_gs.settings import FakeSettings
from fake_gs.state.create_rules import InitFrom, check_config_rules, check_init, requested_job_id
from fake_gs.state.execution_logs import run_name
from fake_gs.state.quotas import check_job_room, weigh_config
from fake_gs.state.records import CheckpointRec, JobRec, SubJobRec
from fake_gs.state.store import Store

OWNER_ROLE = "FAKE_GS_ROLE"


def sub_job_fields(sub: SubJobRec) -> dict[str, Any]:
    """A sub-job's configs as the job object shows them: without unset fields."""
    cfg = sub.config
    item: dict[str, Any] = {"sub_job_id": sub.sub_job_id, "job_type": sub.job_type, "model_name": cfg.model_name}
    if cfg.training_config is not None:
        item["training_config"] = cfg.training_config.model_dump(mode="json", exclude_none=True)
    if cfg.inference_config is not None:
        item["inference_config"] = cfg.inference_config.model_dump(mode="json", exclude_none=True)
    for name in ("global_batch_size", "dtype", "seed"):
        value = getattr(cfg, name)
        if value is not None:
            item[name] = value
    return item


@dataclass(frozen=True)
class JobFacts:
    """What a job object shows (spec §5.2), before the answer side spells it."""

    job_id: str
    #: A :class:`~contract.states.JobState` value.
    status: str
    reason: str | None
    created_at: float
    updated_at: float
    image_tag: str
    submitted_by: str
    owner_role: str
    experiment_name: str | None
    #: Each sub-job's fields but its status (which is the job's, as shown).
    sub_jobs: list[dict[str, Any]]

    @property
    def failed(self) -> bool:
        return self.status == JobState.FAILED


def config_cost(body: CreateJobRequest, settings: FakeSettings) -> int:
    """The memory the job will keep for ``body`` (texts checked on the way; quotas)."""
    return weigh_config(body.model_dump(mode="json", by_alias=True, exclude_none=True), settings)


class Jobs:
    """The control-plane routes over one store (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.settings = store.settings
        self.rules = store.rules

    # --- create ------------------------------------------------------------------------------

    def check_models(self, body: CreateJobRequest) -> None:
        if self.settings.allow_any_model:
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
                    and self.rules.training_needs_trainable_model):
                message = (f"model {printable(cfg.model_name)[:200]!r} is served for inference only; "
                           f"trainable: {', '.join(TRAINING_MODELS)}")
                raise ApiError(ErrorCode.MODEL_NOT_TRAINABLE, message,
                               [detail_entry(loc, "model is inference-only", ErrorCode.MODEL_NOT_TRAINABLE)])

    def _resolve_checkpoint(self, owner: str, i: int, cfg: SubJobConfig) -> CheckpointRec | None:
        """The checkpoint ``source_checkpoint_info`` names: it must exist (spec §6.5, §8.4)."""
        info = cfg.source_checkpoint_info
        if info is None:
            return None
        table = self.store.table
        loc = ("sub_job_configs", i, "source_checkpoint_info")
        if "stage_info" in (info.model_extra or {}) and self.rules.init_credentials_refused:
            # CKPT-INIT-7: the server stamps it (spec §6.5)
            message = "stage_info credentials are stamped by the server; clients must not send them"
            raise ApiError(ErrorCode.VALIDATION_FAILED, message, [detail_entry((*loc, "stage_info"), message)])
        if not info.source_job_id and self.rules.init_from_any_job:
            for job in reversed(table.list_jobs(owner, None)):
                if info.checkpoint_id in job.checkpoints:
                    return job.checkpoints[info.checkpoint_id]
        if not info.source_job_id:  # CKPT-INIT-6: a new job's checkpoint is always another job's
            message = (f"checkpoint {info.checkpoint_id!r}: name the job that saved it with "
                       "source_job_id (spec §8.4)")
            raise ApiError(ErrorCode.VALIDATION_FAILED, message,
                           [detail_entry((*loc, "source_job_id"), message, ErrorCode.CHECKPOINT_NOT_FOUND)])
        try:
            return table.checkpoint(table.job_for(owner, info.source_job_id), info.checkpoint_id)
        except ApiError as exc:
            raise ApiError(ErrorCode.VALIDATION_FAILED, exc.message,
                           [detail_entry(loc, exc.message, exc.code)]) from None

    def source_checkpoints(self, owner: str, body: CreateJobRequest) -> list[InitFrom]:
        """The sub-jobs that start from a checkpoint, each checked against spec §6.5."""
        out = []
        for i, cfg in enumerate(body.sub_job_configs):
            try:
                ckpt = self._resolve_checkpoint(owner, i, cfg)
            except ApiError:
                if cfg.job_type != "training" and not self.rules.sampler_init_checked:
                    continue  # the rule waived: an unknown checkpoint starts a fresh sampler
                raise
            if ckpt is not None:
                out.append(check_init(i, cfg, ckpt, self.rules))
        return out

    def multiplex_hosts(self, owner: str, body: CreateJobRequest,
                        show_status: Callable[[str], str]) -> list[tuple[str, int]]:
        """Each ``multiplex_job_id`` names a running sub-job of a job the caller holds
        (JOBV-MULTIPLEX-2; the id's form is JOBV-MULTIPLEX-1's): the (host job key, n_gpus) of
        every multiplexed sub-job, whose GPUs its host already holds. A missing and another
        account's job read the same, so the refusal reveals nothing of other accounts."""
        hosts: list[tuple[str, int]] = []
        table = self.store.table
        for i, cfg in enumerate(body.sub_job_configs):
            value = multiplex_job_id(cfg)
            match = SUB_JOB_ID_RE.match(value) if isinstance(value, str) else None
            if match is None:
                continue
            try:
                host: JobRec | None = table.job_for(owner, match["job"])
            except ApiError:
                host = None
            problem = None
            if host is None:
                problem = f"you hold no job {match['job']!r}"
            elif (status := table.status(host)) != JobState.RUNNING:
                problem = f"job {host.public_id!r} is {show_status(status)}, not running"
            elif host.sub_job(value) is None:
                problem = (f"job {host.public_id!r} has no sub-job {value!r} "
                           f"(it has {', '.join(s.sub_job_id for s in host.sub_jobs)})")
            if problem is None and host is not None:
                hosts.append((host.job_id, cfg.n_gpus))
            elif self.rules.multiplex_target_checked:
                message = (f"multiplex_job_id {printable(value)[:200]!r}: {problem}; "
                           "name a running sub-job of one of your jobs")
                raise ApiError(ErrorCode.VALIDATION_FAILED, message,
                               [detail_entry(config_loc(i, cfg, "multiplex_job_id"), message, "multiplex_target")])
        return hosts

    def check_debug_gate(self, body: CreateJobRequest) -> None:
        """The fake's debug options are off (spec §5.1: the server gates them): a top-level
        ``debug`` block is refused, not silently ignored (JOB-DEBUG-2)."""
        if "debug" in (body.model_extra or {}) and self.rules.debug_block_refused:
            message = "debug options are not enabled on this server"
            raise ApiError(ErrorCode.VALIDATION_FAILED, message, [detail_entry(("debug",), message, "not_enabled")])

    def create(self, owner: str, body: CreateJobRequest, show_status: Callable[[str], str]) -> JobRec:
        """Check the create rules in the order the service answers them, record the job,
        build it in the engine (its sub-jobs started from their checkpoints) and register it.
        Blocking (weighing a big config, building an engine): run it off the event loop.
        ``show_status``: a job state as the answers spell it (for a refusal's message)."""
        store = self.store
        config_bytes = config_cost(body, self.settings)
        check_job_room(store, owner, config_bytes)
        self.check_debug_gate(body)
        self.check_models(body)
        job_id = requested_job_id(body, self.rules)
        check_config_rules(body, job_id, self.rules)
        inits = self.source_checkpoints(owner, body)
        hosts = self.multiplex_hosts(owner, body, show_status)
        job = store.table.new_job(owner, body, job_id)  # 409 when the caller holds the id
        job.gpu_hosts = hosts
        job.config_bytes = config_bytes
        engine = store.engine
        names = [sub.sub_job_id for sub in job.sub_jobs]
        try:
            engine.create_job(job.job_id, list(body.sub_job_configs), job.seed, names)
            for init in inits:
                sub = job.sub_jobs[init.index]
                engine.load(job.job_id, init.ckpt.snapshot, sub_job_id=sub.sub_job_id, optimizer=init.optimizer)
                if sub.job_type == "training":
                    job.global_steps = init.ckpt.global_steps
        except BaseException as exc:
            engine.drop_job(job.job_id)
            store.table.release(job)
            if isinstance(exc, (ValueError, KeyError)):
                raise ApiError(ErrorCode.INVALID_ARGUMENT, f"cannot create the job: {exc}") from None
            raise
        store.table.register_job(job)
        return job

    # --- read and cancel -----------------------------------------------------------------------

    def facts(self, job: JobRec, *, count_poll: bool = False) -> JobFacts:
        """What the job object shows now (``count_poll``: a GET of the job, which the
        start-up schedule counts)."""
        status = self.store.table.status(job, count_poll=count_poll)
        tokens = self.settings.tokens
        return JobFacts(
            job_id=job.public_id, status=status, reason=job.reason,
            created_at=job.created_at, updated_at=job.updated_at,
            image_tag="" if status == JobState.PENDING else f"fake-gs/{self.settings.engine}:0.1.0",
            submitted_by=f"user_{tokens.index(job.owner)}" if job.owner in tokens else "anonymous",
            owner_role=OWNER_ROLE, experiment_name=job.experiment_name,
            sub_jobs=[sub_job_fields(sub) for sub in job.sub_jobs])

    def list_jobs(self, owner: str, status: str | None) -> list[JobRec]:
        """Every job of the caller (bounded by ``max_jobs_per_account`` and the configs they
        keep, ``fake_gs.state.quotas``), filtered by ``status``."""
        return self.store.table.list_jobs(owner, status)

    def capacity(self, owner: str) -> m.Capacity:
        return m.Capacity(**self.store.table.capacity(owner))

    def cancel(self, job: JobRec) -> str:
        """Cancel the job; its status after."""
        self.store.table.cancel(job)
        return self.store.table.status(job)

    @staticmethod
    def experiment_run(job: JobRec) -> m.ExperimentRun:
        return m.ExperimentRun(experiment_name=job.experiment_name, experiment_run_name=run_name(job.public_id))
