"""Arctic-Platform's verl adapter (``arctic_platform/integrations/verl/adapter.py``) replayed
against the fake, call by call, in the order it makes them.

The facts, in our words: the adapter builds the nested config, ``ArcticRLClientConfig(
model_name=, seed=, max_seq_len=, *_gpus=, backend=OnPremConfig(protocol=, colocate=,
host=, port=, launch_local_server=), training=TrainingConfig(full_determinism=,
checkpoint_path=, ds_config=, ds_worker_config=, cuda_ipc=, low_memory=),
sampling=SamplingConfig(vllm=, arctic_inference_config=, log_prob_engine="deepspeed",
log_prob_ds_config=))``, with the optimizer, LR scheduler, batch sizes and clipping inside
``ds_config``; it reads the three GPU counts back, then ``create_arctic_rl_client(config)``.
Its reconnect handle looks up ``get_server_state`` on ``client.transport`` and takes
``reconnect_config()``; a forwarder worker rebuilds with ``create_arctic_rl_client(config)``
or ``(config, server_state=)``. Log-probs are ``fwd_no_grad(payload, reference_model=True |
False)`` whose ``["batch"]`` has ``logprobs`` popped and renamed ``log_probs`` (``entropy``
looked up by ``in``) and whose ``metrics`` are read with ``.get``. An update is
``fwd_bwd(payload)`` then ``step()``; the step's ``metrics`` are updated with the fwd-bwd's,
``loss`` popped from them, every other value averaged, ``last_lr`` popped and its last entry
kept. Generation awaits ``generate(prompts=, sampling_params=)`` and returns the outputs as
they come; then ``save_checkpoint()``, ``sync_weights()``, ``wake_inference(tags=)``,
``sleep_inference(level=)``, ``reset_prefix_cache()``; ``destroy`` awaits ``shutdown()``.
"""

from __future__ import annotations

import asyncio
import math
import warnings
from typing import Any

import numpy as np
import pytest
from integration_support import (
    SETUPS,
    Fakes,
    launch_on,
    rollout_batch,
    rollout_meta,
)

from client import (
    ArcticRLClientConfig,
    CortexConfig,
    OnPremConfig,
    SamplingConfig,
    SyncArcticRLClient,
    TrainingConfig,
    create_arctic_rl_client,
    exit_guard,
)
from client.env import apply_env_override
from client.jobspec import CortexConfigWarning, plan_job
from contract.routes import Profile

pytestmark = pytest.mark.filterwarnings("ignore::client.jobspec.CortexConfigWarning")
ROLLOUT_N = 2
LOG_PROB_POST = {"post": ["compute_entropy_and_logprobs"], "loss_fn": None}
UPDATE_POST = {"post": ["apply_temperature", "compute_entropy_and_logprobs"], "loss_fn": "verl_grpo"}


def verl_config(**over: Any) -> ArcticRLClientConfig:
    """The nested config the adapter builds (HTTP protocol, colocated, cosine schedule)."""
    ds_config = {"train_micro_batch_size_per_gpu": 1, "train_batch_size": 4,
                 "gradient_accumulation_steps": 4, "sequence_parallel_size": 1,
                 "zero_optimization": {"stage": 0}, "bf16": {"enabled": True},
                 "optimizer": {"type": "AdamW", "params": {"lr": 3e-6, "weight_decay": 0.01,
                                                           "betas": [0.9, 0.95], "eps": 1e-8}},
                 "gradient_clipping": 1.0,
                 "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 4,
                                                                    "warmup_num_steps": 1}}}
    fields: dict[str, Any] = dict(
        model_name="Qwen/Qwen3-0.6B", seed=7, max_seq_len=512,
        training_gpus=1, sampling_gpus=1, log_prob_gpus=1,
        backend=OnPremConfig(protocol="http", colocate=True, host="localhost", port=7000,
                             launch_local_server=True),
        training=TrainingConfig(full_determinism=True, checkpoint_path="/ckpt/verl",
                                ds_config=ds_config,
                                ds_worker_config={"use_liger": True, "attn_implementation": "sdpa",
                                                  "enable_gradient_checkpointing": True},
                                cuda_ipc=False, low_memory=False),
        sampling=SamplingConfig(vllm={"tensor_parallel_size": 1, "gpu_memory_utilization": 0.6,
                                      "max_model_len": 512, "max_num_seqs": 64,
                                      "enforce_eager": True, "enable_chunked_prefill": True},
                                arctic_inference_config={"speculative_decoding": {"model": None}},
                                log_prob_engine="deepspeed", log_prob_ds_config=dict(ds_config)),
    )
    fields.update(over)
    return ArcticRLClientConfig(**fields)


