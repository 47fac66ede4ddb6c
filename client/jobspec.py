"""The create-job body a ``ClientConfig`` asks for, and what of the config it cannot carry.

Cortex wants typed sub-job fields (spec §8), so the training knobs the integrations keep in
DeepSpeed terms are lifted out: the optimizer and its parameters, ``train_batch_size`` and
``gradient_clipping`` from ``ds_config`` (the rest of it travels as the ``ds_config``
passthrough spec §8.2 names), ``activation_checkpointing`` / ``model_provider`` /
``attn_implementation`` from ``ds_worker_config``, ``sp_size`` from DeepSpeed's
``sequence_parallel_size``, and the vLLM kwargs as each inference sub-job's nested
``vllm_config`` (spec §8.3). What has no Cortex field is named once, in one
:class:`CortexConfigWarning`, together with the on-prem deployment settings that do not
apply; nothing is dropped silently. The body is checked against the contract model and the
service's create-time rules (``contract.jobrules``) before it is sent.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from client.config import ONPREM_FIELDS, ClientConfig
from client.errors import ConfigError
from client.lifting import ds_optimizer
from contract.jobrules import client_config_problems
from contract.models import CreateJobRequest

#: ``ds_config`` keys lifted into typed ``training_config`` fields (not sent twice).
DS_LIFTED: tuple[str, ...] = ("optimizer", "train_batch_size", "gradient_clipping",
                              "sequence_parallel_size")
#: ``ds_worker_config`` key -> the ``training_config`` field it becomes.
WORKER_LIFTED: dict[str, str] = {"enable_gradient_checkpointing": "activation_checkpointing",
                                 "model_provider": "model_provider",
                                 "attn_implementation": "attn_implementation"}
#: Keys of SkyRL's legacy ``training_config`` dict that reach the body (via the lifted
#: canonical fields or the optimizer block).
LEGACY_TRAINING_USED: frozenset[str] = frozenset({"optimizer", "max_length", "attn_implementation"})
#: vLLM kwargs owned by the sub-job's own fields on this wire (max_seq_len, n_gpus).
VLLM_OWNED: tuple[str, ...] = ("max_model_len", "tensor_parallel_size")
#: Legacy knobs with no Cortex field at all: named whole when set.
UNSENDABLE: tuple[str, ...] = ("log_prob_ds_config", "arctic_inference_config", "checkpoint_path")


class CortexConfigWarning(UserWarning):
    """Settings of the config that the Cortex create-job body cannot carry."""


@dataclass(frozen=True)
class JobPlan:
    """A create-job body plus what of the config it leaves out, and why."""

    body: dict[str, Any]
    #: Settings with a meaning for the run that Cortex has no field for (dotted names).
    not_sent: tuple[str, ...]
    #: On-prem deployment settings that do not apply to Cortex.
    not_applicable: tuple[str, ...]

    def message(self) -> str | None:
        """One sentence naming everything left out, or None when nothing is."""
        parts = []
        if self.not_sent:
            parts.append("not sent, the Cortex create-job body has no field for them: "
                         + ", ".join(self.not_sent))
        if self.not_applicable:
            parts.append("not applicable to Cortex (on-prem deployment settings): "
                         + ", ".join(self.not_applicable))
        return "; ".join(parts) + "." if parts else None

    def warn(self) -> None:
        """Say once, in one warning, what the job will not get."""
        text = self.message()
        if text:
            warnings.warn(text, CortexConfigWarning, stacklevel=4)


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _common(config: ClientConfig, job_type: str) -> dict[str, Any]:
    sub: dict[str, Any] = {"job_type": job_type, "model_name": config.model}
    if config.dtype is not None:
        sub["dtype"] = config.dtype
    if config.seed is not None:
        sub["seed"] = config.seed
    return sub


def _gradient_clipping(config: ClientConfig) -> float | None:
    """DeepSpeed's (or SkyRL's legacy optimizer's) clip; 0 means "no clipping" there."""
    for source in (_dict(config.ds_config),
                   _dict(_dict(config.training_config).get("optimizer"))):
        value = source.get("gradient_clipping")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value) if value > 0 else None
    return None


