"""A semantic clause catches client bugs at the first step, with no training run.

The GRPO example's broken clients (tests/e2e/test_grpo_example.py) show up as a reward
that does not rise after many steps. SEM-PPOKL-1 (before any step old and new log-probs
agree, so ``ppo_kl == 0``) sees an off-by-one in how a client slices ``old_log_probs``
out of forward-no-grad's shifted log-probs at its very first forward-backward: one GRPO
iteration of the example, through the real client and the tiny-engine fake, with a single
mini-batch so that forward-backward comes before any step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from e2e_fake import running_fake
from example_loader import load_example

from conformance.properties.whole.test_semantic import FAKE

#: Client-side slices of forward-no-grad's shifted [B, P+R] log-probs into [B, R] old
#: log-probs (response token j sits at column P+j and is scored by column P-1+j).
SLICES: dict[str, Callable[[Any, int, int], Any]] = {
    "shifted_by_one": lambda lp, p, r: lp[:, p : p + r],
    "shifted_back_by_one": lambda lp, p, r: lp[:, p - 2 : p - 2 + r],
}


@pytest.fixture(scope="module")
def toy() -> ModuleType:
    return load_example("grpo_toy")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with running_fake(engine="tiny") as fake:
        yield fake.url


def first_step(toy: ModuleType, base_url: str, hooks: Any = None) -> Any:
    """One GRPO iteration (one mini-batch: forward-backward before any step); its record."""
    cfg = toy.ToyConfig(steps=1, group_size=4, mini_batches=1, max_tokens=8)
    client = toy.make_client(base_url, cfg)
    try:
        (record,) = toy.run_grpo(client, cfg, hooks)
    finally:
        client.shutdown()
    return record


def test_correct_client_sees_ppo_kl_zero(toy: ModuleType, base_url: str) -> None:
    record = first_step(toy, base_url)
    assert abs(record.ppo_kl) <= FAKE.ppo_kl, record


@pytest.mark.parametrize("name", sorted(SLICES))
def test_off_by_one_old_log_probs_break_sem_ppokl(
    toy: ModuleType, base_url: str, name: str
) -> None:
    record = first_step(toy, base_url, toy.Hooks(old_log_probs=SLICES[name]))
    # SEM-PPOKL-1 allows 1e-6 on the fake; an off-by-one is orders of magnitude beyond.
    assert abs(record.ppo_kl) > 100 * FAKE.ppo_kl, f"{name}: ppo_kl {record.ppo_kl} at step 0"
