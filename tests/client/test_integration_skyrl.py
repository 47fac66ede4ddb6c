"""SkyRL's Arctic RL integration (NovaSky-AI/SkyRL ``integrations/arctic_rl/``, its Harbor
bridge included) replayed against the fake, call by call, in the order it makes them.

The facts, in our words: SkyRL builds a flat on-prem config (``backend="local"``,
``comm_protocol="ray"``) whose rates and sizes live in ``ds_config`` / ``training_config`` /
``vllm_config``; its driver creates the client with one argument and reads
``reconnect_config()``, ``comm_protocol``, ``get_server_state()`` and the three job-id
properties at once; a Ray worker rebuilds the client with two positional arguments from that
config. The worker awaits ``generate(prompts=, sampling_params=)`` and iterates the outputs
with ``.get("token_ids")``, ``.get("text")``, ``.get("finish_reason")``; it runs
``fwd_no_grad(payload, reference_model=False)`` and reads ``["batch"]`` for ``logprobs``
(or ``log_probs``), then ``fwd_bwd(payload)``, drops ``job_id`` and reads
``.get("metrics", answer)`` as numbers, then ``step()`` and reads the grad norm from
``.get("metrics", answer)``. Colocated, the weight sync is ``empty_training_cache()``,
``wake_training()``, ``wake_inference()``, ``sync_weights(cuda_ipc=, low_memory=)``, the
inference engine sleeps with ``sleep_inference(level=2)`` and wakes with
``wake_inference(tags=)``; checkpoints are ``save_checkpoint()``. Nobody calls
``shutdown()``: the driver process simply exits.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from integration_support import (
    SETUPS,
    Fakes,
    launch_on,
    rollout_batch,
    rollout_meta,
)

from client import ArcticRLClientConfig, create_arctic_rl_client, exit_guard
from client.config import ClientConfig
from client.env import apply_env_override
from client.jobspec import CortexConfigWarning, plan_job
from client.rest import CortexRestClient
from contract.routes import Profile

#: The not-sent warning is asserted where it matters; elsewhere it is expected noise.
pytestmark = pytest.mark.filterwarnings("ignore::client.jobspec.CortexConfigWarning")
ROOT = Path(__file__).resolve().parents[2]
N_SAMPLES = 2
PROMPT_TEXTS = ["Count to three:", "Name a colour:"]


def skyrl_config(**over: Any) -> ArcticRLClientConfig:
    """The flat config SkyRL's builder hands over: lr 1.7e-6, 1536 tokens (512 prompt + 1024
    response), a 16-row optimizer batch, clipping 1.0, vLLM and ZoRRO worker settings."""
    fields: dict[str, Any] = dict(
        model_name="Qwen/Qwen3-0.6B", backend="local", comm_protocol="ray",
        checkpoint_path="/ckpt/run", training_gpus=2, sampling_gpus=2, log_prob_gpus=0,
        log_prob_engine="vllm", colocate=True,
        vllm_config={"tensor_parallel_size": 1, "gpu_memory_utilization": 0.8,
                     "max_model_len": 1536, "max_num_seqs": 256, "enforce_eager": True,
                     "enable_chunked_prefill": True, "enable_prefix_caching": True,
                     "forest_cascade_attn_configs": "{}"},
        ds_config={"train_micro_batch_size_per_gpu": 4, "train_batch_size": 16,
                   "gradient_accumulation_steps": 2, "sequence_parallel_size": 1,
                   "bf16": {"enabled": True}, "gradient_clipping": 1.0,
                   "optimizer": {"type": "AdamW", "params": {"lr": 1.7e-6, "betas": [0.9, 0.999],
                                                             "eps": 1e-8, "weight_decay": 0.01}},
                   "zero_optimization": {"stage": 0, "offload_optimizer": {"device": "none"}}},
        ds_worker_config={"use_liger": True, "enable_gradient_checkpointing": True,
                          "attn_implementation": "flash_attention_2", "zorro_train_enable": True,
                          "rollout_n": 4},
        training_config={"training_horizon": 1000, "max_length": 1536,
                         "optimizer": {"lr": 1.7e-6, "weight_decay": 0.01, "gradient_clipping": 1.0},
                         "lr_scheduler": {"type": "constant", "warmup_ratio": 0.0},
                         "model_config": None, "attn_implementation": "flash_attention_2"},
        arctic_inference_config=None, full_determinism=False, seed=42,
        startup_timeout=300.0, server_logs=False)
    fields.update(over)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # backend="local"
        return ArcticRLClientConfig(**fields)


def run(coro: Any) -> Any:
    """SkyRL's dispatch blocks on each coroutine with a fresh event loop."""
    return asyncio.run(coro)


# --- the config builder's values reach the create-job body ----------------------------------