def _training_fields(config: ClientConfig) -> dict[str, Any]:
    """Typed and passthrough ``training_config`` fields lifted from the legacy knobs."""
    _, params = ds_optimizer({"ds_config": config.ds_config,
                              "training_config": config.training_config})
    params.pop("lr", None)
    out: dict[str, Any] = {"optimizer": {"name": config.optimizer, "lr": config.lr, **params}}
    clip = _gradient_clipping(config)
    if clip is not None:
        out["gradient_clipping"] = clip
    worker = _dict(config.ds_worker_config)
    for key, field in WORKER_LIFTED.items():
        if worker.get(key) is not None:
            out[field] = worker[key]
    if "model_provider" not in out and worker.get("use_liger"):
        out["model_provider"] = "liger"
    legacy_attn = _dict(config.training_config).get("attn_implementation")
    if "attn_implementation" not in out and legacy_attn:
        out["attn_implementation"] = legacy_attn
    ds = _dict(config.ds_config)
    sp = ds.get("sequence_parallel_size")
    if isinstance(sp, int) and sp > 1:
        out["sp_size"] = sp
    rest = {k: v for k, v in ds.items() if k not in DS_LIFTED}
    if rest:
        out["ds_config"] = rest
    return out


def _vllm(config: ClientConfig) -> dict[str, Any]:
    return {k: v for k, v in _dict(config.vllm_config).items() if k not in VLLM_OWNED}


def _sub_jobs(config: ClientConfig) -> list[dict[str, Any]]:
    subs: list[dict[str, Any]] = []
    if config.training_gpus > 0:
        sub = _common(config, "training")
        sub["training_config"] = {
            **_training_fields(config),
            "max_seq_len": config.max_seq_len,
            "train_batch_size": config.train_batch_size,
            "n_gpus": config.training_gpus,
            **config.training_extra,
        }
        subs.append(sub)
    vllm = _vllm(config)
    for job_type, gpus, extra in (
        ("sampling", config.sampling_gpus, config.sampling_extra),
        ("log_probability", config.log_prob_gpus, config.log_prob_extra),
    ):
        if gpus > 0:
            sub = _common(config, job_type)
            inference: dict[str, Any] = {"max_seq_len": config.max_seq_len, "n_gpus": gpus}
            if vllm:
                inference["vllm_config"] = vllm
            sub["inference_config"] = {**inference, **extra}
            subs.append(sub)
    return subs


def _not_sent(config: ClientConfig) -> list[str]:
    """Dotted names of the set legacy settings no Cortex field carries."""
    given = config.model_fields_set
    out = [name for name in UNSENDABLE if name in given and getattr(config, name)]
    if "full_determinism" in given and config.full_determinism:
        out.append("full_determinism")
    worker = _dict(config.ds_worker_config)
    out += [f"ds_worker_config.{k}" for k, v in worker.items()
            if k not in WORKER_LIFTED and k != "use_liger" and v is not None]
    legacy = _dict(config.training_config)
    out += [f"training_config.{k}" for k, v in legacy.items()
            if k not in LEGACY_TRAINING_USED and v is not None]
    if config.training_gpus == 0:
        out += [f"{name}" for name in ("ds_config", "ds_worker_config", "training_config")
                if name in given and getattr(config, name)]
    return out


def _not_applicable(config: ClientConfig) -> list[str]:
    return [name for name in ONPREM_FIELDS if name in config.model_fields_set]


def plan_job(config: ClientConfig) -> JobPlan:
    """The checked create-job body for ``config`` and what it leaves out."""
    subs = _sub_jobs(config)
    if not subs:
        raise ConfigError("no sub-jobs: training_gpus, sampling_gpus and log_prob_gpus are all 0")
    body = {"sub_job_configs": subs}
    try:
        model = CreateJobRequest.model_validate(body)
    except ValidationError as exc:
        raise ConfigError(f"the configured job shape is invalid: {exc}") from exc
    # sp_size, offload mode, multiplex id (spec §8.2/§8.3), PrimeRL's fused LM head (§8.2)
    problems = client_config_problems(model)
    if problems:
        raise ConfigError("the service would refuse this job: "
                          + "; ".join(f"{'.'.join(map(str, p.loc))}: {p.message}" for p in problems))
    return JobPlan(body, tuple(_not_sent(config)), tuple(_not_applicable(config)))


def create_job_body(config: ClientConfig) -> dict[str, Any]:
    """``{"sub_job_configs": [...]}`` for the configured training/sampling/log-prob GPUs."""
    return plan_job(config).body