# --- the nested config ------------------------------------------------------------------------


def test_verl_nested_config_maps_into_the_create_job_body() -> None:
    rl_config = verl_config()
    assert rl_config.training_gpus + rl_config.sampling_gpus + rl_config.log_prob_gpus == 3
    cfg = apply_env_override(rl_config, {"ARCTIC_RL_BACKEND": "cortex",
                                         "CORTEX_BASE_URL": "http://127.0.0.1:9"})
    plan = plan_job(cfg)
    training, sampling, log_prob = plan.body["sub_job_configs"]
    tc = training["training_config"]
    assert tc["optimizer"] == {"name": "AdamW", "lr": 3e-6, "weight_decay": 0.01,
                               "betas": [0.9, 0.95], "eps": 1e-8}
    assert (tc["max_seq_len"], tc["train_batch_size"], tc["gradient_clipping"]) == (512, 4, 1.0)
    assert (tc["model_provider"], tc["attn_implementation"], tc["activation_checkpointing"]) == (
        "liger", "sdpa", True)
    assert tc["ds_config"]["scheduler"]["type"] == "WarmupCosineLR"  # spec §8.2 passthrough
    for sub in (sampling, log_prob):
        assert sub["inference_config"]["vllm_config"] == {
            "gpu_memory_utilization": 0.6, "max_num_seqs": 64, "enforce_eager": True,
            "enable_chunked_prefill": True}
    assert log_prob["job_type"] == "log_probability"
    assert {s["seed"] for s in plan.body["sub_job_configs"]} == {7}
    assert set(plan.not_sent) == {"log_prob_ds_config", "arctic_inference_config",
                                  "checkpoint_path", "full_determinism"}
    assert set(plan.not_applicable) == {"comm_protocol", "colocate", "port", "launch_local_server",
                                        "cuda_ipc", "low_memory", "log_prob_engine"}


def test_cortex_backend_nested_form_addresses_the_service(fakes: Fakes) -> None:
    """``backend=CortexConfig(...)``: the target comes from the config, no launcher needed."""
    url = fakes.url("shape", "current")
    client = create_arctic_rl_client(verl_config(backend=CortexConfig(
        base_url=url, database="CORTEX", schema="PUBLIC", max_retries=2)), blocking_calls=True)
    assert isinstance(client, SyncArcticRLClient)
    assert (client.config.base_url, client.config.schema_name, client.config.retries) == (url, "PUBLIC", 2)
    assert isinstance(client.generate(["hi"], {"max_tokens": 2}), list)
    client.shutdown()


# --- the whole loop: driver pre-init, a forwarder worker, destroy -----------------------------


def _log_prob(client: Any, batch: dict[str, Any], meta: dict[str, Any], *, ref: bool) -> Any:
    """compute_log_prob with the adapter's reads of the answer."""
    payload = {"batch": {k: batch[k] for k in ("input_ids", "attention_mask", "prompts",
                                               "position_ids")}, "meta": meta,
               "processing": dict(LOG_PROB_POST)}
    response = asyncio.run(client.fwd_no_grad(payload, reference_model=ref))
    response["batch"]["log_probs"] = response["batch"].pop("logprobs")
    assert ("entropy" in response["batch"]) == (not ref)
    assert isinstance(dict(response.get("metrics", {})), dict)
    return response["batch"]["log_probs"]


