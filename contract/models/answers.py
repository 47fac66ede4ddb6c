"""Models of every JSON answer the service gives: jobs, capacity, checkpoints, exports,
submissions, polls and their events, inline operation answers, polled results, errors.

Fields are declared in the order the fake writes them (its answers are rendered through
these models), and every field it sends on purpose is declared: the fake's answer check
(``fake_gs.answers.check``) refuses an undeclared one. The OpenAPI document's response schemas
are these models' JSON schemas.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from contract.models.base import Body, CheckpointType, JobType, WeightFormat

# --- control plane ------------------------------------------------------------------------


class CreateJobResponse(Body):
    job_id: str = Field(..., json_schema_extra={"format": "uuid"})


class SubJob(Body):
    sub_job_id: str
    job_type: JobType
    status: str
    model_name: str
    training_config: dict[str, Any] | None = None
    inference_config: dict[str, Any] | None = None
    global_batch_size: int | None = None
    dtype: str | None = None
    seed: int | None = None


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


class JobListEntry(Body):
    """A listed job: spec §5.3 shows job_id, status and sub_jobs (JOB-LIST-1); the kit lists
    the whole job object (JOB-LIST-3), so the other fields are optional here."""

    job_id: str
    status: str
    sub_jobs: list[SubJob]
    reason: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    image_tag: str | None = None
    submitted_by: str | None = None
    owner_role: str | None = None
    experiment_name: str | None = None


class JobList(Body):
    jobs: list[JobListEntry]


class Capacity(Body):
    """Proto3 JSON may omit false/zero fields, hence the defaults."""

    has_reservation: bool = False
    max_total_gpus: int = 0
    reserved_gpus: int = Field(0, description="Deprecated.")
    in_use_gpus: int = 0
    available_gpus: int = Field(0, ge=0)


class ExperimentRun(Body):
    experiment_name: str | None
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
    """``{}``: a delete's answer and a successful terminal request without a result."""


class CancelJobResponse(Body):
    """A cancel's success: ``{}`` in the kit's form (CANCEL-ANSWER-1); spec §5.5 leaves the
    body open (a server may name the job and its status)."""

    job_id: str | None = None
    status: str | None = None


# --- data plane: submissions --------------------------------------------------------------


class SubmitResponse(Body):
    request_id: str
    job_id: str


class ChunkAccepted(Body):
    """A non-final chunk's answer: carries no ``request_id`` (spec §9.3)."""

    chunk_group_id: str | None = None
    chunk_idx: int | None = None
    received_chunks: int | None = None
    total_chunks: int | None = None


class GenerateStreamSubmitResponse(SubmitResponse):
    count: int = Field(..., ge=0)


# --- inline operation answers ---------------------------------------------------------------


class TailLogsResult(Body):
    entries: list[Any]
    next_cursor: str | int | None = None
    eof: bool


class BootstrapRouterReplayResult(Body):
    bootstrapped: bool
    source_sub_job_id: str
    target_sub_job_id: str
    max_cache_bytes: int | None = None


class RouterReplayDiscardResult(Body):
    discarded: int = Field(..., ge=0)
    sub_job_id: str


class ResetPrefixCacheResult(Body):
    reset: bool
    sub_job_id: str


class CancelRequestResult(Body):
    """No ``request_id`` key: an operation answer holding one is a request to poll (spec §7)."""

    cancelled_request_id: str
    cancelled: bool
    status: str


#: operation_type -> the model of its answer: inline, or a submission to poll.
OPERATION_ANSWERS: dict[str, type[Body]] = {
    "forward": SubmitResponse,
    "weight-sync": SubmitResponse,
    "bootstrap-router-replay": BootstrapRouterReplayResult,
    "router-replay-discard": RouterReplayDiscardResult,
    "reset-prefix-cache": ResetPrefixCacheResult,
    "cancel-request": CancelRequestResult,
    "tail-logs": TailLogsResult,
}


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


PollEvent = Annotated[ResultChunkEvent | StreamResultEvent | StreamErrorEvent | StreamDoneEvent,
                      Field(discriminator="type")]


class RequestStatus(Body):
    request_id: str
    status: str
    created_at: str
    updated_at: str
    result: Any = Field(None, description="The result (see the route's result model), an "
                                          "InlineFrame, or null (result_chunk events, streams).")
    error: Any = None
    events: list[PollEvent] = Field(default_factory=list)
    next_cursor: str | None = None


#: The fields every poll answer carries, null or "" when empty (spec §6.8): the model's
#: defaults let a missing one pass, so the suite and the passive judge check presence.
POLL_FIELDS: tuple[str, ...] = tuple(RequestStatus.model_fields)


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
    """Byte counts (spec §6.2)."""

    gpu_peak: int = Field(..., ge=0)
    cpu_peak: int = Field(..., ge=0)


