"""The nested config form of the unified Arctic client: ``backend=``, ``training=``, ``sampling=``.

verl builds ``ArcticRLClientConfig(backend=OnPremConfig(...), training=TrainingConfig(...),
sampling=SamplingConfig(...))``. These models accept that form (field names are the
integrations' API, so they are kept) and :func:`flatten_nested` turns it into the flat
fields of :class:`client.config.ClientConfig`, which has one home for each fact. Unknown
keys are kept (``extra="allow"``) so a newer upstream field is reported as not sent instead
of failing a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def given(self) -> dict[str, Any]:
        """The fields the caller set (extras included), without the type tag."""
        data = {name: getattr(self, name) for name in self.model_fields_set if name != "type"}
        data.update(self.model_extra or {})
        return data


class OnPremConfig(_Part):
    """The on-prem deployment (HTTP server or in-process Ray): nothing of it reaches Cortex."""

    type: Literal["onprem"] = "onprem"
    protocol: Literal["http", "ray"] = "http"
    host: str = "localhost"
    port: int = 8000
    colocate: bool = False
    launch_local_server: bool = False
    server_cuda_visible_devices: str | None = None
    startup_timeout: float = 600.0


class CortexConfig(_Part):
    """Where the Cortex service is and how to authenticate; the target is checked when the
    client is built (``base_url`` or ``host``, possibly from ``CORTEX_*``)."""

    type: Literal["remote", "cortex"] = "remote"
    protocol: Literal["cortex"] = "cortex"
    base_url: str | None = None
    host: str | None = None
    pat: str | None = None
    pat_env_var: str | None = None
    database: str | None = None
    schema_: str | None = Field(None, alias="schema")
    endpoint: str | None = None
    max_retries: int | None = Field(None, ge=0)


class TrainingConfig(_Part):
    """The training engine: a DeepSpeed config plus job settings."""

    full_determinism: bool = False
    checkpoint_path: str | None = None
    ds_config: dict[str, Any] | None = None
    ds_worker_config: dict[str, Any] | None = None
    cuda_ipc: bool = False
    low_memory: bool = False


class SamplingConfig(_Part):
    """The sampling and log-prob engines."""

    vllm: dict[str, Any] = Field(default_factory=dict)
    arctic_inference_config: dict[str, Any] | None = None
    log_prob_engine: Literal["vllm", "deepspeed"] = "vllm"
    log_prob_ds_config: dict[str, Any] | None = None


#: Nested field -> the flat ``ClientConfig`` field it sets (same name when absent; None: it
#: only selects the backend and sets nothing).
_CORTEX_FLAT: dict[str, str | None] = {"schema_": "schema_name", "max_retries": "retries",
                                       "protocol": None}
_ONPREM_FLAT: dict[str, str | None] = {"protocol": "comm_protocol"}
_SAMPLING_FLAT: dict[str, str | None] = {"vllm": "vllm_config"}
#: The backend each nested backend model stands for.
_BACKEND_OF: dict[type[_Part], str] = {OnPremConfig: "onprem", CortexConfig: "cortex"}


def _backend_model(value: Any) -> _Part | None:
    """``value`` as a nested backend model, or None when it is the flat string form."""
    if isinstance(value, (OnPremConfig, CortexConfig)):
        return value
    if isinstance(value, Mapping):
        # A dump of the upstream models may leave the type tag out (exclude_unset): a
        # Cortex-only key or protocol still says which backend it is.
        cortex_only = set(CortexConfig.model_fields) - set(OnPremConfig.model_fields) | {"schema"}
        kind = value.get("type") or ("remote" if value.get("protocol") == "cortex"
                                     or cortex_only & set(value) else "onprem")
        model: type[_Part] = CortexConfig if kind in ("remote", "cortex") else OnPremConfig
        return model.model_validate(dict(value))
    return None


def _flat(part: _Part, renames: Mapping[str, str | None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in part.given().items():
        flat = renames.get(name, name)
        if flat is not None:
            out[flat] = value
    return out


def flatten_nested(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``backend``/``training``/``sampling`` models spread into flat fields;
    a flat field the caller also gave beside them wins."""
    out = dict(data)
    spread: dict[str, Any] = {}
    backend = _backend_model(out.get("backend"))
    if backend is not None:
        out["backend"] = _BACKEND_OF[type(backend)]
        renames: Mapping[str, str | None] = _CORTEX_FLAT if isinstance(backend, CortexConfig) else _ONPREM_FLAT
        spread.update(_flat(backend, renames))
    parts: tuple[tuple[str, type[_Part], Mapping[str, str | None]], ...] = (
        ("training", TrainingConfig, {}), ("sampling", SamplingConfig, _SAMPLING_FLAT))
    for key, model, renames in parts:
        value = out.pop(key, None)
        if value is not None:
            part = value if isinstance(value, model) else model.model_validate(value)
            spread.update(_flat(part, renames))
    for name, value in spread.items():
        if value is not None:
            out.setdefault(name, value)
    return out
