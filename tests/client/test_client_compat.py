"""Every SkyRL / verl call pattern (what SkyRL's and verl's integration code relies on) pinned with the recording transport.

The recording transport stands where Cortex would: these tests fix which canonical op and
which body each legacy call produces, and the backend-neutral shaping the client applies.
"""

from __future__ import annotations

import asyncio
import math
import warnings
from typing import Any

import pytest

from client import ClientConfig, create_arctic_rl_client, create_client
from client.legacy import AsyncArcticRLClient
from client.rl import ArcticRLClient
from client.transports.base import COLOCATION_OPS, OPS, JobIds, Request
from client.transports.recording import RecordingTransport

VERL_ENVELOPE: dict[str, Any] = {
    "batch": {"input_ids": [[1, 2, 3]], "attention_mask": [[1, 1, 1]]},
    "meta": {"pad_token_id": 0, "calculate_entropy": True},
    "processing": {"post": ["entropy"], "loss_fn": "verl_grpo"},
}


def _config(**extra: Any) -> ClientConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return ClientConfig(backend="local", colocate=True, **extra)


def _legacy(responses: dict[str, Any] | None = None) -> tuple[AsyncArcticRLClient, RecordingTransport]:
    transport = RecordingTransport(responses)
    return create_arctic_rl_client(_config(), None, transport=transport), transport


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- op vocabulary -------------------------------------------------------------------------


def test_ops_vocabulary() -> None:
    assert {"fwd-bwd", "fwd-no-grad", "step", "save-checkpoint", "save-weights",
            "load-checkpoint", "generate", "log-probs", "sync-weights", "reset-prefix-cache",
            "tail-logs", "cancel-request"} <= OPS
    expected = {"wake_training", "sleep_training", "wake_inference", "sleep_inference",
                "wake_log_prob", "sleep_log_prob", "empty_training_cache", "weight_norm"}
    assert expected == COLOCATION_OPS
    assert COLOCATION_OPS <= OPS
    with pytest.raises(ValueError, match="unknown op"):
        Request("train", "j")


# --- fwd_bwd ---------------------------------------------------------------------------------


def test_fwd_bwd_verl_envelope_with_verl_kwargs() -> None:
    client, rec = _legacy()
    run(client.fwd_bwd(VERL_ENVELOPE, reference_model=False, context={"step": 3},
                       router_replay={"enabled": True}))
    req = rec.last()
    assert req.op == "fwd-bwd"
    assert req.job_id == "rec-job"
    assert req.body == {**VERL_ENVELOPE, "reference_model": False, "context": {"step": 3},
                        "router_replay": {"enabled": True}}


def test_fwd_bwd_skyrl_post_processors() -> None:
    client, rec = _legacy()
    run(client.fwd_bwd({"kwargs": {"input_ids": [[1]]}}, post_processors=["logprobs", "entropy"]))
    assert rec.last("fwd-bwd").body == {"kwargs": {"input_ids": [[1]]},
                                        "post_processors": ["logprobs", "entropy"]}


def test_fwd_bwd_none_legacy_kwargs_are_not_sent() -> None:
    client, rec = _legacy()
    run(client.fwd_bwd({"batch": {}}, context=None, router_replay=None))
    assert rec.last().body == {"batch": {}}


def test_fwd_bwd_metrics_bubble_and_loss_mirrors() -> None:
    client, _ = _legacy({"fwd-bwd": {"avg_loss": 0.7, "metrics": {"grad_norm": 1.25, "pg_loss": 0.1}}})
    out = run(client.fwd_bwd(VERL_ENVELOPE))
    assert out["grad_norm"] == 1.25
    assert out["loss"] == out["avg_loss"] == 0.7
    assert out["metrics"]["pg_loss"] == 0.1


def test_fwd_bwd_loss_only_in_metrics() -> None:
    client, _ = _legacy({"fwd-bwd": {"metrics": {"loss": 0.4}}})
    out = run(client.fwd_bwd(VERL_ENVELOPE))
    assert out["loss"] == out["avg_loss"] == 0.4


# --- fwd_no_grad -------------------------------------------------------------------------------


@pytest.mark.parametrize("reference", [False, True])
def test_fwd_no_grad_reference_model(reference: bool) -> None:
    client, rec = _legacy()
    run(client.fwd_no_grad(VERL_ENVELOPE, reference_model=reference))
    assert rec.last().op == "fwd-no-grad"
    assert rec.last().body == {**VERL_ENVELOPE, "reference_model": reference}


