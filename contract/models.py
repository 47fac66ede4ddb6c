"""Pydantic models for every JSON body and result of the HTTP surface.

Unknown fields are kept, not refused (decided, facts section 8): real clients send extras.
:func:`unknown_fields` lists them so a strict server can refuse them by name. Models whose
extras are documented pass-through keys (``training_config``, ``inference_config``,
operation payloads) declare ``open_extras = True`` and are never flagged.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from contract.limits import DEFAULT_MAX_TOKENS

JobType = Literal["training", "sampling", "log_probability"]
CheckpointType = Literal["resumable", "weights-only"]
WeightFormat = Literal["vllm", "hf", "lora"]
#: The create-time ``job_type`` -> the word used in sub-job ids.
SUB_JOB_ID_WORD: dict[str, str] = {
    "training": "training",
    "sampling": "sampling",
    "log_probability": "log_prob",
}


class Body(BaseModel):
    """Base: extras allowed (kept in ``model_extra``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    open_extras: ClassVar[bool] = False


# --- jobs -------------------------------------------------------------------------------


class TrainingConfig(Body):
    open_extras: ClassVar[bool] = True
    optimizer: dict[str, Any] = Field(..., description="Non-empty, e.g. {'name': 'AdamW', 'lr': 1e-4}",
                                      json_schema_extra={"minProperties": 1})
    max_seq_len: int = Field(..., gt=0)
    train_batch_size: int = Field(..., gt=0)
    n_gpus: int = Field(..., gt=0)
    gradient_clipping: float | None = None
    multiplex_job_id: str | None = None
    load_optimizer_states: bool | None = None

    @field_validator("optimizer")
    @classmethod
    def _optimizer_non_empty(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("optimizer must be a non-empty object")
        return value


class InferenceConfig(Body):
    open_extras: ClassVar[bool] = True
    max_seq_len: int = Field(..., gt=0)
    n_gpus: int = Field(..., gt=0)


class SourceCheckpointInfo(Body):
    checkpoint_id: str = Field(..., min_length=1)
    source_job_id: str | None = None


class SubJobConfig(Body):
    job_type: JobType
    model_name: str = Field(..., min_length=1)
    training_config: TrainingConfig | None = None
    inference_config: InferenceConfig | None = None
    global_batch_size: int | None = None
    dtype: str | None = None
    seed: int | None = None
    post_init: list[str] | None = Field(None, alias="model_post_init")
    source_checkpoint_info: SourceCheckpointInfo | None = None

    @model_validator(mode="after")
    def _one_config(self) -> SubJobConfig:
        if self.job_type == "training":
            if self.training_config is None:
                raise ValueError("a training sub-job needs training_config")
            if self.inference_config is not None:
                raise ValueError("a training sub-job takes training_config, not inference_config")
        else:
            if self.inference_config is None:
                raise ValueError(f"a {self.job_type} sub-job needs inference_config")
            if self.training_config is not None:
                raise ValueError(f"a {self.job_type} sub-job takes inference_config, not training_config")
        return self

    @property
    def n_gpus(self) -> int:
        cfg = self.training_config or self.inference_config
        return cfg.n_gpus if cfg is not None else 0

    @property
    def max_seq_len(self) -> int:
        cfg = self.training_config or self.inference_config
        return cfg.max_seq_len if cfg is not None else 0


class CreateJobRequest(Body):
    sub_job_configs: list[SubJobConfig] = Field(..., min_length=1)
    experiment_name: str | None = None
    job_id: str | None = Field(
        None, description="Optional caller-chosen job id (a UUID); an id already in use answers 409."
    )


class CreateJobResponse(Body):
    job_id: str = Field(..., json_schema_extra={"format": "uuid"})


class SubJob(Body):
    sub_job_id: str
    job_type: JobType
    status: str
    model_name: str
    training_config: dict[str, Any] | None = None
    inference_config: dict[str, Any] | None = None


class Job(Body):
    job_id: str
    status: str
    reason: str = ""
    created_at: str
    updated_at: str
    image_tag: str = ""
    submitted_by: str | None = None
    owner_role: str | None = None
    experiment_name: str | None = None
    sub_jobs: list[SubJob] = Field(default_factory=list)


class JobList(Body):
    jobs: list[Job]


class Capacity(Body):
    """Proto3 JSON may omit false/zero fields, hence the defaults."""

    has_reservation: bool = False
    max_total_gpus: int = 0
    reserved_gpus: int = Field(0, description="Deprecated.")
    in_use_gpus: int = 0
    available_gpus: int = Field(0, ge=0)


class ExperimentRun(Body):
    experiment_name: str
    experiment_run_name: str


class Checkpoint(Body):
    checkpoint_id: str
    global_steps: int
    avg_loss: float | None = None
    created_at: str
    checkpoint_type: CheckpointType


class CheckpointList(Body):
    checkpoints: list[Checkpoint]


class ExportFile(Body):
    filename: str
    url: str
    size_bytes: int = Field(..., ge=0)


class ExportResponse(Body):
    checkpoint_id: str
    files: list[ExportFile]
    expires_at: str


class EmptyObject(Body):
    """``{}``: cancel's answer and a successful terminal request without a result."""


# --- data plane: submissions --------------------------------------------------------------


class SubmitResponse(Body):
    request_id: str
    job_id: str


class ChunkAccepted(Body):
    """A non-final chunk's answer: carries no ``request_id`` (facts, section 7)."""

    chunk_group_id: str | None = None
    chunk_idx: int | None = None
    received_chunks: int | None = None
    total_chunks: int | None = None


class GenerateStreamSubmitResponse(SubmitResponse):
    count: int = Field(..., ge=0)


class StepRequest(Body):
    learning_rate: float | None = Field(None, ge=0)


def _any_case(*words: str) -> str:
    """A JSON Schema (ECMA 262) pattern matching ``words`` in any letter case."""
    def one(word: str) -> str:
        return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)
    return "^(?:" + "|".join(one(w) for w in words) + ")$"


class SaveRequest(Body):
    checkpoint_id: str | None = None
    checkpoint_type: str | None = Field(None, description="resumable (default) | weights-only; case-insensitive",
                                        pattern=_any_case("resumable", "weights-only"))

    @field_validator("checkpoint_type")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        if value is None:
            return None
        lowered = value.lower()
        if lowered not in ("resumable", "weights-only"):
            raise ValueError("checkpoint_type must be 'resumable' or 'weights-only'")
        return lowered


class LoadRequest(Body):
    checkpoint_id: str = Field(..., min_length=1)
    source_job_id: str | None = None
    target_sub_job_id: str | None = None


class SamplingParams(Body):
    open_extras: ClassVar[bool] = True
    max_tokens: int = Field(DEFAULT_MAX_TOKENS, gt=0)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    stop: list[str] | str | None = None
    logprobs: int | bool | None = None


class GenerateRequest(Body):
    """The object inside a generate DSSST1 frame (and the generate-stream JSON body)."""

    prompts: list[str | list[int]] = Field(..., min_length=1)
    sampling_params: SamplingParams | list[SamplingParams | None] | None = None
    routing_key: str | list[str | None] | None = None
    strict: bool | None = None

    @model_validator(mode="after")
    def _aligned(self) -> GenerateRequest:
        for name in ("sampling_params", "routing_key"):
            value = getattr(self, name)
            if isinstance(value, list) and len(value) != len(self.prompts):
                raise ValueError(f"{name} list must align with prompts ({len(self.prompts)})")
        return self

    def params_for(self, index: int) -> SamplingParams:
        sp = self.sampling_params
        if isinstance(sp, list):
            sp = sp[index]
        return sp if sp is not None else SamplingParams()


class LogProbsRequest(Body):
    prompts: list[str | list[int]] = Field(..., min_length=1)
    completions: list[str | list[int]] | None = None
    top_k: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _aligned(self) -> LogProbsRequest:
        if self.completions is not None and len(self.completions) != len(self.prompts):
            raise ValueError("completions must align with prompts")
        return self


# --- operations ---------------------------------------------------------------------------

OperationType = Literal[
    "forward",
    "weight-sync",
    "bootstrap-router-replay",
    "router-replay-discard",
    "reset-prefix-cache",
    "cancel-request",
    "tail-logs",
]
OPERATION_TYPES: tuple[str, ...] = OperationType.__args__  # type: ignore[attr-defined]


class OperationEnvelope(Body):
    operation_type: str = Field(..., min_length=1)
    sub_job_id: str | None = None
    sub_job_type: JobType | Literal["log_prob"] | None = None
    payload: dict[str, Any] = Field(default_factory=dict)


class ForwardPayload(Body):
    payload_b64: str
    content_type: Literal["application/octet-stream"] = "application/octet-stream"


class WeightSyncPayload(Body):
    source_sub_job_id: str | None = None
    target_sub_job_ids: list[str] | None = None
    weight_format: WeightFormat = "vllm"
    cuda_ipc: bool | None = None
    low_memory: bool | None = None


class BootstrapRouterReplayPayload(Body):
    source_sub_job_id: str
    target_sub_job_id: str
    max_cache_bytes: int | None = Field(None, ge=0)


class RouterReplayDiscardPayload(Body):
    sample_ids: list[str | int]


class ResetPrefixCachePayload(Body):
    drain: bool = True
    timeout_s: float = Field(60.0, ge=0)
    retry_interval_s: float = Field(0.1, ge=0)


class CancelRequestPayload(Body):
    request_id: str = Field(..., min_length=1)


class TailLogsPayload(Body):
    cursor: str | int | None = None
    max_lines: int | None = Field(None, gt=0)


class TailLogsResult(Body):
    entries: list[Any]
    next_cursor: str | int | None = None
    eof: bool


#: operation_type -> payload model.
OPERATION_PAYLOADS: dict[str, type[Body]] = {
    "forward": ForwardPayload,
    "weight-sync": WeightSyncPayload,
    "bootstrap-router-replay": BootstrapRouterReplayPayload,
    "router-replay-discard": RouterReplayDiscardPayload,
    "reset-prefix-cache": ResetPrefixCachePayload,
    "cancel-request": CancelRequestPayload,
    "tail-logs": TailLogsPayload,
}
#: Operations answered through a request id (polled) rather than inline.
ASYNC_OPERATIONS = frozenset({"forward", "weight-sync"})
#: Where an operation goes when the envelope names no sub-job.
OPERATION_NATURAL_TARGET: dict[str, str] = {
    "forward": "training",
    "weight-sync": "training",
    "bootstrap-router-replay": "training",
    "router-replay-discard": "training",
    "reset-prefix-cache": "sampling",
    "cancel-request": "training",
    "tail-logs": "training",
}
#: Operations allowed while the job is still ``placing``.
OPERATIONS_ALLOWED_WHILE_PLACING = frozenset({"tail-logs"})


# --- polling ------------------------------------------------------------------------------


class InlineFrame(Body):
    content_type: Literal["application/octet-stream"]
    encoding: Literal["base64"]
    wire_format: Literal["DSSST1"]
    payload_b64: str


class ResultChunkEvent(Body):
    type: Literal["result_chunk"]
    payload_b64: str
    payload_sha256: str


class StreamResultEvent(Body):
    type: Literal["result"]
    index: int
    result: Any


class StreamErrorEvent(Body):
    type: Literal["error"]
    index: int
    error: Any


class StreamDoneEvent(Body):
    type: Literal["done"]
    completed: int
    failed: int


class RequestStatus(Body):
    request_id: str
    status: str
    created_at: str
    updated_at: str
    result: Any = None
    error: Any = None
    events: list[dict[str, Any]] = Field(default_factory=list)
    next_cursor: str | None = None


# --- results ------------------------------------------------------------------------------

#: Keys of the proposed profile's ``metrics`` block on training results.
PROPOSED_METRIC_KEYS: tuple[str, ...] = (
    "grad_norm",
    "ppo_kl",
    "pg_clipfrac_lower",
    "pg_loss",
    "kl_loss",
    "kl_coef",
)


class ForwardBackwardResult(Body):
    job_id: str
    avg_loss: float
    metrics: dict[str, Any] = Field(default_factory=dict)
    post_process_outputs: dict[str, Any] = Field(default_factory=dict)


class PeakMemory(Body):
    gpu_peak: float
    cpu_peak: float


class StepResult(Body):
    global_steps: int = Field(..., ge=0)
    #: A number, or one per parameter group (spec §6.2).
    last_lr: float | list[float]
    peak_memory: PeakMemory | None = None
    metrics: dict[str, Any] | None = None


class SaveResult(Body):
    checkpoint_id: str
    checkpoint_path: str
    checkpoint_tag: str


class LoadResult(Body):
    checkpoint_id: str
    global_steps: int | None = None


class WeightSyncResult(Body):
    weight_version: int | None = None


class ErrorDetail(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class ErrorEnvelope(BaseModel):
    """An error body in any form spec §3.6 allows (see :mod:`contract.errors`): the kit's
    ``{code: str, message, detail?}``, ``{message, code: int}`` or a bare ``detail`` list."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={"anyOf": [{"required": ["code", "message"]}, {"required": ["detail"]}]},
    )
    code: str | int | None = None
    message: str | None = None
    detail: list[ErrorDetail] | None = None


def unknown_fields(model: BaseModel, loc: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Locations of fields a model did not declare, recursively (for strict servers)."""
    found: list[tuple[str | int, ...]] = []
    if isinstance(model, Body) and not model.open_extras:
        found.extend(loc + (name,) for name in (model.model_extra or {}))
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            if isinstance(item, BaseModel):
                where = loc + (name,) if index is None else loc + (name, index)
                found.extend(unknown_fields(item, where))
    return found
