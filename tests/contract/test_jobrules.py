"""contract.jobrules: the create-time config rules, one problem per broken rule."""

from __future__ import annotations

from typing import Any

import pytest

from contract.jobrules import config_problems, lora_config
from contract.models import CreateJobRequest, SubJobConfig

JOB = "3f2b1c9e-8a4d-4e6f-9b1a-2c3d4e5f6a7b"


def body(**extra: Any) -> CreateJobRequest:
    train = {"optimizer": {"name": "AdamW"}, "max_seq_len": 8, "train_batch_size": 1, "n_gpus": 4, **extra}
    return CreateJobRequest.model_validate(
        {"sub_job_configs": [{"job_type": "training", "model_name": "m", "training_config": train}]})


@pytest.mark.parametrize("extra,clause,field", [
    ({"sp_size": 3}, "JOBV-SP-1", "sp_size"),
    ({"sp_size": True}, "JOBV-SP-1", "sp_size"),
    ({"ac_config": {"offload_config": {"enabled": True}, "mode": "selective"}}, "JOBV-OFFLOAD-1", "mode"),
    ({"ac_config": {"offload_config": {"enabled": True, "mode": "partial"}}}, "JOBV-OFFLOAD-1", "mode"),
    ({"multiplex_job_id": "abc"}, "JOBV-MULTIPLEX-1", "multiplex_job_id"),
    ({"multiplex_job_id": f"{JOB}:training:01"}, "JOBV-MULTIPLEX-1", "multiplex_job_id"),
    ({"multiplex_job_id": f"{JOB}:trainer:0"}, "JOBV-MULTIPLEX-1", "multiplex_job_id"),
])
def test_each_rule_names_its_clause_and_field(extra: dict, clause: str, field: str) -> None:
    [problem] = config_problems(body(**extra))
    assert problem.clause == clause and problem.loc[-1] == field


@pytest.mark.parametrize("extra", [
    {"sp_size": 1}, {"sp_size": 4}, {"ac_config": {"offload_config": {"enabled": True, "mode": "full"}}},
    {"ac_config": {"mode": "selective"}}, {"multiplex_job_id": f"{JOB}:log_prob:12"},
])
def test_valid_configs_have_no_problem(extra: dict) -> None:
    assert config_problems(body(**extra)) == []


def test_a_job_cannot_multiplex_with_itself() -> None:
    assert config_problems(body(multiplex_job_id=f"{JOB}:sampling:0"), own_job_id=JOB)[0].clause == "JOBV-MULTIPLEX-1"


def test_lora_config_fills_the_service_defaults() -> None:
    def sub(peft: Any) -> SubJobConfig:
        return SubJobConfig.model_validate({"job_type": "sampling", "model_name": "m",
                                            "inference_config": {"max_seq_len": 8, "n_gpus": 1, "peft_config": peft}})

    assert lora_config(sub({"peft_type": "Lora"})) == {"r": 8, "lora_alpha": 8, "target_modules": None}
    assert (lora_config(sub({"r": 4, "target_modules": ["v", "q"]})) or {}).get("target_modules") == ["q", "v"]
    assert lora_config(sub(None)) is None