class StepResult(Body):
    global_steps: int = Field(..., ge=0)
    #: A number, or one per parameter group (spec §6.2).
    last_lr: float | list[float]
    peak_memory: PeakMemory | None = None
    metrics: dict[str, Any] | None = None


class SaveResult(Body):
    """spec §6.3: consumers use the fields present; the id is authoritative (the kit sends
    all three: SAVE-RESULT-2)."""

    checkpoint_id: str
    checkpoint_path: str | None = None
    checkpoint_tag: str | None = None
    checkpoint_type: CheckpointType | None = None
    global_steps: int | None = None


class LoadResult(Body):
    checkpoint_id: str
    global_steps: int | None = None
    checkpoint_type: CheckpointType | None = None
    source_job_id: str | None = Field(None, description="Set when the checkpoint came from another job.")


class WeightSyncResult(Body):
    weight_version: int | None = None
    source_sub_job_id: str | None = None
    target_sub_job_ids: list[str] | None = None
    weight_format: WeightFormat | None = None


class ForwardResult(Body):
    """The object inside a forward(-no-grad) result frame: tensors by output name."""

    open_extras: ClassVar[bool] = True
    model_config = ConfigDict(arbitrary_types_allowed=True)
    model_outputs: Any = None
    metrics: dict[str, Any] = Field(default_factory=dict)


class GenerateResult(Body):
    """The object inside a generate result frame: one result per prompt, in order."""

    job_id: str
    results: list[dict[str, Any]]


class LogProbsResult(Body):
    """The object inside a log-probs result frame; the scores are the engine's tensors."""

    open_extras: ClassVar[bool] = True
    model_config = ConfigDict(arbitrary_types_allowed=True)
    job_id: str


#: Async operation_type -> the model of its polled result.
OPERATION_RESULTS: dict[str, type[Body]] = {
    "forward": ForwardResult,
    "weight-sync": WeightSyncResult,
    # Inline on the kit's fake; polled where a deployment answers a request id (spec §7).
    "bootstrap-router-replay": BootstrapRouterReplayResult,
}


# --- the SQL statement of the execution-log download (spec §12.2) -------------------------


class StatementColumn(Body):
    name: str
    type: str
    nullable: bool


class StatementMetaData(Body):
    num_rows: int = Field(..., alias="numRows", ge=0)
    format: str
    row_type: list[StatementColumn] = Field(..., alias="rowType")


class StatementResult(Body):
    """Snowflake's SQL API answer: the rows (one value each here) and the statement's ids."""

    result_set_meta_data: StatementMetaData = Field(..., alias="resultSetMetaData")
    data: list[list[str | None]]
    code: str
    sql_state: str = Field(..., alias="sqlState")
    message: str
    statement_handle: str = Field(..., alias="statementHandle")
    statement_status_url: str = Field(..., alias="statementStatusUrl")
    created_on: int = Field(..., alias="createdOn")


# --- errors -------------------------------------------------------------------------------


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

    @model_validator(mode="after")
    def _one_form(self) -> ErrorEnvelope:
        """What the JSON schema's ``anyOf`` says, checked: a code and a message, or detail."""
        if self.detail is None and (self.code is None or self.message is None):
            raise ValueError("an error body carries code and message, or a detail list")
        return self


class MessageCodeError(BaseModel):
    """Spec §3.6's ``{message, code}`` form, keys in that order: an integer code (the HTTP
    status), or the one string code the spec documents (spec §9.3). An ErrorEnvelope too."""

    message: str
    code: int | str


class DetailListError(BaseModel):
    """Spec §3.6's bare ``detail`` list: a validation failure naming its fields. An
    ErrorEnvelope too."""

    detail: list[ErrorDetail]


__all__ = [
    "OPERATION_ANSWERS", "OPERATION_RESULTS", "PROPOSED_METRIC_KEYS", "BootstrapRouterReplayResult",
    "CancelJobResponse", "CancelRequestResult", "Capacity", "Checkpoint", "CheckpointList", "ChunkAccepted",
    "CreateJobResponse", "DetailListError", "EmptyObject", "ErrorDetail", "ErrorEnvelope", "ExperimentRun",
    "ExportFile", "ExportResponse", "ForwardBackwardResult", "ForwardResult", "GenerateResult",
    "GenerateStreamSubmitResponse", "InlineFrame", "Job", "JobList", "JobListEntry", "LoadResult", "LogProbsResult",
    "MessageCodeError",
    "PeakMemory", "PollEvent", "RequestStatus", "ResetPrefixCacheResult", "ResultChunkEvent",
    "RouterReplayDiscardResult", "SaveResult", "StatementColumn", "StatementMetaData", "StatementResult", "StepResult", "StreamDoneEvent", "StreamErrorEvent",
    "StreamResultEvent", "SubJob", "SubmitResponse", "TailLogsResult", "WeightSyncResult",
]
