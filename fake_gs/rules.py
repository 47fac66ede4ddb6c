"""Create-time rules the real service enforces (issue 11, facts §15), kept out of the handlers.

Why here: a fake that accepts a config the service refuses hides the client's bug until
production. Each check raises :class:`ApiError` with the field it blames; the mutant that
drops a rule is named next to it (``fake_gs.mutants``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contract.errors import ErrorCode, detail_entry
from contract.models import CreateJobRequest, SubJobConfig
from fake_gs.errors import ApiError
from fake_gs.records import CheckpointRec

Loc = tuple[str | int, ...]
#: ``{job_id}:{training|sampling|log_prob}:{index}`` (spec §1.2).
SUB_JOB_ID_RE = re.compile(r"^(?P<job>[^:\s]+):(?:training|sampling|log_prob):(?:0|[1-9][0-9]*)$")
#: PEFT defaults the service applies when a peft_config leaves them out (spec §8.2).
LORA_DEFAULTS: dict[str, Any] = {"r": 8, "lora_alpha": 8, "target_modules": None}


def _refuse(code: ErrorCode, loc: Loc, message: str, kind: str = "value_error") -> ApiError:
    return ApiError(code, message, [detail_entry(loc, message, kind)])


def _extras(cfg: SubJobConfig) -> dict[str, Any]:
    conf = cfg.training_config or cfg.inference_config
    return dict(conf.model_extra or {}) if conf is not None else {}


def _config_loc(i: int, cfg: SubJobConfig) -> Loc:
    return ("sub_job_configs", i, "training_config" if cfg.job_type == "training" else "inference_config")


def requested_job_id(body: CreateJobRequest, mutant: bool) -> str | None:
    """The caller's job id, which must be a UUID (decided, facts §15: honoured when free; the
    store answers 409 when it is in use). ``mutant``: ignore it, as the old fake did."""
    if body.job_id is None or mutant:
        return None
    try:
        uuid.UUID(body.job_id)
    except ValueError:
        raise _refuse(ErrorCode.VALIDATION_FAILED, ("job_id",), "job_id must be a UUID") from None
    return body.job_id


def check_sp_size(i: int, cfg: SubJobConfig) -> None:
    """spec §8.2: Ulysses ``sp_size`` must divide the training world size (n_gpus)."""
    if cfg.training_config is None or "sp_size" not in _extras(cfg):
        return
    sp, n = _extras(cfg)["sp_size"], cfg.training_config.n_gpus
    loc = (*_config_loc(i, cfg), "sp_size")
    if not isinstance(sp, int) or isinstance(sp, bool) or sp < 1:
        raise _refuse(ErrorCode.VALIDATION_FAILED, loc, f"sp_size must be a positive integer, got {sp!r}")
    if n % sp:
        raise _refuse(ErrorCode.VALIDATION_FAILED, loc, f"sp_size {sp} does not divide the world size n_gpus={n}")


def check_offload(i: int, cfg: SubJobConfig) -> None:
    """spec §8.2: CPU activation offload (``ac_config.offload_config.enabled``) needs mode full."""
    ac = _extras(cfg).get("ac_config")
    if not isinstance(ac, Mapping):
        return
    offload = ac.get("offload_config")
    if not (isinstance(offload, Mapping) and offload.get("enabled") is True):
        return
    mode = ac.get("mode", offload.get("mode"))
    if mode != "full":
        raise _refuse(ErrorCode.VALIDATION_FAILED, (*_config_loc(i, cfg), "ac_config", "mode"),
                      f"activation offload needs ac_config mode 'full', got {mode!r}")


def check_multiplex(i: int, cfg: SubJobConfig, own_job_id: str | None) -> None:
    """spec §8.2/§8.3: multiplex_job_id is a complete sub-job id outside the job being made."""
    train = cfg.training_config
    value = train.multiplex_job_id if train is not None else _extras(cfg).get("multiplex_job_id")
    if value is None:
        return
    loc = (*_config_loc(i, cfg), "multiplex_job_id")
    match = SUB_JOB_ID_RE.match(value) if isinstance(value, str) else None
    if match is None:
        raise _refuse(ErrorCode.VALIDATION_FAILED, loc,
                      f"multiplex_job_id {value!r} is not a complete {{job_id}}:{{type}}:{{index}} sub-job id")
    if own_job_id is not None and match["job"] == own_job_id:
        raise _refuse(ErrorCode.VALIDATION_FAILED, loc, "multiplex_job_id must name a sub-job of another job")


def check_config_rules(body: CreateJobRequest, own_job_id: str | None, skip: str | None) -> None:
    """Every per-sub-job config rule; ``skip`` names a rule a mutant drops."""
    for i, cfg in enumerate(body.sub_job_configs):
        if skip != "sp-size-unchecked":
            check_sp_size(i, cfg)
        if skip != "offload-mode-unchecked":
            check_offload(i, cfg)
        if skip != "multiplex-id-unchecked":
            check_multiplex(i, cfg, own_job_id)


@dataclass(frozen=True)
class InitFrom:
    """A sub-job to initialise from a checkpoint at create, and how."""

    index: int
    ckpt: CheckpointRec
    #: Restore the optimizer too (training, resumable, load_optimizer_states not false).
    optimizer: bool


def dp_compatible(ckpt: CheckpointRec, cfg: SubJobConfig) -> bool:
    """spec §6.4/§8.2: a DP-size change needs ``load_optimizer_states: false`` on the target."""
    train = cfg.training_config
    if train is None or ckpt.n_gpus is None or ckpt.n_gpus == train.n_gpus:
        return True
    return train.load_optimizer_states is False


def restores_optimizer(ckpt: CheckpointRec, cfg: SubJobConfig) -> bool:
    train = cfg.training_config
    return bool(train is not None and ckpt.checkpoint_type == "resumable" and train.load_optimizer_states is not False)


def check_init(i: int, cfg: SubJobConfig, ckpt: CheckpointRec, mutant: str | None) -> InitFrom:
    """The create-time init rules of spec §6.5 for one sub-job and its resolved checkpoint."""
    loc: Loc = ("sub_job_configs", i, "source_checkpoint_info", "checkpoint_id")
    if cfg.job_type == "training":
        if not dp_compatible(ckpt, cfg) and mutant != "dp-mismatch-loads":
            raise _refuse(ErrorCode.DP_SIZE_MISMATCH, ("sub_job_configs", i, "training_config", "load_optimizer_states"),
                          f"checkpoint {ckpt.checkpoint_id!r} was saved with n_gpus={ckpt.n_gpus}; a different "
                          "data-parallel size needs load_optimizer_states false")
        return InitFrom(i, ckpt, restores_optimizer(ckpt, cfg))
    if ckpt.checkpoint_type != "weights-only" and mutant != "sampler-any-checkpoint":
        raise _refuse(ErrorCode.CHECKPOINT_TYPE_MISMATCH, loc,
                      f"a {cfg.job_type} sub-job starts from a weights-only checkpoint; "
                      f"{ckpt.checkpoint_id!r} is {ckpt.checkpoint_type}")
    return InitFrom(i, ckpt, False)


def lora_config(cfg: SubJobConfig) -> dict[str, Any] | None:
    """The sub-job's peft_config with the service's defaults filled in (None: no LoRA)."""
    peft = _extras(cfg).get("peft_config")
    if not isinstance(peft, Mapping):
        return None
    out = {k: peft.get(k, default) for k, default in LORA_DEFAULTS.items()}
    if isinstance(out["target_modules"], list):
        out["target_modules"] = sorted(str(m) for m in out["target_modules"])
    return out
