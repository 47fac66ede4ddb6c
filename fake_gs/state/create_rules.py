"""Create-time rules the real service enforces (spec §8, §6.5), kept out of the handlers.

Why here: a fake that accepts a config the service refuses hides the client's bug until
production. Each check raises :class:`ApiError` with the field it blames; a rule that may be
waived asks the store's :class:`~fake_gs.state.rules.Rules`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from contract.errors import ErrorCode, detail_entry
from contract.jobrules import config_problems
from contract.models import CreateJobRequest, SubJobConfig
from fake_gs.answers.refusals import ApiError
from fake_gs.state.records import CheckpointRec
from fake_gs.state.rules import Rules

Loc = tuple[str | int, ...]


def _waived_config_clauses(rules: Rules) -> set[str]:
    """The clauses of the create-time config rules (contract.jobrules) a variation waives."""
    checked = {"JOBV-SP-1": rules.sp_size_checked, "JOBV-OFFLOAD-1": rules.offload_mode_checked,
               "JOBV-MULTIPLEX-1": rules.multiplex_id_checked}
    return {clause for clause, on in checked.items() if not on}


def _refuse(code: ErrorCode, loc: Loc, message: str, kind: str = "value_error") -> ApiError:
    return ApiError(code, message, [detail_entry(loc, message, kind)])


def requested_job_id(body: CreateJobRequest, rules: Rules) -> str | None:
    """The caller's job id, which must be a UUID (honoured when the caller
    holds no job of that id; the store answers 409 when it does, whatever other accounts
    hold). With the rule waived the id is ignored, as the old fake did."""
    if body.job_id is None or not rules.caller_job_id_honoured:
        return None
    try:
        uuid.UUID(body.job_id)
    except ValueError:
        raise _refuse(ErrorCode.VALIDATION_FAILED, ("job_id",), "job_id must be a UUID") from None
    return body.job_id


def check_config_rules(body: CreateJobRequest, own_job_id: str | None, rules: Rules) -> None:
    """400 naming every field that breaks a create-time config rule (contract.jobrules),
    except a rule waived."""
    dropped = _waived_config_clauses(rules)
    problems = [p for p in config_problems(body, own_job_id) if p.clause not in dropped]
    if problems:
        raise ApiError(ErrorCode.VALIDATION_FAILED, "; ".join(p.message for p in problems),
                       [detail_entry(p.loc, p.message) for p in problems])


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


def check_init(i: int, cfg: SubJobConfig, ckpt: CheckpointRec, rules: Rules) -> InitFrom:
    """The create-time init rules of spec §6.5 for one sub-job and its resolved checkpoint."""
    loc: Loc = ("sub_job_configs", i, "source_checkpoint_info", "checkpoint_id")
    if cfg.job_type == "training":
        if not dp_compatible(ckpt, cfg) and rules.dp_size_change_refused:
            raise _refuse(ErrorCode.DP_SIZE_MISMATCH, ("sub_job_configs", i, "training_config", "load_optimizer_states"),
                          f"checkpoint {ckpt.checkpoint_id!r} was saved with n_gpus={ckpt.n_gpus}; a different "
                          "data-parallel size needs load_optimizer_states false")
        return InitFrom(i, ckpt, restores_optimizer(ckpt, cfg))
    if ckpt.checkpoint_type != "weights-only" and rules.sampler_init_checked:
        raise _refuse(ErrorCode.CHECKPOINT_TYPE_MISMATCH, loc,
                      f"a {cfg.job_type} sub-job starts from a weights-only checkpoint; "
                      f"{ckpt.checkpoint_id!r} is {ckpt.checkpoint_type}")
    return InitFrom(i, ckpt, False)
