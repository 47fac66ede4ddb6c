"""The create-job body a ``ClientConfig`` asks for.

Only Cortex fields are used: the on-prem knobs (``ds_config``, ``vllm_config``, ...) stay
on the config and are never forwarded, because silently passing them would mask config
drift. The body is checked against the contract model and the service's create-time config
rules (``contract.jobrules``) before it is sent, so a bad job shape fails locally with a
``ConfigError`` instead of a 400 round trip.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from client.config import ClientConfig
from client.errors import ConfigError
from contract.jobrules import client_config_problems
from contract.models import CreateJobRequest


def _common(config: ClientConfig, job_type: str) -> dict[str, Any]:
    sub: dict[str, Any] = {"job_type": job_type, "model_name": config.model}
    if config.dtype is not None:
        sub["dtype"] = config.dtype
    if config.seed is not None:
        sub["seed"] = config.seed
    return sub


def create_job_body(config: ClientConfig) -> dict[str, Any]:
    """``{"sub_job_configs": [...]}`` for the configured training/sampling/log-prob GPUs."""
    subs: list[dict[str, Any]] = []
    if config.training_gpus > 0:
        sub = _common(config, "training")
        sub["training_config"] = {
            "optimizer": {"name": config.optimizer, "lr": config.lr},
            "max_seq_len": config.max_seq_len,
            "train_batch_size": config.train_batch_size,
            "n_gpus": config.training_gpus,
            **config.training_extra,
        }
        subs.append(sub)
    for job_type, gpus, extra in (
        ("sampling", config.sampling_gpus, config.sampling_extra),
        ("log_probability", config.log_prob_gpus, config.log_prob_extra),
    ):
        if gpus > 0:
            sub = _common(config, job_type)
            sub["inference_config"] = {"max_seq_len": config.max_seq_len, "n_gpus": gpus, **extra}
            subs.append(sub)
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
    return body
