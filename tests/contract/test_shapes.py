"""Shape rules (spec §6.1, §10) judge results without torch-specific code paths."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from contract.shapes import (
    ShapeError,
    check_forward_result,
    check_generate_result,
    check_loss,
    forward_expectation,
    generate_expectation,
    shape_of,
)


@given(st.integers(1, 6), st.integers(1, 40), st.booleans(), st.sampled_from(["kwargs", "batch"]))
def test_forward_rule_accepts_right_shapes_and_refuses_wrong(b: int, s: int, ent: bool, where: str) -> None:
    payload = {where: {"input_ids": torch.zeros(b, s, dtype=torch.int64)}, "meta": {"calculate_entropy": ent}}
    exp = forward_expectation(payload)
    assert exp.shape == (b, s) and exp.entropy is ent
    good = {"model_outputs": {"logprobs": -torch.rand(b, s), "entropy": torch.rand(b, s)}}
    assert check_forward_result(payload, good) == []
    short = {"model_outputs": {"logprobs": -torch.rand(b, s + 1)}}
    assert check_forward_result(payload, short)
    positive = {"model_outputs": {"logprobs": torch.ones(b, s), "entropy": torch.rand(b, s)}}
    assert any("<= 0" in p for p in check_forward_result(payload, positive))
    if ent:
        assert check_forward_result(payload, {"model_outputs": {"logprobs": -torch.rand(b, s)}})


def test_forward_rule_needs_input_ids() -> None:
    with pytest.raises(ShapeError):
        forward_expectation({"kwargs": {"labels": [[1]]}})
    with pytest.raises(ShapeError):
        forward_expectation({"kwargs": {"input_ids": [1, 2, 3]}})


def test_generate_rule() -> None:
    req = {"prompts": ["a", [1, 2]], "sampling_params": [{"max_tokens": 2, "logprobs": 1}, None]}
    exp = generate_expectation(req)
    assert exp.count == 2 and exp.max_tokens == (2, 16) and exp.logprobs == (True, False)
    good: dict[str, Any] = {"results": [
        {"text": "x", "token_ids": [5, 6], "finish_reason": "length", "logprobs": [-0.1, -0.2]},
        {"text": "y", "token_ids": torch.tensor([7]), "finish_reason": "stop"},
    ]}
    assert check_generate_result(req, good) == []
    assert check_generate_result(req, {"results": good["results"][:1]})
    too_long = {"results": [{**good["results"][0], "token_ids": [1, 2, 3]}, good["results"][1]]}
    assert check_generate_result(req, too_long)
    misaligned = {"results": [{**good["results"][0], "logprobs": [-0.1]}, good["results"][1]]}
    assert check_generate_result(req, misaligned)
    assert check_generate_result(req, {"results": [{**r, "finish_reason": "eos"} for r in good["results"]]})


def test_loss_and_shape_helpers() -> None:
    assert check_loss(0.5) == [] and check_loss(float("nan")) and check_loss(True) and check_loss("1")
    assert shape_of([[1, 2, 3], [4, 5, 6]]) == (2, 3) and shape_of(torch.zeros(2, 0)) == (2, 0)