def _update(client: Any, batch: dict[str, Any], meta: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """_send_update_actor, then update_actor's reduction of one mini-batch's metrics."""
    fwd_bwd_response = asyncio.run(client.fwd_bwd({"batch": batch, "meta": meta,
                                                   "processing": dict(UPDATE_POST)}))
    step_response = asyncio.run(client.step())
    step_response["metrics"].update(**fwd_bwd_response["metrics"])
    mb_metrics = dict(step_response["metrics"])
    loss = mb_metrics.pop("loss")
    last_lr = [mb_metrics.pop("last_lr", None)]
    reduced = {k: float(np.mean([v])) for k, v in mb_metrics.items()}
    if last_lr[-1] is not None:
        reduced["lr"] = last_lr[-1]
    return float(loss), reduced


@pytest.mark.parametrize(("engine", "profile"), SETUPS)
def test_verl_driver_worker_loop(fakes: Fakes, monkeypatch: pytest.MonkeyPatch,
                                 engine: str, profile: Profile) -> None:
    url, before = fakes.launch(monkeypatch, engine, profile)
    with pytest.warns(CortexConfigWarning):
        driver = create_arctic_rl_client(verl_config())
    get_state = getattr(driver.transport, "get_server_state", None)
    handle = {"rl_client_reconnect_config": driver.reconnect_config(),
              "rl_server_state": get_state() if get_state is not None else None}
    assert handle["rl_server_state"] is None
    worker = create_arctic_rl_client(handle["rl_client_reconnect_config"])
    other = create_arctic_rl_client(handle["rl_client_reconnect_config"],
                                    server_state=handle["rl_server_state"])
    ids = (driver.training_job_id, driver.sampling_job_id, driver.log_prob_job_id)
    assert all(ids)
    for reattached in (worker, other):
        assert (reattached.training_job_id, reattached.sampling_job_id,
                reattached.log_prob_job_id) == ids

    prompts = [list(b"Count to three:")] * ROLLOUT_N + [list(b"Colour:")] * ROLLOUT_N
    responses = []
    for prompt in prompts:
        outputs = asyncio.run(worker.generate(prompts=[bytes(prompt).decode()], sampling_params={
            "temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_tokens": 4}))
        responses.append([int(t) for t in outputs[0]["token_ids"]])
    batch = rollout_batch(prompts, responses)
    meta = rollout_meta(batch, ROLLOUT_N)
    old = _log_prob(worker, batch, meta, ref=False)
    ref = _log_prob(worker, batch, {**meta, "calculate_entropy": False}, ref=True)
    assert tuple(old.shape) == tuple(ref.shape) == tuple(batch["input_ids"].shape)
    batch["old_log_probs"] = old * batch["response_mask"]
    loss, metrics = _update(worker, batch, meta)
    assert math.isfinite(loss)
    assert math.isfinite(metrics["grad_norm"]) == (profile == "proposed")  # current: NaN
    assert metrics["lr"] == pytest.approx(3e-6)

    asyncio.run(worker.sync_weights())
    assert asyncio.run(worker.wake_inference(tags=["weights"])) == {}
    assert asyncio.run(worker.sleep_inference(level=1)) == {}
    asyncio.run(worker.reset_prefix_cache())
    saved = asyncio.run(worker.save_checkpoint())
    job = fakes.job(url, str(driver.sync.job_id))
    assert saved["checkpoint_id"] in {c if isinstance(c, str) else c.get("checkpoint_id")
                                      for c in job["checkpoints"]}
    assert (job["global_steps"], job["forward_backward_executions"]) == (1, 1)
    assert set(fakes.jobs(url)) - before == {driver.sync.job_id}  # reattached, never created

    assert exit_guard.guarded_jobs() == [driver.sync.job_id]  # only the creator would cancel
    async def destroy() -> None:  # the adapter's destroy(), twice
        await driver.shutdown()
        await driver.shutdown()
    asyncio.run(destroy())
    assert exit_guard.guarded_jobs() == []
    assert fakes.job(url, str(driver.sync.job_id))["status"] in ("cancelling", "cancelled")


def _jagged(dense: Any, lengths: list[int], *, left: bool) -> Any:
    """The rows of a padded tensor as verl keeps them: a torch.jagged nested tensor."""
    import torch

    width = dense.shape[1]
    rows = [row[width - n:] if left else row[:n] for row, n in zip(dense, lengths, strict=True)]
    return torch.nested.nested_tensor([r.clone() for r in rows], layout=torch.jagged)


@pytest.mark.parametrize("engine", ["shape", "tiny"])
def test_verl_nested_batches(fakes: Fakes, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """compute_log_prob and update_actor as upstream's payload tests call them first: prompts
    and responses torch.jagged nested tensors beside a dense input_ids. The client pads them
    as the adapter padded input_ids, so the engine reads the batch it would read dense."""
    url, _ = fakes.launch(monkeypatch, engine, "current")
    with pytest.warns(CortexConfigWarning):
        client = create_arctic_rl_client(verl_config())
    prompts = [list(b"Count to three:"), list(b"Colour:")] * ROLLOUT_N
    responses = [[49, 44, 32, 50], [114, 101, 100], [49, 44], [98, 108, 117, 101, 33]]
    dense = rollout_batch(prompts, responses)
    meta = rollout_meta(dense, ROLLOUT_N)
    nested = {**dense, "prompts": _jagged(dense["prompts"], [len(p) for p in prompts], left=True),
              "responses": _jagged(dense["responses"], [len(r) for r in responses], left=False)}
    assert nested["prompts"].layout is nested["responses"].layout  # torch.jagged
    from_dense = _log_prob(client, dense, meta, ref=False)
    from_nested = _log_prob(client, nested, meta, ref=False)
    assert tuple(from_nested.shape) == tuple(dense["input_ids"].shape)
    if engine == "tiny":  # the same weights read the same batch
        assert np.allclose(np.asarray(from_nested), np.asarray(from_dense))
    ref = _log_prob(client, nested, {**meta, "calculate_entropy": False}, ref=True)
    assert tuple(ref.shape) == tuple(dense["input_ids"].shape)
    nested["old_log_probs"] = from_dense * dense["response_mask"]
    loss, metrics = _update(client, nested, meta)
    assert math.isfinite(loss) and metrics["lr"] == pytest.approx(3e-6)
    assert fakes.job(url, str(client.sync.job_id))["global_steps"] == 1
    asyncio.run(_await(client.shutdown()))


def test_shutdown_is_awaitable_and_plain(fakes: Fakes, monkeypatch: pytest.MonkeyPatch) -> None:
    """verl awaits shutdown(); the seed's callers call it plainly: both release the job."""
    launch_on(monkeypatch, fakes.url("shape", "proposed"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CortexConfigWarning)
        awaited = create_arctic_rl_client(verl_config())
        plain = create_arctic_rl_client(verl_config())
    asyncio.run(_await(awaited.shutdown()))
    plain.shutdown()
    assert exit_guard.guarded_jobs() == []


async def _await(awaitable: Any) -> Any:
    return await awaitable


def test_a_dump_of_the_upstream_nested_config_is_understood() -> None:
    """A foreign config's set fields (what ``coerce_config`` takes) may carry a nested
    backend without its type tag: its keys still tell the backend."""
    upstream = {"model_name": "Qwen/Qwen3-0.6B", "training_gpus": 1,
                "training": {"ds_config": {"train_batch_size": 8}}, "sampling": {"vllm": {}}}
    cortex = ArcticRLClientConfig.model_validate({**upstream, "backend": {"base_url": "http://127.0.0.1:9"}})
    assert (cortex.backend, cortex.base_url, cortex.train_batch_size) == ("cortex", "http://127.0.0.1:9", 8)
    onprem = ArcticRLClientConfig.model_validate({**upstream, "backend": {"protocol": "ray"}})
    assert (onprem.backend, onprem.comm_protocol) == ("onprem", "ray")
