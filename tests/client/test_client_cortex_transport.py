"""The Cortex transport's op -> route mapping, body rewriting and response shaping.

A stub REST object stands in for the network here (the e2e tests cover the real thing):
it records which REST method each op reaches and with what, and returns canned results.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from client.config import ClientConfig
from client.errors import PromptTooLong
from client.shaping import alias_model_outputs, flatten_metrics, shape_train_result, to_plain
from client.transports.base import COLOCATION_OPS, JobIds, Request
from client.transports.cortex import CortexTransport, rpc_body
from contract.models import ResetPrefixCachePayload

JOB = "11111111-2222-3333-4444-555555555555"


class StubRest:
    def __init__(self, results: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.results = results or {}

    def __getattr__(self, name: str) -> Any:
        def method(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return {"request_id": f"r-{name}", "job_id": JOB}
        return method

    def result(self, job_id: str, answer: Any, *, route_name: str) -> Any:
        self.calls.append(("result", (job_id, answer), {"route_name": route_name}))
        return self.results.get(route_name, {})

    def operation_result(self, job_id: str, operation_type: str, answer: Any) -> Any:
        return self.result(job_id, answer, route_name="operation")

    def close(self) -> None:
        self.calls.append(("close", (), {}))


def _transport(results: dict[str, Any] | None = None, **cfg: Any) -> tuple[CortexTransport, StubRest]:
    rest = StubRest(results)
    t = CortexTransport(ClientConfig(base_url="http://h", **cfg), rest=rest)  # type: ignore[arg-type]
    t.ids = JobIds(JOB, f"{JOB}:training:0", f"{JOB}:sampling:0", None, True, 64)
    return t, rest


def _called(rest: StubRest, name: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    for called, args, kwargs in rest.calls:
        if called == name:
            return args, kwargs
    raise AssertionError(f"{name} not called: {[c[0] for c in rest.calls]}")


def test_verl_envelope_becomes_rpc_body() -> None:
    env = {"batch": {"input_ids": 1}, "meta": {"m": 1}, "processing": {"post": []},
           "reference_model": False, "context": {"c": 1}}
    assert rpc_body(env) == {"args": [], "kwargs": {"input_ids": 1}, "meta": {"m": 1},
                             "processing": {"post": []}, "reference_model": False,
                             "context": {"c": 1}}


def test_rpc_body_keeps_an_rpc_body_and_wraps_flat_tensors() -> None:
    assert rpc_body({"kwargs": {"input_ids": 1}}) == {"args": [], "kwargs": {"input_ids": 1}}
    assert rpc_body({"input_ids": 1, "labels": 2, "post_processors": ["x"]}) == {
        "args": [], "kwargs": {"input_ids": 1, "labels": 2}, "post_processors": ["x"]}


def test_fwd_bwd_goes_to_forward_backward_and_is_shaped() -> None:
    t, rest = _transport({"forward_backward": {"job_id": JOB, "avg_loss": 0.5, "metrics": {},
                                               "post_process_outputs": {}}})
    out = t.call(Request("fwd-bwd", JOB, {"batch": {"input_ids": 1}, "meta": {}}))
    args, _ = _called(rest, "forward_backward")
    assert args == (JOB, {"args": [], "kwargs": {"input_ids": 1}, "meta": {}})
    assert out["loss"] == out["avg_loss"] == 0.5
    assert out["metrics"] == {"grad_norm": None}
    assert out["post_process_outputs"] == {}


@pytest.mark.parametrize(("route", "rest_method"), [("proposed", "forward_no_grad"),
                                                    ("operation", "forward_operation")])
def test_fwd_no_grad_route_choice_and_batch_alias(route: str, rest_method: str) -> None:
    lp = torch.zeros(1, 3)
    route_name = "forward_no_grad" if route == "proposed" else "operation"
    t, rest = _transport({route_name: {"model_outputs": {"logprobs": lp}, "metrics": {}}},
                         forward_no_grad_route=route)
    out = t.call(Request("fwd-no-grad", JOB, {"batch": {"input_ids": 1}, "reference_model": True}))
    args, _ = _called(rest, rest_method)
    assert args[1] == {"args": [], "kwargs": {"input_ids": 1}, "reference_model": True}
    assert out["batch"]["logprobs"] is lp
    assert out["batch"]["log_probs"] is lp


def test_step_save_load_bodies() -> None:
    t, rest = _transport()
    t.call(Request("step", JOB, {"learning_rate": 1e-5}))
    assert _called(rest, "step")[0] == (JOB, 1e-5)
    t.call(Request("save-checkpoint", JOB, {"stage_info": {"s": 1}, "path": "/x",
                                            "checkpoint_id": "c1"}))
    assert _called(rest, "save")[1] == {"checkpoint_id": "c1", "checkpoint_type": None}
    rest.calls.clear()
    t.call(Request("save-weights", JOB, {"path": "/w"}))
    assert _called(rest, "save")[1] == {"checkpoint_id": None, "checkpoint_type": "weights-only"}
    t.call(Request("load-checkpoint", JOB, {"checkpoint_id": "c1", "source_job_id": "o"}))
    assert _called(rest, "load")[0] == (JOB, "c1", "o", None)


def test_generate_checks_prompt_length_before_sending() -> None:
    t, rest = _transport()
    with pytest.raises(PromptTooLong, match="prompt 1 has 64 tokens") as info:
        t.call(Request("generate", JOB, {"prompts": [[1] * 10, [1] * 64]}))
    assert info.value.index == 1 and info.value.max_seq_len == 64
    assert "route=generate" in str(info.value)
    assert not rest.calls


def test_generate_on_a_job_without_a_sampler_fails_before_sending() -> None:
    """The service refuses generation on a training-only job (spec §1.1): say so locally."""
    from client.errors import ConfigError

    t, rest = _transport()
    t.ids = JobIds(JOB, f"{JOB}:training:0", None, None, True, None)
    with pytest.raises(ConfigError, match="no sampling sub-job"):
        t.call(Request("generate", JOB, {"prompts": [[1, 2]]}))
    assert not rest.calls


def test_sync_weights_names_the_training_receiver() -> None:
    t, rest = _transport({"operation": {"request_id": "r1"}})
    t.call(Request("sync-weights", JOB, {}))
    args, kwargs = _called(rest, "operation")
    assert args[1] == "weight-sync" and kwargs == {"sub_job_id": f"{JOB}:training:0"}


def test_generate_sends_only_frame_fields_and_lists_tensors() -> None:
    t, rest = _transport({"generate": {"job_id": JOB, "results": [
        {"text": "a", "token_ids": torch.tensor([1, 2]), "logprobs": torch.tensor([-0.5, -0.25])}]}})
    out = t.call(Request("generate", JOB, {"prompts": [[1, 2]], "sampling_params": {"max_tokens": 2},
                                           "local_only": True}))
    assert _called(rest, "generate")[0] == (JOB, {"prompts": [[1, 2]],
                                                  "sampling_params": {"max_tokens": 2}})
    assert out["results"][0]["token_ids"] == [1, 2]
    assert out["results"][0]["logprobs"] == [-0.5, -0.25]


def test_operations_payloads() -> None:
    t, rest = _transport()
    t.call(Request("sync-weights", JOB, {"cuda_ipc": True, "low_memory": False}))
    args, _ = _called(rest, "operation")
    assert args == (JOB, "weight-sync", {"cuda_ipc": True, "low_memory": False,
                                         "source_sub_job_id": f"{JOB}:training:0",
                                         "target_sub_job_ids": [f"{JOB}:sampling:0"]})
    rest.calls.clear()
    t.call(Request("reset-prefix-cache", JOB, {}))
    args, kwargs = _called(rest, "operation")
    assert args == (JOB, "reset-prefix-cache", ResetPrefixCachePayload().model_dump())
    assert kwargs == {"sub_job_type": "sampling"}
    rest.calls.clear()
    t.call(Request("tail-logs", JOB, {"max_lines": 3}))
    assert _called(rest, "operation")[0] == (JOB, "tail-logs", {"max_lines": 3})
    rest.calls.clear()
    t.call(Request("cancel-request", JOB, {"request_id": "r9"}))
    assert _called(rest, "operation")[0] == (JOB, "cancel-request", {"request_id": "r9"})


@pytest.mark.parametrize("op", sorted(COLOCATION_OPS))
def test_colocation_ops_answer_empty_without_a_call(op: str) -> None:
    t, rest = _transport()
    assert t.call(Request(op, JOB, {"tags": ["x"]})) == {}
    assert not rest.calls


def test_close_cancels_only_when_asked() -> None:
    t, rest = _transport()
    t.close(cancel=False)
    assert [c[0] for c in rest.calls] == ["close"]
    t, rest = _transport()
    t.close(cancel=True)
    assert [c[0] for c in rest.calls] == ["cancel_job", "close"]


# --- shaping, pure ---------------------------------------------------------------------------


def test_flatten_metrics_rules() -> None:
    assert flatten_metrics({"metrics": {"grad_norm": 2, "loss": 3}}) == {
        "metrics": {"grad_norm": 2, "loss": 3}, "grad_norm": 2, "loss": 3, "avg_loss": 3}
    assert flatten_metrics({"avg_loss": 1})["loss"] == 1
    assert flatten_metrics({"loss": 1})["avg_loss"] == 1
    assert flatten_metrics({"grad_norm": 9, "metrics": {"grad_norm": 2}})["grad_norm"] == 9
    assert flatten_metrics({"global_steps": 1}) == {"global_steps": 1}


def test_loss_only_answer_shape() -> None:
    assert shape_train_result({"avg_loss": 0.25}) == {
        "avg_loss": 0.25, "loss": 0.25, "metrics": {"grad_norm": None},
        "post_process_outputs": {}, "grad_norm": None}


def test_model_outputs_alias_keeps_an_existing_batch() -> None:
    assert alias_model_outputs({"model_outputs": {"a": 1}, "batch": {"b": 2}})["batch"] == {"b": 2}
    assert alias_model_outputs({"model_outputs": {"log_probs": 1}})["batch"] == {
        "log_probs": 1, "logprobs": 1}


def test_to_plain_turns_tensors_into_lists_only() -> None:
    assert to_plain({"a": torch.tensor([1, 2]), "b": ("x", torch.tensor(3)), "c": "s"}) == {
        "a": [1, 2], "b": ("x", 3), "c": "s"}
