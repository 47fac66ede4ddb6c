"""The example's GRPO loop learns on the tiny engine in-process.

No server, no client: an adapter maps the RL client's ops straight onto the engine, so this
pins the engine semantics the example depends on. ``tests/e2e/test_grpo_example.py`` runs
the same loop through the client and the fake over HTTP, with the broken-client variants.
"""

from __future__ import annotations

from typing import Any

import pytest
from example_loader import load_example

torch = pytest.importorskip("torch")

from contract.models import GenerateRequest, SubJobConfig  # noqa: E402
from fake_gs.engines.tiny import TinyEngine  # noqa: E402


class EngineClient:
    """The ArcticRLClient ops the loop uses, answered by the engine directly."""

    def __init__(self, lr: float, seed: int = 0) -> None:
        self.engine = TinyEngine(seed)
        cfgs = [
            {
                "job_type": "training",
                "model_name": "Qwen/Qwen3-0.6B",
                "training_config": {
                    "optimizer": {"name": "AdamW", "lr": lr},
                    "max_seq_len": 256,
                    "train_batch_size": 32,
                    "n_gpus": 1,
                },
            },
            {
                "job_type": "sampling",
                "model_name": "Qwen/Qwen3-0.6B",
                "inference_config": {"max_seq_len": 256, "n_gpus": 1},
            },
        ]
        self.engine.create_job("j", [SubJobConfig.model_validate(c) for c in cfgs], seed)

    def generate(self, prompts: list[Any], sampling_params: Any = None) -> dict[str, Any]:
        req = GenerateRequest(prompts=prompts, sampling_params=sampling_params)
        return {"results": self.engine.generate("j", req)}

    def fwd_no_grad(self, payload: dict[str, Any], reference_model: bool = False) -> dict[str, Any]:
        return {
            "batch": self.engine.forward("j", payload, reference=reference_model)["model_outputs"]
        }

    def fwd_bwd(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self.engine.forward_backward("j", payload)

    def step(self, learning_rate: float | None = None) -> dict[str, Any]:
        return self.engine.step("j", learning_rate)

    def sync_weights(self, **_: Any) -> dict[str, Any]:
        self.engine.weight_sync("j", "", [])
        return {}


def run(hooks: Any = None, steps: int = 16) -> list[float]:
    toy = load_example("grpo_toy")
    cfg = toy.ToyConfig(steps=steps)
    records = toy.run_grpo(EngineClient(cfg.lr, cfg.seed), cfg, hooks)
    return [r.mean_reward for r in records]


def test_grpo_loop_learns_in_process() -> None:
    rewards = run()
    start, end = sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3
    assert start < 0.05 and end > 0.5, rewards
