"""Reattaching from ``reconnect_config()`` (in-process and from another process), and the
legacy async surface driven exactly as the integrations drive it, through the env override."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from e2e_fake import FAST, Fake

from client import ClientConfig, create_arctic_rl_client, create_client
from client.transports.base import COLOCATION_OPS

ROOT = Path(__file__).resolve().parents[2]


def test_reattach_from_a_second_client(shared_fake: Fake) -> None:
    first = create_client(shared_fake.config())
    first.start()
    assert first.step()["global_steps"] == 1
    jobs_before = set(shared_fake.admin.state()["jobs"])

    second = create_client(first.reconnect_config())
    second.start()
    assert (second.job_id, second.training_job_id, second.sampling_job_id) == (
        first.job_id, first.training_job_id, first.sampling_job_id)
    assert second.step()["global_steps"] == 2
    assert set(shared_fake.admin.state()["jobs"]) == jobs_before  # no second job was created

    second.shutdown()  # a reattached client never cancels the job it did not create
    assert shared_fake.admin.state()["jobs"][first.job_id]["status"] == "running"
    first.shutdown()
    assert shared_fake.admin.state()["jobs"][first.job_id]["status"] in ("cancelled", "cancelling")


def test_reattach_from_sub_job_ids_only(shared_fake: Fake) -> None:
    with create_client(shared_fake.config()) as first:
        first.start()
        cfg = shared_fake.config(training_job_id=first.training_job_id)
        with create_client(cfg) as second:
            assert second.step()["global_steps"] == 1
            assert second.job_id == first.job_id


def test_reattach_from_another_process_without_fake_or_torch(shared_fake: Fake) -> None:
    """A worker process gets the reconnect config as JSON and runs a JSON-only call path:
    the client alone, no fake_gs and no torch in that process."""
    first = create_client(shared_fake.config())
    first.start()
    code = (
        "import json, sys\n"
        "from client import ClientConfig, create_client\n"
        "cfg = ClientConfig.model_validate_json(sys.stdin.read())\n"
        "with create_client(cfg) as c:\n"
        "    step = c.step()\n"
        "    saved = c.save_checkpoint()\n"
        "    rest = c.transport.rest\n"
        "    listed = rest.list_checkpoints(c.job_id)['checkpoints']\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "               {'fake_gs', 'torch', 'safetensors', 'starlette', 'uvicorn', 'hypothesis'})\n"
        "print(json.dumps({'job': c.job_id, 'steps': step['global_steps'],\n"
        "                  'saved': saved['checkpoint_id'], 'listed': [x['checkpoint_id'] for x in listed],\n"
        "                  'heavy': heavy}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], input=first.reconnect_config().model_dump_json(),
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["heavy"] == []
    assert seen["job"] == first.job_id and seen["steps"] == 1
    assert seen["saved"] in seen["listed"]
    assert shared_fake.admin.state()["jobs"][first.job_id]["status"] == "running"
    first.shutdown()


def _verl_payload() -> dict[str, Any]:
    b, p, r = 2, 4, 6
    ids = torch.randint(1, 500, (b, p + r), generator=torch.Generator().manual_seed(2))
    return {
        "batch": {"input_ids": ids, "attention_mask": torch.ones(b, p + r, dtype=torch.long),
                  "position_ids": torch.arange(p + r).expand(b, -1).contiguous(),
                  "prompts": ids[:, :p].clone(), "responses": ids[:, p:].clone(),
                  "response_mask": torch.ones(b, r), "advantages": torch.zeros(b, r),
                  "old_log_probs": torch.zeros(b, r)},
        "meta": {"pad_token_id": 0, "rollout_n": 2, "calculate_entropy": True},
        "processing": {"post": [], "loss_fn": "verl_grpo"},
    }


def test_legacy_async_surface_through_env_override(shared_fake: Fake,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTIC_RL_BACKEND", "cortex")
    monkeypatch.setenv("CORTEX_BASE_URL", shared_fake.url)
    monkeypatch.setenv("CORTEX_MAX_SEQ_LEN", "128")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        legacy = ClientConfig(backend="local", colocate=True, sample_gpus=1, job_name="grpo",
                              log_prob_engine="vllm", ds_config={"zero": 3}, **FAST)
    client = create_arctic_rl_client(legacy, None)
    assert client.config.backend == "cortex" and client.config.max_seq_len == 128

    async def integration() -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["fb"] = await client.fwd_bwd(_verl_payload(), reference_model=False,
                                         context={"step": 0}, router_replay=None)
        out["skyrl_fb"] = await client.fwd_bwd(_verl_payload(), post_processors=[])
        out["old"] = await client.fwd_no_grad(_verl_payload(), reference_model=False)
        out["step"] = await client.step()
        out["step_lr"] = await client.step(learning_rate=1e-6)
        out["sync"] = await client.sync_weights(cuda_ipc=True, low_memory=False)
        out["gen"] = await client.generate([[1, 2, 3], [4, 5]], {"max_tokens": 4})
        out["save"] = await client.save_checkpoint({"global_step": 2}, "/ckpt/global_step2")
        out["weights"] = await client.save_weights(path="/hf")
        out["reset"] = await client.reset_prefix_cache()
        out["colo"] = [await getattr(client, op)() for op in sorted(COLOCATION_OPS)]
        out["wake"] = await client.wake_inference(tags=["weights"])
        out["sleep"] = await client.sleep_inference(level=1)
        return out

    out = asyncio.run(integration())
    assert out["fb"]["loss"] == out["fb"]["avg_loss"]
    assert out["fb"].get("grad_norm") is not None
    assert out["old"]["batch"]["log_probs"].shape == (2, 10)
    assert out["old"]["batch"]["logprobs"].shape == (2, 10)
    assert out["step"].get("metrics", out["step"]).get("grad_norm") is not None
    # The rate the step asked for, as the backend's scheduler reports it: spec §6.2 leaves
    # last_lr to it (a number or one per parameter group; the any dialect warms up).
    last_lr = out["step_lr"]["last_lr"]
    assert all(0 < lr <= 1e-6 for lr in (last_lr if isinstance(last_lr, list) else [last_lr]))
    assert out["sync"]["weight_version"] >= 1
    assert [len(r["token_ids"]) > 0 for r in out["gen"]] == [True, True]  # the list of outputs
    assert out["save"]["checkpoint_id"] and out["weights"]["checkpoint_id"]
    assert out["colo"] == [{}] * len(COLOCATION_OPS)
    assert out["wake"] == out["sleep"] == {}
    assert client.get_server_state() is None
    assert client.config.colocate is True and client.config.ds_config == {"zero": 3}
    again = client.reconnect_config()
    assert again.job_id and again.training_job_id == client.training_job_id
    client.shutdown()
    assert shared_fake.admin.state()["jobs"][again.job_id]["status"] in ("cancelled", "cancelling")