def test_fwd_no_grad_default_reference_is_false() -> None:
    client, rec = _legacy()
    run(client.fwd_no_grad(VERL_ENVELOPE))
    assert rec.last().body["reference_model"] is False


# --- step ------------------------------------------------------------------------------------


def test_step_plain_and_with_learning_rate() -> None:
    client, rec = _legacy({"step": {"global_steps": 1, "last_lr": 1e-5, "metrics": {"grad_norm": 0.3}}})
    out = run(client.step())
    assert rec.last().body == {}
    assert out.get("metrics", out).get("grad_norm") == 0.3
    assert out.get("grad_norm") == 0.3
    run(client.step(learning_rate=2e-5))
    assert rec.last().body == {"learning_rate": 2e-5}


def test_step_without_metrics_reads_not_reported() -> None:
    """No metrics from the service: the block is still there, grad_norm a NaN (a float, so
    the integrations' means and logs keep working) and last_lr copied in."""
    client, _ = _legacy({"step": {"global_steps": 1, "last_lr": 1e-5}})
    out = run(client.step())
    assert math.isnan(out.get("metrics", out).get("grad_norm"))
    assert out["metrics"]["last_lr"] == 1e-5


# --- weights, generate, checkpoints -------------------------------------------------------------


def test_sync_weights_hints() -> None:
    client, rec = _legacy()
    run(client.sync_weights(cuda_ipc=True, low_memory=True))
    assert rec.last() == Request("sync-weights", "rec-job", {"cuda_ipc": True, "low_memory": True})
    run(client.sync_weights())
    assert rec.last().body == {"cuda_ipc": False, "low_memory": False}


def test_generate_prompts_and_sampling_params() -> None:
    client, rec = _legacy({"generate": {"results": [{"text": "hi", "token_ids": [5]}]}})
    out = run(client.generate([[1, 2, 3]], {"max_tokens": 4, "temperature": 0.0}))
    assert rec.last().body == {"prompts": [[1, 2, 3]],
                               "sampling_params": {"max_tokens": 4, "temperature": 0.0}}
    assert out == [{"text": "hi", "token_ids": [5]}]  # the list of outputs, as upstream's client


def test_save_checkpoint_stage_info_and_path() -> None:
    client, rec = _legacy({"save-checkpoint": {"checkpoint_id": "global_step3"}})
    out = run(client.save_checkpoint({"global_step": 3}, "/ckpt/global_step3"))
    assert rec.last().body == {"stage_info": {"global_step": 3}, "path": "/ckpt/global_step3"}
    assert out["checkpoint_id"] == "global_step3"


def test_save_weights_kwargs() -> None:
    client, rec = _legacy()
    run(client.save_weights(path="/w", export_hf=True))
    assert rec.last() == Request("save-weights", "rec-job", {"path": "/w", "export_hf": True})


def test_load_checkpoint() -> None:
    client, rec = _legacy()
    run(client.load_checkpoint("global_step3", source_job_id="other"))
    assert rec.last().body == {"checkpoint_id": "global_step3", "source_job_id": "other"}


def test_reset_prefix_cache() -> None:
    client, rec = _legacy()
    assert run(client.reset_prefix_cache()) == {}
    assert rec.last() == Request("reset-prefix-cache", "rec-job", {})


def test_log_probs_both_call_shapes() -> None:
    client, rec = _legacy()
    run(client.log_probs(["a b"], completions=[" c"], top_k=2))
    assert rec.last().body == {"prompts": ["a b"], "completions": [" c"], "top_k": 2}
    run(client.log_probs({"prompts": [[1, 2]]}))
    assert rec.last().body == {"prompts": [[1, 2]]}


def test_tail_logs_and_cancel_request() -> None:
    client, rec = _legacy()
    run(client.tail_logs(max_lines=5))
    assert rec.last() == Request("tail-logs", "rec-job", {"max_lines": 5})
    run(client.cancel_request("req-1"))
    assert rec.last() == Request("cancel-request", "rec-job", {"request_id": "req-1"})


# --- colocation lifecycle ----------------------------------------------------------------------