def test_skyrl_config_values_reach_the_create_job_body() -> None:
    cfg = apply_env_override(skyrl_config(), {"ARCTIC_RL_BACKEND": "cortex",
                                              "CORTEX_BASE_URL": "http://127.0.0.1:9"})
    assert cfg.comm_protocol == "ray"  # the driver reads it to decide on get_server_state()
    plan = plan_job(cfg)
    training, sampling = plan.body["sub_job_configs"]
    tc = training["training_config"]
    assert tc["optimizer"] == {"name": "AdamW", "lr": 1.7e-6, "betas": [0.9, 0.999], "eps": 1e-8,
                               "weight_decay": 0.01}
    assert (tc["max_seq_len"], tc["train_batch_size"], tc["n_gpus"]) == (1536, 16, 2)
    assert tc["gradient_clipping"] == 1.0
    assert (tc["activation_checkpointing"], tc["model_provider"], tc["attn_implementation"]) == (
        True, "liger", "flash_attention_2")
    assert tc["ds_config"]["zero_optimization"]["stage"] == 0  # spec §8.2 passthrough
    assert "optimizer" not in tc["ds_config"] and "sp_size" not in tc  # lifted once; 1 = off
    inference = sampling["inference_config"]
    assert (inference["max_seq_len"], inference["n_gpus"]) == (1536, 2)
    assert inference["vllm_config"]["gpu_memory_utilization"] == 0.8
    assert "tensor_parallel_size" not in inference["vllm_config"]  # n_gpus owns it on this wire
    assert {s["seed"] for s in plan.body["sub_job_configs"]} == {42}
    assert set(plan.not_sent) == {"checkpoint_path", "ds_worker_config.zorro_train_enable",
                                  "ds_worker_config.rollout_n", "training_config.training_horizon",
                                  "training_config.lr_scheduler"}
    assert set(plan.not_applicable) == {"comm_protocol", "colocate", "log_prob_engine",
                                        "startup_timeout", "server_logs"}
    with pytest.warns(CortexConfigWarning) as seen:
        plan.warn()
    assert len(seen) == 1 and all(name in str(seen[0].message) for name in plan.not_sent)


# --- the whole loop, driver and worker, on every engine and profile --------------------------


def _generate(worker: Any) -> tuple[list[list[int]], list[list[int]]]:
    """ArcticGenerator: text prompts, n samples each, outputs read with ``.get``."""
    prompts = [t for t in PROMPT_TEXTS for _ in range(N_SAMPLES)]
    outputs = run(worker.generate(prompts=prompts, sampling_params={
        "temperature": 1.0, "max_tokens": 4, "top_p": 1.0}))
    assert isinstance(outputs, list) and len(outputs) == len(prompts)
    responses = []
    for output in outputs:
        token_ids, text = output.get("token_ids", []), output.get("text", "")
        assert token_ids and isinstance(text, str)
        assert output.get("finish_reason") in ("stop", "length")
        responses.append([int(t) for t in token_ids])
    return [list(t.encode()) for t in prompts], responses


def _train(worker: Any, prompts: list[list[int]], responses: list[list[int]]) -> dict[str, Any]:
    """_ArcticDispatch.forward_backward + optim_step: old log-probs, fwd-bwd, step."""
    batch = rollout_batch(prompts, responses)
    meta = rollout_meta(batch, N_SAMPLES)
    fwd_batch = {k: batch[k] for k in ("input_ids", "attention_mask", "prompts", "position_ids")}
    no_grad = run(worker.fwd_no_grad({"batch": fwd_batch, "meta": {**meta, "calculate_entropy": False},
                                      "processing": {"post": ["compute_entropy_and_logprobs"],
                                                     "loss_fn": None}}, reference_model=False))
    logprobs = no_grad["batch"].get("logprobs")
    if logprobs is None:
        logprobs = no_grad["batch"].get("log_probs")
    assert tuple(logprobs.shape) == tuple(batch["input_ids"].shape)
    batch["old_log_probs"] = logprobs * batch["response_mask"]
    answer = run(worker.fwd_bwd({"batch": batch, "meta": meta, "processing": {
        "post": ["apply_temperature", "compute_entropy_and_logprobs"], "loss_fn": "verl_grpo"}}))
    answer.pop("job_id", None)
    status = answer.get("metrics", answer)
    step = run(worker.step())
    grad_norm = step.get("metrics", step).get("grad_norm")
    return {"status": status, "grad_norm": grad_norm}


def _sync_colocated(worker: Any) -> None:
    """save_weights_for_sampler with colocate=True, then the inference stub's sleep/wake."""
    for call in (worker.empty_training_cache(), worker.wake_training(), worker.wake_inference()):
        assert run(call) == {}
    run(worker.sync_weights(cuda_ipc=True, low_memory=False))
    assert run(worker.sleep_inference(level=2)) == {}
    assert run(worker.wake_inference(tags=None)) == {}


