"""The GRPO example learns through the real client and fake; broken clients visibly do not.

A shortened ``examples/grpo_toy.py`` run against ``python -m fake_gs --engine tiny`` over
loopback HTTP must raise the mean reward clearly. Three deliberately broken clients are
injected through the loop's hooks; each is caught by the reward staying near zero:

- advantages negated (the policy is pushed away from what earns reward);
- old log-probs shifted by one (the classic shifted-convention slip: the PPO ratio is
  meaningless, clipping eats the gradient);
- weight sync skipped (the sampler never sees the updates).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from example_loader import load_example

pytest.importorskip("torch")
if importlib.util.find_spec("fake_gs.__main__") is None:  # pragma: no cover - during bring-up
    pytest.skip("the fake server CLI (python -m fake_gs) is not available", allow_module_level=True)

STEPS = 16

pytestmark = pytest.mark.xdist_group("grpo_example")


@pytest.fixture(scope="module")
def toy() -> ModuleType:
    return load_example("grpo_toy")


@pytest.fixture(scope="module")
def base_url(toy: ModuleType) -> Iterator[str]:
    with toy.fake_server(seed=0) as url:
        yield url


def run(toy: ModuleType, base_url: str, hooks: Any = None) -> list[float]:
    cfg = toy.ToyConfig(steps=STEPS)
    client = toy.make_client(base_url, cfg)
    try:
        records = toy.run_grpo(client, cfg, hooks)
    finally:
        client.shutdown()
    return [r.mean_reward for r in records]


def start_end(rewards: list[float]) -> tuple[float, float]:
    return sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3


def test_reward_rises_through_client_and_fake(toy: ModuleType, base_url: str) -> None:
    rewards = run(toy, base_url)
    start, end = start_end(rewards)
    assert start < 0.05 and end > 0.5, rewards


BROKEN: dict[str, dict[str, Any]] = {
    "advantages_negated": {"advantages": lambda adv: -adv},
    "old_log_probs_shifted_by_one": {"old_log_probs": lambda lp, p, r: lp[:, p : p + r]},
    "weight_sync_skipped": {"sync_weights": lambda client: None},
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_client_fails_to_learn(toy: ModuleType, base_url: str, name: str) -> None:
    rewards = run(toy, base_url, toy.Hooks(**BROKEN[name]))
    _, end = start_end(rewards)
    assert end < 0.2, f"{name} still learned: {rewards}"
