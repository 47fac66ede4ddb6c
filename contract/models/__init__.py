"""Pydantic models for every JSON request body of the HTTP surface; the answers live in
:mod:`contract.models.answers` and the base in :mod:`contract.models.base`, both
re-exported here so ``contract.models`` names every model.

Unknown fields are kept, not refused: real clients send extras.
:func:`unknown_fields` lists them so a strict server can refuse them by name. Models whose
extras are documented pass-through keys (``training_config``, ``inference_config``,
operation payloads) declare ``open_extras = True`` and are never flagged.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from contract.limits import DEFAULT_MAX_TOKENS
from contract.models.answers import *  # noqa: F403 - the answers, named here too
from contract.models.answers import __all__ as _answer_names
from contract.models.base import (
    Body,
    CheckpointType,
    Int64,
    JobType,
    RequestBody,
    WeightFormat,
    unknown_fields,
)

#: The create-time ``job_type`` -> the word used in sub-job ids.
SUB_JOB_ID_WORD: dict[str, str] = {
    "training": "training",
    "sampling": "sampling",
    "log_probability": "log_prob",
}


# --- jobs -------------------------------------------------------------------------------


class TrainingConfig(RequestBody):
    open_extras: ClassVar[bool] = True
    optimizer: dict[str, Any] = Field(..., description="Non-empty, e.g. {'name': 'AdamW', 'lr': 1e-4}",
                                      json_schema_extra={"minProperties": 1})
    max_seq_len: Int64 = Field(..., gt=0)
    train_batch_size: Int64 = Field(..., gt=0)
    n_gpus: Int64 = Field(..., gt=0)
    gradient_clipping: float | None = None
    multiplex_job_id: str | None = None
    load_optimizer_states: bool | None = None

    @field_validator("optimizer")
    @classmethod
    def _optimizer_non_empty(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("optimizer must be a non-empty object")
        return value


class InferenceConfig(RequestBody):
    open_extras: ClassVar[bool] = True
    max_seq_len: Int64 = Field(..., gt=0)
    n_gpus: Int64 = Field(..., gt=0)


class SourceCheckpointInfo(RequestBody):
    checkpoint_id: str = Field(..., min_length=1)
    source_job_id: str | None = None


class SubJobConfig(RequestBody):
    job_type: JobType
    model_name: str = Field(..., min_length=1)
    training_config: TrainingConfig | None = None
    inference_config: InferenceConfig | None = None
    global_batch_size: Int64 | None = None
    dtype: str | None = None
    seed: Int64 | None = None
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


class CreateJobRequest(RequestBody):
    sub_job_configs: list[SubJobConfig] = Field(..., min_length=1)
    experiment_name: str | None = None
    job_id: str | None = Field(
        None, description="Optional caller-chosen job id (a UUID); an id already in use answers 409."
    )


# --- data plane: requests ----------------------------------------------------------------


class StepRequest(RequestBody):
    learning_rate: float | None = Field(None, ge=0)


def _any_case(*words: str) -> str:
    """A JSON Schema (ECMA 262) pattern matching ``words`` in any letter case."""
    def one(word: str) -> str:
        return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)
    return "^(?:" + "|".join(one(w) for w in words) + ")$"


class SaveRequest(RequestBody):
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


class LoadRequest(RequestBody):
    checkpoint_id: str = Field(..., min_length=1)
    source_job_id: str | None = None
    target_sub_job_id: str | None = None


class SamplingParams(RequestBody):
    open_extras: ClassVar[bool] = True
    max_tokens: Int64 = Field(DEFAULT_MAX_TOKENS, gt=0)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: Int64 | None = None
    stop: list[str] | str | None = None
    logprobs: Int64 | bool | None = None


class GenerateRequest(RequestBody):
    """The object inside a generate DSSST1 frame (and the generate-stream JSON body)."""

    prompts: list[str | list[Int64]] = Field(..., min_length=1)
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


class LogProbsRequest(RequestBody):
    prompts: list[str | list[Int64]] = Field(..., min_length=1)
    completions: list[str | list[Int64]] | None = None
    top_k: Int64 | None = Field(None, ge=0)

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


class OperationEnvelope(RequestBody):
    operation_type: str = Field(..., min_length=1)
    sub_job_id: str | None = None
    sub_job_type: JobType | Literal["log_prob"] | None = None
    payload: dict[str, Any] = Field(default_factory=dict)


class ForwardPayload(RequestBody):
    payload_b64: str
    content_type: Literal["application/octet-stream"] = "application/octet-stream"


class WeightSyncPayload(RequestBody):
    source_sub_job_id: str | None = None
    target_sub_job_ids: list[str] | None = None
    weight_format: WeightFormat = "vllm"
    cuda_ipc: bool | None = None
    low_memory: bool | None = None


class BootstrapRouterReplayPayload(RequestBody):
    source_sub_job_id: str
    target_sub_job_id: str
    max_cache_bytes: Int64 | None = Field(None, ge=0)


class RouterReplayDiscardPayload(RequestBody):
    sample_ids: list[str | Int64]


class ResetPrefixCachePayload(RequestBody):
    drain: bool = True
    timeout_s: float = Field(60.0, ge=0)
    retry_interval_s: float = Field(0.1, ge=0)


class CancelRequestPayload(RequestBody):
    request_id: str = Field(..., min_length=1)


class TailLogsPayload(RequestBody):
    cursor: str | Int64 | None = None
    max_lines: Int64 | None = Field(None, gt=0)


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


__all__ = [
    *_answer_names, "ASYNC_OPERATIONS", "Body", "BootstrapRouterReplayPayload", "CancelRequestPayload",
    "CheckpointType", "CreateJobRequest", "ForwardPayload", "GenerateRequest", "InferenceConfig", "Int64",
    "JobType", "LoadRequest", "LogProbsRequest", "OPERATIONS_ALLOWED_WHILE_PLACING",
    "OPERATION_NATURAL_TARGET", "OPERATION_PAYLOADS", "OPERATION_TYPES", "OperationEnvelope",
    "OperationType", "RequestBody", "ResetPrefixCachePayload", "RouterReplayDiscardPayload", "SUB_JOB_ID_WORD",
    "SamplingParams", "SaveRequest", "SourceCheckpointInfo", "StepRequest", "SubJobConfig",
    "TailLogsPayload", "TrainingConfig", "WeightFormat", "WeightSyncPayload", "unknown_fields",
]