@pytest.mark.parametrize(("engine", "profile"), SETUPS)
def test_skyrl_driver_and_worker_loop(fakes: Fakes, monkeypatch: pytest.MonkeyPatch,
                                      engine: str, profile: Profile) -> None:
    url, before = fakes.launch(monkeypatch, engine, profile)
    rl_config = skyrl_config(training_gpus=1, sampling_gpus=1)
    with pytest.warns(CortexConfigWarning):
        pre_client = create_arctic_rl_client(rl_config)  # the driver's pre-init
    reconnect_cfg = pre_client.reconnect_config()
    server_state = pre_client.get_server_state() if rl_config.comm_protocol == "ray" else None
    ids = (pre_client.training_job_id, pre_client.sampling_job_id, pre_client.log_prob_job_id)
    assert ids[0] and ids[1] and ids[2] is None and server_state is None
    job_id = pre_client.sync.job_id
    assert job_id is not None and reconnect_cfg.job_id == job_id

    worker = create_arctic_rl_client(reconnect_cfg, server_state)  # the Ray worker reattaches
    assert (worker.training_job_id, worker.sampling_job_id, worker.log_prob_job_id) == ids
    assert worker.sync.job_ids is not None and not worker.sync.job_ids.created

    prompts, responses = _generate(worker)
    first = _train(worker, prompts, responses)
    _sync_colocated(worker)
    second = _train(worker, *_generate(worker))
    run(worker.save_checkpoint())
    for result in (first, second):
        assert isinstance(result["status"]["loss"], float) and math.isfinite(result["status"]["loss"])
        for value in (result["status"]["grad_norm"], result["grad_norm"]):
            assert isinstance(value, float)
            assert math.isfinite(value) == (profile == "proposed")  # current: NaN, not reported
    job = fakes.job(url, job_id)
    assert (job["global_steps"], job["forward_backward_executions"], len(job["checkpoints"])) == (2, 2, 1)
    assert max(job["weight_versions"].values()) == 1
    assert set(fakes.jobs(url)) - before == {job_id}  # the worker created no second job

    # No shutdown(): at exit only the driver, which created the job, cancels it.
    assert exit_guard.guarded_jobs() == [job_id]
    exit_guard.cancel_guarded()
    assert fakes.job(url, job_id)["status"] in ("cancelling", "cancelled")


# --- the Harbor bridge (SkyRL PR #1879) and the fully-async trainer --------------------------


@pytest.mark.parametrize(("engine", "profile"), [("shape", "proposed"), ("tiny", "current")])
def test_harbor_bridge_calls(fakes: Fakes, monkeypatch: pytest.MonkeyPatch,
                             engine: str, profile: Profile) -> None:
    """The OpenAI shim asks for top-1 logprobs and reads prompt_len/generation_len with
    defaults; it resets the prefix cache with reset_running_requests= (falling back to no
    argument on a TypeError), and the fully-async trainer syncs with no arguments."""
    launch_on(monkeypatch, fakes.url(engine, profile))
    client = create_arctic_rl_client(skyrl_config(training_gpus=1, sampling_gpus=1,
                                                  ds_worker_config=None, training_config=None))
    results = run(client.generate(prompts=["hello"] * 2, sampling_params={
        "max_tokens": 3, "temperature": 0.0, "logprobs": 1}))
    assert results and int(results[0].get("prompt_len") or 5) > 0
    assert sum(r.get("generation_len", 0) or 0 for r in results) >= 0
    for r in results:
        token_ids = list(r.get("token_ids") or [])
        assert len(r.get("logprobs") or []) == len(token_ids) > 0
        assert isinstance(r.get("text", ""), str)
    assert isinstance(run(client.reset_prefix_cache(reset_running_requests=False)), dict)
    run(client.sync_weights())
    assert run(client.sleep_inference(level=2)) == {} == run(client.wake_inference(tags=["weights"]))
    client.shutdown()


# --- a driver that exits without shutdown(), for real --------------------------------------


_DRIVER = """
import warnings, sys
sys.path.insert(0, {tests!r})
from test_integration_skyrl import skyrl_config
from client import create_arctic_rl_client
warnings.simplefilter("ignore")
client = create_arctic_rl_client(skyrl_config(training_gpus=1, sampling_gpus=1))
print(client.sync.job_id)
"""


@pytest.mark.parametrize("keep", [False, True])
def test_driver_exit_without_shutdown(fakes: Fakes, monkeypatch: pytest.MonkeyPatch,
                                      keep: bool) -> None:
    """The driver process ends without shutdown(): its job is cancelled at exit, unless
    CORTEX_CANCEL_ON_EXIT=0 keeps it for another process."""
    url = fakes.url("shape", "current")
    launch_on(monkeypatch, url)
    if keep:
        monkeypatch.setenv("CORTEX_CANCEL_ON_EXIT", "0")
    code = _DRIVER.format(tests=str(Path(__file__).parent))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, timeout=60)
    job_id = out.stdout.strip().splitlines()[-1]
    status = fakes.job(url, job_id)["status"]
    if keep:
        assert status == "running"
        CortexRestClient(ClientConfig(base_url=url)).cancel_job(job_id)
    else:
        assert status in ("cancelling", "cancelled")
        assert "exiting without shutdown()" in out.stderr