def test_verl_colocation_calls_with_kwargs() -> None:
    client, rec = _legacy()
    assert run(client.wake_inference(tags=["weights", "kv_cache"])) == {}
    assert rec.last() == Request("wake_inference", "rec-job", {"tags": ["weights", "kv_cache"]})
    assert run(client.sleep_inference(level=1)) == {}
    assert rec.last() == Request("sleep_inference", "rec-job", {"level": 1})


@pytest.mark.parametrize("op", sorted(COLOCATION_OPS))
def test_every_colocation_op_answers_empty(op: str) -> None:
    client, rec = _legacy()
    assert run(getattr(client, op)()) == {}
    assert rec.last().op == op


# --- sync helpers and properties --------------------------------------------------------------


def test_sync_helpers_and_properties() -> None:
    client, rec = _legacy()
    assert client.config.colocate is True  # SkyRL reads client.config.colocate
    assert client.get_server_state() is None
    assert rec.opened == 1  # the factory obtained the job: its ids are there at once
    run(client.step())
    assert (client.training_job_id, client.sampling_job_id, client.log_prob_job_id) == (
        "rec-job:training:0", "rec-job:sampling:0", None)
    again = client.reconnect_config()
    assert isinstance(again, ClientConfig)
    assert (again.job_id, again.training_job_id, again.sampling_job_id) == (
        "rec-job", "rec-job:training:0", "rec-job:sampling:0")
    assert again.colocate is True
    client.shutdown()
    client.shutdown()
    assert rec.closed == [True]
    assert rec.opened == 1


def test_sync_methods_are_sync_and_ops_are_coroutines() -> None:
    client, _ = _legacy()
    for name in ("reconnect_config", "get_server_state", "shutdown"):
        assert not asyncio.iscoroutinefunction(getattr(client, name))
    for name in ("fwd_bwd", "fwd_no_grad", "step", "sync_weights", "generate", "save_checkpoint",
                 "save_weights", "reset_prefix_cache", "empty_training_cache", "weight_norm",
                 "log_probs", *COLOCATION_OPS):
        assert asyncio.iscoroutinefunction(getattr(client, name)), name


def test_reattached_client_does_not_cancel_on_shutdown() -> None:
    transport = RecordingTransport(ids=JobIds("rec-job", "rec-job:training:0", created=False))
    client = create_client(_config(job_id="rec-job"), transport=transport)
    client.start()
    client.shutdown()
    assert transport.closed == [False]


def test_two_positional_arguments_like_the_integrations() -> None:
    sentinel = object()
    client = create_arctic_rl_client(_config(), sentinel, transport=RecordingTransport())
    assert isinstance(client, AsyncArcticRLClient)
    assert client.get_server_state() is None


def test_sync_client_context_manager() -> None:
    rec = RecordingTransport()
    with ArcticRLClient(_config(), rec) as client:
        client.fwd_bwd(VERL_ENVELOPE)
    assert rec.ops == ["fwd-bwd"]
    assert rec.closed == [True]


def test_async_calls_do_not_block_the_event_loop() -> None:
    import threading

    seen: list[str] = []
    rec = RecordingTransport({"step": lambda req: {"thread": threading.current_thread().name}})
    client = create_arctic_rl_client(_config(), None, transport=rec)

    async def main() -> None:
        out = await client.step()
        seen.append(out["thread"])

    run(main())
    assert seen and seen[0] != threading.main_thread().name


def test_concurrent_first_calls_open_the_job_once() -> None:
    import threading

    gate = threading.Event()

    class SlowOpen(RecordingTransport):
        def open(self) -> JobIds:
            gate.wait(1.0)
            return super().open()

    rec = SlowOpen()
    client = AsyncArcticRLClient(create_client(_config(), transport=rec))  # lazy, unlike the factory

    async def main() -> None:
        pending = asyncio.gather(client.step(), client.generate([[1]]), client.fwd_bwd({}))
        await asyncio.sleep(0.05)
        gate.set()
        await pending

    run(main())
    assert rec.opened == 1
    assert sorted(rec.ops) == ["fwd-bwd", "generate", "step"]


def test_logprobs_are_found_under_either_alias_and_spelling() -> None:
    from client.shaping import logprobs_of

    assert logprobs_of({"model_outputs": {"log_probs": [1.0]}}) == [1.0]
    assert logprobs_of({"model_outputs": {"other": 1}, "batch": {"logprobs": [2.0]}}) == [2.0]
    assert logprobs_of({"batch": {"entropy": [0.1]}}) is None
    assert logprobs_of({}) is None
