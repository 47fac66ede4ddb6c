"""Create-time config rules the service enforces beyond the schema (spec §8.2, §8.3, §7.3).

One home for them: the fake refuses a body breaking one (400 naming the field) and the
kit's client checks its own create body before sending, so a bad config fails locally.
Each problem names the clause (``contract.clauses``) it breaks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contract.ids import SUB_JOB_ID_RE
from contract.models import CreateJobRequest, SubJobConfig

Loc = tuple[str | int, ...]
#: What the service assumes for PEFT fields a peft_config leaves out (spec §8.2).
LORA_DEFAULTS: dict[str, Any] = {"r": 8, "lora_alpha": 8, "target_modules": None}


@dataclass(frozen=True)
class Problem:
    clause: str
    loc: Loc
    message: str


def extras(cfg: SubJobConfig) -> dict[str, Any]:
    """The open pass-through keys of the sub-job's training or inference config."""
    conf = cfg.training_config or cfg.inference_config
    return dict(conf.model_extra or {}) if conf is not None else {}


def config_loc(i: int, cfg: SubJobConfig, *rest: str | int) -> Loc:
    which = "training_config" if cfg.training_config is not None else "inference_config"
    return ("sub_job_configs", i, which, *rest)


def _sp_size(i: int, cfg: SubJobConfig) -> Problem | None:
    """``sp_size`` (Ulysses degree) must divide the training world size, n_gpus."""
    train = cfg.training_config
    if train is None or "sp_size" not in extras(cfg):
        return None
    sp = extras(cfg)["sp_size"]
    if not isinstance(sp, int) or isinstance(sp, bool) or sp < 1:
        return Problem("JOBV-SP-1", config_loc(i, cfg, "sp_size"), f"sp_size must be a positive integer, got {sp!r}")
    if train.n_gpus % sp:
        return Problem("JOBV-SP-1", config_loc(i, cfg, "sp_size"),
                       f"sp_size {sp} does not divide the world size n_gpus={train.n_gpus}")
    return None


def _offload(i: int, cfg: SubJobConfig) -> Problem | None:
    """CPU activation offload (``ac_config.offload_config.enabled``) needs mode full."""
    ac = extras(cfg).get("ac_config")
    offload = ac.get("offload_config") if isinstance(ac, Mapping) else None
    if not (isinstance(offload, Mapping) and offload.get("enabled") is True):
        return None
    assert isinstance(ac, Mapping)
    mode = ac.get("mode", offload.get("mode"))
    if mode == "full":
        return None
    return Problem("JOBV-OFFLOAD-1", config_loc(i, cfg, "ac_config", "mode"),
                   f"activation offload needs ac_config mode 'full', got {mode!r}")


def multiplex_job_id(cfg: SubJobConfig) -> Any:
    """The sub-job's ``multiplex_job_id`` as sent (training or inference config; spec §8.3)."""
    train = cfg.training_config
    return train.multiplex_job_id if train is not None else extras(cfg).get("multiplex_job_id")


def _multiplex(i: int, cfg: SubJobConfig, own_job_id: str | None) -> Problem | None:
    """``multiplex_job_id`` is a complete sub-job id of another job."""
    value = multiplex_job_id(cfg)
    if value is None:
        return None
    match = SUB_JOB_ID_RE.match(value) if isinstance(value, str) else None
    if match is None:
        return Problem("JOBV-MULTIPLEX-1", config_loc(i, cfg, "multiplex_job_id"),
                       f"multiplex_job_id {value!r} is not a complete {{job_id}}:{{type}}:{{index}} sub-job id")
    if own_job_id is not None and match["job"] == own_job_id:
        return Problem("JOBV-MULTIPLEX-1", config_loc(i, cfg, "multiplex_job_id"),
                       "multiplex_job_id must name a sub-job of another job")
    return None


def config_problems(body: CreateJobRequest, own_job_id: str | None = None) -> list[Problem]:
    """Every create-time config rule a valid-looking body breaks (``own_job_id``: the id
    the job will get, when the caller chose it)."""
    found = []
    for i, cfg in enumerate(body.sub_job_configs):
        for problem in (_sp_size(i, cfg), _offload(i, cfg), _multiplex(i, cfg, own_job_id)):
            if problem is not None:
                found.append(problem)
    return found


def lora_config(cfg: SubJobConfig) -> dict[str, Any] | None:
    """The sub-job's peft_config as the service compares it for LoRA sync (r, lora_alpha,
    target_modules; defaults filled in), or None without one."""
    peft = extras(cfg).get("peft_config")
    if not isinstance(peft, Mapping):
        return None
    out = {k: peft.get(k, default) for k, default in LORA_DEFAULTS.items()}
    if isinstance(out["target_modules"], list):
        out["target_modules"] = sorted(str(m) for m in out["target_modules"])
    return out


def _prime_rl(i: int, cfg: SubJobConfig) -> Problem | None:
    """The reference client refuses a PrimeRL config whose fused cross-entropy (on unless
    set false) meets an fp32 LM head or a chunked fused LM head (spec §8.2)."""
    prime = extras(cfg).get("prime_rl") if cfg.training_config is not None else None
    if not isinstance(prime, Mapping) or prime.get("fused_cross_entropy", True) is False:
        return None
    chunk = prime.get("fused_lm_head_token_chunk_size")
    if prime.get("fp32_lm_head") is True or (isinstance(chunk, int) and not isinstance(chunk, bool)):
        return Problem("CLIENT-CONFIG-1", config_loc(i, cfg, "prime_rl"),
                       "fused_cross_entropy cannot be combined with fp32_lm_head or "
                       "fused_lm_head_token_chunk_size")
    return None


def client_config_problems(body: CreateJobRequest) -> list[Problem]:
    """The rules the reference client checks before sending a create body on top of the
    service's (spec §8.2): what a client must refuse locally."""
    found = config_problems(body)
    for i, cfg in enumerate(body.sub_job_configs):
        problem = _prime_rl(i, cfg)
        if problem is not None:
            found.append(problem)
    return found
