"""Create-body validation, unknown-field detection and body models (spec §5.1, §8)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from contract.models import (
    OPERATION_NATURAL_TARGET,
    OPERATION_PAYLOADS,
    OPERATION_TYPES,
    CreateJobRequest,
    GenerateRequest,
    SaveRequest,
    SubJobConfig,
    unknown_fields,
)

TRAIN: dict[str, Any] = {
    "job_type": "training",
    "model_name": "Qwen/Qwen3-0.6B",
    "training_config": {"optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 128,
                        "train_batch_size": 4, "n_gpus": 1, "ds_config": {"zero": 2}},
}
SAMPLE = {"job_type": "sampling", "model_name": "Qwen/Qwen3-0.6B",
          "inference_config": {"max_seq_len": 128, "n_gpus": 1, "vllm_config": {}}}


def test_valid_create_body() -> None:
    req = CreateJobRequest.model_validate({"sub_job_configs": [TRAIN, SAMPLE], "experiment_name": "e"})
    assert [s.job_type for s in req.sub_job_configs] == ["training", "sampling"]
    assert req.sub_job_configs[0].n_gpus == 1
    assert unknown_fields(req) == []  # pass-through keys are not unknown


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"sub_job_configs": []}, ("sub_job_configs",)),
        ({}, ("sub_job_configs",)),
        ({"sub_job_configs": [{**TRAIN, "job_type": "serving"}]}, ("sub_job_configs", 0, "job_type")),
        ({"sub_job_configs": [{**TRAIN, "model_name": ""}]}, ("sub_job_configs", 0, "model_name")),
        ({"sub_job_configs": [{**TRAIN, "training_config": {**TRAIN["training_config"], "max_seq_len": 0}}]},
         ("sub_job_configs", 0, "training_config", "max_seq_len")),
        ({"sub_job_configs": [{**TRAIN, "training_config": {**TRAIN["training_config"], "optimizer": {}}}]},
         ("sub_job_configs", 0, "training_config", "optimizer")),
        ({"sub_job_configs": [{**SAMPLE, "inference_config": {"max_seq_len": 8, "n_gpus": 0}}]},
         ("sub_job_configs", 0, "inference_config", "n_gpus")),
    ],
)
def test_invalid_create_bodies_name_the_field(body: dict, loc: tuple) -> None:
    with pytest.raises(ValidationError) as info:
        CreateJobRequest.model_validate(body)
    assert any(tuple(e["loc"][: len(loc)]) == loc for e in info.value.errors())


def test_exactly_one_config_per_sub_job() -> None:
    with pytest.raises(ValidationError, match="needs training_config"):
        SubJobConfig.model_validate({k: v for k, v in TRAIN.items() if k != "training_config"})
    with pytest.raises(ValidationError, match="not inference_config"):
        SubJobConfig.model_validate({**TRAIN, "inference_config": SAMPLE["inference_config"]})
    with pytest.raises(ValidationError, match="not training_config"):
        SubJobConfig.model_validate({**SAMPLE, "training_config": TRAIN["training_config"]})


def test_unknown_fields_are_kept_and_listed() -> None:
    req = CreateJobRequest.model_validate({"sub_job_configs": [{**TRAIN, "typo_field": 1}], "extra": 2})
    assert sorted(unknown_fields(req), key=str) == [("extra",), ("sub_job_configs", 0, "typo_field")]


def test_save_checkpoint_type_is_lowercased_and_checked() -> None:
    assert SaveRequest.model_validate({"checkpoint_type": "Weights-Only"}).checkpoint_type == "weights-only"
    assert SaveRequest.model_validate({}).checkpoint_type is None
    with pytest.raises(ValidationError):
        SaveRequest.model_validate({"checkpoint_type": "full"})
    # the reference client's extras are accepted
    assert SaveRequest.model_validate({"path": "/x", "step": 3, "export_hf": True}).model_extra


def test_generate_alignment() -> None:
    req = GenerateRequest.model_validate({"prompts": ["a", [1, 2]], "sampling_params": [None, {"max_tokens": 3}]})
    assert req.params_for(0).max_tokens == 16 and req.params_for(1).max_tokens == 3
    with pytest.raises(ValidationError, match="align"):
        GenerateRequest.model_validate({"prompts": ["a"], "routing_key": ["x", "y"]})


def test_operation_tables_cover_every_type() -> None:
    assert set(OPERATION_PAYLOADS) == set(OPERATION_TYPES) == set(OPERATION_NATURAL_TARGET)
    assert OPERATION_NATURAL_TARGET["reset-prefix-cache"] == "sampling"
    assert OPERATION_NATURAL_TARGET["weight-sync"] == "training"



def _with_number(where: str, number: Any) -> dict[str, Any]:
    """A valid create body with ``number`` at one of a few kinds of place."""
    train = {**TRAIN, "training_config": dict(TRAIN["training_config"])}
    body: dict[str, Any] = {"sub_job_configs": [train]}
    if where == "seed":
        train["seed"] = number
    elif where == "n_gpus":
        train["training_config"]["n_gpus"] = number
    elif where == "lr":
        train["training_config"]["optimizer"] = {"name": "AdamW", "lr": number}
    else:
        body["extra"] = [1, {"deep": number}]
    return body


@pytest.mark.parametrize("number", [10**4000, -(10**400), float("inf"), float("-inf"), float("nan")])
@pytest.mark.parametrize(("where", "loc"), [
    ("seed", ("sub_job_configs", 0, "seed")),
    ("n_gpus", ("sub_job_configs", 0, "training_config", "n_gpus")),
    ("lr", ("sub_job_configs", 0, "training_config", "optimizer", "lr")),
    ("extra", ("extra", 1, "deep")),
])
def test_a_number_no_field_can_use_is_refused_by_its_location(number: Any, where: str, loc: tuple) -> None:
    """One rule for every request model (contract.models.RequestBody): no number past a
    double or non-finite, in declared fields, open extras and pass-through dicts alike."""
    with pytest.raises(ValidationError) as info:
        CreateJobRequest.model_validate(_with_number(where, number))
    assert [(e["loc"], e["type"]) for e in info.value.errors()] == [(loc, "number_out_of_range")]


@pytest.mark.parametrize("number", [2**63, -(2**63) - 1])
@pytest.mark.parametrize(("where", "loc"), [("seed", ("sub_job_configs", 0, "seed")),
                                            ("n_gpus", ("sub_job_configs", 0, "training_config", "n_gpus"))])
def test_an_integer_field_takes_64_bits(number: int, where: str, loc: tuple) -> None:
    with pytest.raises(ValidationError) as info:
        CreateJobRequest.model_validate(_with_number(where, number))
    assert [e["loc"] for e in info.value.errors()] == [loc]


def test_the_64_bit_edges_are_taken_and_a_big_number_where_no_integer_is_wanted() -> None:
    body = {"sub_job_configs": [{**TRAIN, "seed": 2**63 - 1}], "extra": -(2**63), "big": 10**300}
    assert CreateJobRequest.model_validate(body).sub_job_configs[0].seed == 2**63 - 1
    assert _with_number("lr", 10**30)["sub_job_configs"][0]["training_config"]["optimizer"]["lr"] == 10**30
    CreateJobRequest.model_validate(_with_number("lr", 10**30))
