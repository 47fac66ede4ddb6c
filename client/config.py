"""``ClientConfig``: addressing, job shape, timing, reconnect ids and the legacy knobs.

Importing this module pulls pydantic and the pydantic-only parts of ``contract`` so that a
Cortex-only driver can build a config without torch, a server or any on-prem stack.

Legacy handling (the configs SkyRL's and verl's code builds) happens in one ``mode="before"`` validator so that
``model_fields_set`` names exactly the canonical fields a caller set; the environment
override relies on that to let explicit fields win.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict

from client.lifting import lifted
from client.nested import flatten_nested
from contract.auth import DEFAULT_PAT_ENV_VAR
from contract.limits import (
    DEFAULT_CHUNK_BYTES,
    MAX_ANSWER_BYTES,
    MAX_ANSWER_INFLATION,
    MAX_BODY_BYTES,
    PollPolicy,
    RetryPolicy,
)
from contract.routes import DEFAULT_ENDPOINT

_RETRY = RetryPolicy()
_POLL = PollPolicy()

Backend = Literal["cortex", "onprem"]
RouteChoice = Literal["auto", "proposed", "operation"]

#: Legacy backend spellings -> the backend they mean (each use warns).
BACKEND_ALIASES: dict[str, str] = {"local": "onprem", "dss-platform": "onprem", "neutrino": "cortex"}
#: Legacy/alternative field names -> canonical field names (the canonical one wins if both).
FIELD_ALIASES: dict[str, str] = {
    "sample_gpus": "sampling_gpus",
    "model_name": "model",
    "schema": "schema_name",
    "cortex_base_url": "base_url",
    "cortex_host": "host",
    "cortex_database": "database",
    "cortex_schema": "schema_name",
    "cortex_endpoint": "endpoint",
    "cortex_pat_env_var": "pat_env_var",
    "cortex_pat": "pat",
}
#: Legacy fields with no meaning any more: dropped without a word.
DROPPED_FIELDS: frozenset[str] = frozenset(
    {"sampling_engine", "reference_model", "job_name", "experiment_name"}
)
#: Top-level names of the unified upstream config -> the canonical field they set.
UNIFIED_ALIASES: dict[str, str] = {
    "job_ready_timeout": "job_start_timeout_s",
    "request_timeout": "read_timeout_s",
}
#: Every request chunk carries at least this many frame bytes besides its own header: a
#: smaller ``max_chunk_bytes`` would cut a frame into absurdly many calls (1 byte per chunk).
MIN_CHUNK_PAYLOAD_BYTES = 512
#: ``RetryPolicy`` / ``PollPolicy`` field -> the config field that sets it.
_RETRY_FIELDS: dict[str, str] = {
    "retries": "retries", "backoff_first_s": "backoff_first_s", "backoff_factor": "backoff_factor",
    "backoff_cap_s": "backoff_cap_s", "jitter": "backoff_jitter",
}
_POLL_FIELDS: dict[str, str] = {
    "first_s": "poll_first_s", "factor": "poll_factor", "cap_s": "poll_cap_s",
    "timeout_s": "poll_timeout_s",
    "max_result_bytes": "max_result_bytes", "max_result_pages": "max_result_pages",
}
#: Marks the legacy engine knobs (``LEGACY_FIELDS``) and the on-prem deployment knobs
#: (``ONPREM_FIELDS``) in the schema; both lists are read off the model.
_LEGACY_MARK: JsonDict = {"legacy": True}
_ONPREM_MARK: JsonDict = {"onprem": True}
JobIdValue = str | int


def _legacy_knob(default: Any = None) -> Any:
    """An engine knob of the on-prem client: kept on the config; ``client.jobspec`` sends
    what Cortex has a field for and names the rest in one warning."""
    return Field(default, description="Legacy engine knob: mapped into the create-job body where Cortex has a field, else reported.",
                 json_schema_extra=_LEGACY_MARK)


def _onprem(default: Any = None) -> Any:
    """An on-prem deployment knob: kept on the config, reported as not applicable to Cortex."""
    return Field(default, description="On-prem knob: kept, not applicable to Cortex.",
                 json_schema_extra=_ONPREM_MARK)


def check_chunk_bytes(value: int) -> int:
    """``value`` if a chunk that size holds its header plus ``MIN_CHUNK_PAYLOAD_BYTES``."""
    from contract.wire import CHUNK_HEADER_ALLOWANCE  # light: the codec loads torch lazily

    floor = CHUNK_HEADER_ALLOWANCE + MIN_CHUNK_PAYLOAD_BYTES
    if not isinstance(value, int) or isinstance(value, bool) or value < floor:
        raise ValueError(
            f"max_chunk_bytes must be an int of at least {floor} ({CHUNK_HEADER_ALLOWANCE} for "
            f"each chunk's own header + {MIN_CHUNK_PAYLOAD_BYTES} of frame), not {value!r}"
        )
    return value


class ClientConfig(BaseModel):
    """Everything the RL client needs; unknown fields are ignored (legacy configs)."""

    model_config = ConfigDict(extra="ignore")

    backend: Backend = Field("cortex", description="`cortex` (this kit's client) or `onprem` (not provided by this kit: a ConfigError says so).")

    # --- Cortex addressing (spec §2) ---------------------------------------------
    base_url: str | None = Field(None, description="Explicit service base, e.g. http://127.0.0.1:8080; no PAT sent unless `pat` is set.")
    host: str | None = Field(None, description="Account host; https://{host}; needs a PAT.")
    database: str = Field("CORTEX", description="Database of the path prefix /api/v2/databases/{database}/schemas/{schema}/{endpoint}.")
    schema_name: str = Field("PUBLIC", description="Schema (also accepted as `schema`).")
    endpoint: str = Field(DEFAULT_ENDPOINT, description="Endpoint name, the prefix's last segment.")
    pat: SecretStr | None = Field(None, description="Programmatic access token value.")
    pat_env_var: str = Field(DEFAULT_PAT_ENV_VAR, description="Environment variable holding the PAT.")
    ca_bundle: str | None = Field(None, description="PEM CA bundle to verify https:// with (e.g. the one `fake-gs --tls` prints); default: $REQUESTS_CA_BUNDLE or the system store.")

    # --- job shape -----------------------------------------------------------------------
    model: str = Field("Qwen/Qwen3-0.6B", description="Model of every sub-job.")
    training_gpus: int = Field(1, ge=0, description="GPUs of the training sub-job; one sub-job per role with GPUs > 0.")
    sampling_gpus: int = Field(1, ge=0, description="GPUs of the sampling sub-job (0: none).")
    log_prob_gpus: int = Field(0, ge=0, description="GPUs of the log-probability sub-job (0: none).")
    max_seq_len: int = Field(4096, gt=0, description="Longest sequence of every sub-job.")
    dtype: str | None = Field("bfloat16", description="Weights' dtype, sent in each sub-job's config.")
    seed: int | None = Field(42, description="Seed sent in each sub-job's config.")
    optimizer: str = Field("AdamW", description="Optimizer name of the training sub-job's training_config.")
    lr: float = Field(1e-6, gt=0, description="Learning rate of the training sub-job's optimizer.")
    train_batch_size: int = Field(1, gt=0, description="train_batch_size of the training sub-job's training_config.")
    training_extra: dict[str, Any] = Field(default_factory=dict, description="Open keys added to the Cortex training_config.")
    sampling_extra: dict[str, Any] = Field(default_factory=dict, description="Open keys added to the sampling inference_config.")
    log_prob_extra: dict[str, Any] = Field(default_factory=dict, description="Open keys added to the log-prob inference_config.")
    forward_no_grad_route: RouteChoice = Field(
        "auto",
        description="`auto`: POST /forward-no-grad, falling back to the `forward` operation (spec §7.1) for good when the server has no such route; `proposed`/`operation`: that route only.",
    )
    log_probs_route: RouteChoice = Field(
        "auto",
        description="`auto`: POST /log-probs, falling back to scoring token prompts with the `forward` operation when the server has no such route; `proposed`/`operation`: that route only.",
    )

    # --- timing (defaults from contract.limits) --------------------------------------------
    connect_timeout_s: float = Field(10.0, gt=0, description="Seconds to connect, per HTTP attempt.")
    read_timeout_s: float = Field(300.0, gt=0, description="Seconds for one attempt's whole answer, head and body (a server dripping a byte at a time cannot outlive it).")
    call_timeout_s: float = Field(900.0, gt=0, description="Overall deadline of one call, retries included.")
    retries: int = Field(_RETRY.retries, ge=0, description="Resends of a retryable failure (contract.limits.RetryPolicy).")
    backoff_first_s: float = Field(_RETRY.backoff_first_s, ge=0, description="First back-off sleep between retries, in seconds.")
    backoff_factor: float = Field(_RETRY.backoff_factor, ge=1, description="Growth of each back-off sleep over the one before.")
    backoff_cap_s: float = Field(_RETRY.backoff_cap_s, ge=0, description="Longest back-off sleep, in seconds (a Retry-After header may ask for more).")
    backoff_jitter: float = Field(_RETRY.jitter, ge=0, le=1, description="Random fraction taken off or added to each back-off sleep.")
    poll_first_s: float = Field(_POLL.first_s, ge=0, description="First wait between polls of a request, in seconds (contract.limits.PollPolicy).")
    poll_factor: float = Field(_POLL.factor, ge=1, description="Growth of each poll wait over the one before.")
    poll_cap_s: float = Field(_POLL.cap_s, ge=0, description="Longest wait between polls, in seconds.")
    poll_timeout_s: float = Field(_POLL.timeout_s, gt=0, description="How long to poll one request before giving up, in seconds.")
    job_start_timeout_s: float = Field(_POLL.timeout_s, gt=0, description="How long to wait for `running`.")
    max_chunk_bytes: int = Field(DEFAULT_CHUNK_BYTES, le=MAX_BODY_BYTES, description="Request chunks are cut to at most this size; at least the 8 KiB chunk header allowance plus MIN_CHUNK_PAYLOAD_BYTES.")
    max_answer_bytes: int = Field(MAX_ANSWER_BYTES, gt=0, description="Largest answer body the client reads; a bigger one is refused (AnswerTooLarge) as soon as it is declared or crossed, before it is all in memory.")
    max_events: int | None = Field(None, gt=0, description="`max_events` per poll (server default when unset).")
    # --- reader bounds (defaults from contract.limits) --------------------------
    max_answer_inflation: float = Field(MAX_ANSWER_INFLATION, ge=1, description="How many times its bytes on the wire a compressed answer may decode to (past the first 64 MiB); more is AnswerTooLarge.")
    max_result_bytes: int = Field(_POLL.max_result_bytes, gt=0, description="Result-chunk bytes one request's pages may bring; more is ResultTooLarge.")
    max_result_pages: int = Field(_POLL.max_result_pages, gt=0, description="Pages bringing result chunks (or stream events) one request may take; more is ResultTooLarge.")
    retry_ambiguous: bool = Field(False, description="Resend step, save, generate... after a time-out, a cut connection or a 5xx, as the reference client does (spec §3.5): a lost answer can then run a call twice. Off: such a failure raises AmbiguousOutcome.")
    supports_idempotency_keys: bool | None = Field(None, description="The server honours Idempotency-Key (proposed), so ambiguous failures are resent with the same key. None: learnt from the server echoing the key.")
    cancel_on_shutdown: bool = Field(True, description="shutdown() cancels a job this client created (never a reattached one).")
    cancel_on_exit: bool = Field(True, description="A process that created a job and exits without shutdown() cancels it (never a reattached one); false keeps it running for another process to reattach.")

    # --- reconnect ids: set, the client reattaches to that job instead of creating one ----
    job_id: str | None = Field(None, description="The job to reattach to.")
    training_job_id: str | None = Field(None, description="Its training sub-job id.")
    sampling_job_id: str | None = Field(None, description="Its sampling sub-job id.")
    log_prob_job_id: str | None = Field(None, description="Its log-prob sub-job id.")

    # --- legacy engine knobs: mapped where Cortex has a field (client.jobspec) ---------------
    ds_config: Any = _legacy_knob()
    log_prob_ds_config: Any = _legacy_knob()
    ds_worker_config: Any = _legacy_knob()
    arctic_inference_config: Any = _legacy_knob()
    full_determinism: bool | None = _legacy_knob()
    vllm_config: Any = _legacy_knob()
    training_config: Any = _legacy_knob()
    checkpoint_path: str | None = _legacy_knob()

    # --- on-prem deployment knobs: kept, not applicable to Cortex ----------------------------
    comm_protocol: Literal["http", "ray"] = _onprem("http")
    colocate: bool = _onprem(False)
    port: int | None = _onprem()
    launch_local_server: bool | None = _onprem()
    server_cuda_visible_devices: str | None = _onprem()
    startup_timeout: float | None = _onprem()
    server_logs: bool | None = _onprem()
    ray_auto_attach: bool | None = _onprem()
    health_check_interval: float | None = _onprem()
    cuda_ipc: bool | None = _onprem()
    low_memory: bool | None = _onprem()
    log_prob_engine: str | None = _onprem()

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = flatten_nested(dict(data))
        for name in DROPPED_FIELDS:
            data.pop(name, None)
        for alias, canonical in {**FIELD_ALIASES, **UNIFIED_ALIASES}.items():
            if alias in data:
                value = data.pop(alias)
                data.setdefault(canonical, value)
        data.update(lifted(data))
        backend = data.get("backend")
        if isinstance(backend, str):
            key = backend.strip().lower()
            if key in BACKEND_ALIASES:
                warnings.warn(
                    f"backend={backend!r} is deprecated; use {BACKEND_ALIASES[key]!r}",
                    DeprecationWarning,
                    stacklevel=4,
                )
                data["backend"] = BACKEND_ALIASES[key]
            else:
                data["backend"] = key
        return data

    @field_serializer("pat", when_used="json")
    def _pat_not_in_json(self, value: SecretStr | None) -> None:
        """JSON would carry the masked ``**********`` and a worker would send it as a token;
        dropping it makes the worker read ``pat_env_var`` (or fail validation clearly)."""
        return None

    @field_validator("job_id", "training_job_id", "sampling_job_id", "log_prob_job_id",
                     mode="before")
    @classmethod
    def _id_text(cls, value: JobIdValue | None) -> str | None:
        """On-prem job ids are ints; a Cortex id is text either way."""
        return None if value is None else str(value)

    @field_validator("max_chunk_bytes")
    @classmethod
    def _chunk_room(cls, value: int) -> int:
        return check_chunk_bytes(value)

    @model_validator(mode="after")
    def _cortex_auth(self) -> ClientConfig:
        needs_pat = self.backend == "cortex" and self.host and not self.base_url
        if needs_pat and self.pat is None and not os.environ.get(self.pat_env_var):
            raise ValueError(
                    f"host={self.host!r} needs a PAT: set `pat`, or export "
                    f"${self.pat_env_var} (the variable named by `pat_env_var`)"
                )
        return self

    # --- derived values ----------------------------------------------------------------
    def service_base(self) -> str | None:
        """The URL routes hang under (before the prefix); ``base_url`` wins over ``host``."""
        if self.base_url:
            return self.base_url.rstrip("/")
        if self.host:
            host = self.host.rstrip("/")
            return host if "://" in host else f"https://{host}"
        return None

    def pat_value(self) -> str | None:
        """The PAT to send: the value if set; from the env var only when host-addressed."""
        if self.pat is not None:
            return self.pat.get_secret_value()
        if self.base_url:
            return None
        return os.environ.get(self.pat_env_var) or None

    def _picked(self, fields: dict[str, str]) -> dict[str, Any]:
        """Policy keyword arguments read off this config (policy field -> config field)."""
        return {policy: getattr(self, own) for policy, own in fields.items()}

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(**self._picked(_RETRY_FIELDS))

    def poll_policy(self) -> PollPolicy:
        return PollPolicy(**self._picked(_POLL_FIELDS))

    def job_start_policy(self) -> PollPolicy:
        """The request polls' timing, bounded by the job start-up timeout instead."""
        return dataclasses.replace(self.poll_policy(), timeout_s=self.job_start_timeout_s)

    def onprem_settings(self) -> dict[str, Any]:
        """The legacy and on-prem knobs that were set (for inspection)."""
        return {name: getattr(self, name) for name in (*LEGACY_FIELDS, *ONPREM_FIELDS)
                if name in self.model_fields_set}


def _marked(mark: JsonDict) -> tuple[str, ...]:
    return tuple(name for name, info in ClientConfig.model_fields.items()
                 if info.json_schema_extra == mark)


#: The legacy engine knobs and the on-prem deployment knobs, in declaration order.
LEGACY_FIELDS: tuple[str, ...] = _marked(_LEGACY_MARK)
ONPREM_FIELDS: tuple[str, ...] = _marked(_ONPREM_MARK)
#: The name the integrations import the config under (``arctic_platform.rl`` /
#: ``arctic_platform.client``): one model, both the flat and the nested form.
ArcticRLClientConfig = ClientConfig
