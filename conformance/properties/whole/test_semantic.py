"""SEM: numeric behaviour a real model must show (profile ``semantic``).

Run with ``--gs-profile semantic`` against the tiny engine (``--gs-engine tiny``) or a real
server. The shape engine synthesises its values, so against it every clause is reported
skipped with that reason (and no job is created).

All properties share the session job (training + sampling sub-jobs) and run in any order:
each one that trains does a few rounds (so optimizer momentum left by another property
cannot decide the outcome) and ends with a step, so it leaves no pending gradients behind.
Tokens are printable ASCII byte ids (valid for the tiny engine's byte vocabulary and for
any real tokenizer). Against a real server the learning rate is small and tolerances allow
for bf16 kernels; against the embedded fake they are tight.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from conformance.judging.checks import SHAPE_ENGINE_SKIP
from conformance.judging.semantic import (
    FAKE,
    KL_MAX,
    KL_WARMUP,
    PROMPTS,
    REAL,
    ROUNDS,
    Sem,
    grpo_round,
    metric_of,
    right_padded,
    rl_meta,
    rollout,
    sft_batch,
    train_on,
)
from conformance.reporting.violations import expect
from contract.clauses import checks

VIA = ["raw", "client"]


@pytest.fixture
def sem_factory(gs_target: Any, request: pytest.FixtureRequest) -> Callable[[str], Sem]:
    """``sem_factory(via)``: the semantic ops on the shared job (skips on the shape engine
    before any job is created)."""
    if gs_target.embedded and gs_target.engine == "shape":
        pytest.skip(SHAPE_ENGINE_SKIP)
    knobs = FAKE if gs_target.embedded else REAL

    def make(via: str = "raw") -> Sem:
        return Sem(
            request.getfixturevalue("gs_ops" if via == "raw" else "gs_client_ops"), via, knobs
        )

    return make


# --- properties ------------------------------------------------------------------------------


@checks("SEM-KL-1")
@pytest.mark.parametrize("via", VIA)
def test_sampler_agrees_with_forward_after_sync(
    sem_factory: Callable[[str], Sem], via: str
) -> None:
    """After training and a weight-sync, forward-no-grad scores the sampler's tokens with
    the sampler's own log-probs: k3 KL(sampler || trainer) <= 0.05."""
    import torch

    sem = sem_factory(via)
    train_on(sem, sft_batch([p + tuple(b"a" * 12) for p in PROMPTS]), KL_WARMUP)
    sem.ops.weight_sync()
    samples = sem.generate("SEM-KL-1", PROMPTS, seed=1234)
    ids, mask = right_padded([list(p) + s[0] for p, s in zip(PROMPTS, samples, strict=True)])
    shifted = sem.logprobs({"input_ids": ids, "attention_mask": mask})
    diffs = []
    for i, (prompt, (tokens, gen_lps)) in enumerate(zip(PROMPTS, samples, strict=True)):
        expect(
            "SEM-KL-1",
            len(gen_lps) == len(tokens),
            f"generate gave {len(gen_lps)} logprobs for {len(tokens)} tokens",
        )
        fwd = shifted[i, len(prompt) - 1 : len(prompt) - 1 + len(tokens)]
        diffs.append(fwd - torch.tensor(gen_lps))
    d = torch.cat(diffs).double()
    k3 = float((d.exp() - d - 1.0).mean())
    expect(
        "SEM-KL-1",
        math.isfinite(k3) and k3 <= KL_MAX,
        f"k3 KL between generate's and forward's log-probs of sampled tokens is {k3:.4g} "
        f"(> {KL_MAX}) after a weight-sync; largest gap {float(d.abs().max()):.3g} nats",
        f"generate: {[s[1][:4] for s in samples]}",
        f"forward:  {[shifted[i, len(p) - 1 : len(p) + 3].tolist() for i, p in enumerate(PROMPTS)]}",
    )


@checks("SEM-PPOKL-1")
@pytest.mark.parametrize("via", VIA)
def test_ppo_kl_is_zero_before_a_step(sem_factory: Callable[[str], Sem], via: str) -> None:
    """Old log-probs from forward-no-grad (at a sampling temperature != 1), then a grpo
    forward-backward on the same weights: old and new agree, so metrics.ppo_kl == 0 (and
    no ratio is clipped, when pg_clipfrac is reported)."""
    sem = sem_factory(via)
    roll = rollout()
    meta = rl_meta(temperature=0.7)
    adv = roll.batch["response_mask"].clone()
    result, _ = grpo_round(sem, roll, adv, meta)
    sem.step()  # leave no pending gradients behind
    ppo_kl = metric_of(result, "ppo_kl")
    if ppo_kl is None:
        pytest.skip("forward-backward reports no metrics.ppo_kl (see PROP-METRICS-1)")
    expect(
        "SEM-PPOKL-1",
        abs(ppo_kl) <= sem.k.ppo_kl,
        f"ppo_kl is {ppo_kl:.3g} (|ppo_kl| > {sem.k.ppo_kl:g}) with old log-probs taken on "
        "the same weights: forward-no-grad and forward-backward score tokens differently "
        "(temperature, shift or model)",
    )
    clipfrac = metric_of(result, "pg_clipfrac")
    expect(
        "SEM-PPOKL-1",
        clipfrac is None or clipfrac <= sem.k.ppo_kl,
        f"pg_clipfrac is {clipfrac} with old log-probs taken on the same weights: ratios "
        "new/old were clipped, so forward-no-grad and forward-backward disagree per token",
    )


@checks("SEM-LEARN-1")
def test_steps_lower_the_loss_of_a_repeated_batch(sem_factory: Callable[[str], Sem]) -> None:
    """forward-backward and a step (lr > 0) on one batch, repeated: its loss falls."""
    sem = sem_factory("raw")
    losses = train_on(sem, sft_batch([tuple(b"hello world, hello world!")] * 4), ROUNDS + 1)
    expect(
        "SEM-LEARN-1",
        losses[-1] < losses[0],
        f"the loss of a repeated batch did not fall over {ROUNDS} steps at lr "
        f"{sem.k.lr:g}: {[round(x, 5) for x in losses]}",
    )


@checks("SEM-RESTORE-1")
def test_load_restores_the_losses_of_save_time(sem_factory: Callable[[str], Sem]) -> None:
    """Save; train (losses A); load; train again (losses B): B == A, so both the weights
    and the optimizer state came back."""
    sem = sem_factory("raw")
    train_on(sem, sft_batch([tuple(b"warm up the optimizer")] * 2), 1)
    saved = sem.ops.save(f"gs-sem-{uuid.uuid4().hex[:10]}", "resumable")
    ckpt = saved.get("checkpoint_id")
    expect("SEM-RESTORE-1", isinstance(ckpt, str) and ckpt, f"save answered {saved!r}")
    batch = sft_batch([tuple(b"restore me exactly")] * 2)
    before = train_on(sem, batch, 2)
    sem.ops.load(ckpt)
    after = train_on(sem, batch, 2)
    gaps = [abs(a - b) / max(1.0, abs(a)) for a, b in zip(before, after, strict=True)]
    expect(
        "SEM-RESTORE-1",
        gaps[0] <= sem.k.same,
        f"after load the loss is {after[0]!r}, at save time it was {before[0]!r}: "
        "the weights were not restored",
    )
    expect(
        "SEM-RESTORE-1",
        gaps[1] <= sem.k.same,
        f"after load + one step the loss is {after[1]!r}, after save + one step it was "
        f"{before[1]!r}: the optimizer state was not restored",
    )


@checks("SEM-STALE-1")
def test_unsynced_sampler_keeps_its_outputs(sem_factory: Callable[[str], Sem]) -> None:
    """A seeded generate answers the same before and after training steps with no sync."""
    sem = sem_factory("raw")
    first = sem.generate("SEM-STALE-1", PROMPTS[:2], seed=99)
    train_on(sem, sft_batch(), 2)
    again = sem.generate("SEM-STALE-1", PROMPTS[:2], seed=99)
    for (t1, l1), (t2, l2) in zip(first, again, strict=True):
        expect(
            "SEM-STALE-1",
            t1 == t2,
            f"without a weight-sync the sampler's tokens changed for a fixed seed: {t1} -> {t2}",
        )
        gap = max((abs(a - b) for a, b in zip(l1, l2, strict=True)), default=0.0)
        expect(
            "SEM-STALE-1",
            gap <= sem.k.same,
            f"without a weight-sync the sampler's log-probs moved by {gap:.3g}: {l1[:4]} -> "
            f"{l2[:4]}",
        )


@checks("SEM-SHIFT-1")
def test_logprobs_column_i_scores_token_i_plus_1(sem_factory: Callable[[str], Sem]) -> None:
    """Rows equal but for the token at position j: column j-1 (which scores it) differs
    across rows, every earlier column is identical, and column j-1's probabilities of the
    distinct tokens sum to at most 1."""
    import torch

    sem = sem_factory("raw")
    base = list(b"The quick brown fox")
    j = 12
    variants = [ord(c) for c in "xyz0"]
    rows = [base[:j] + [v] + base[j + 1 :] for v in [base[j], *variants]]
    lp = sem.logprobs(
        {
            "input_ids": torch.tensor(rows),
            "attention_mask": torch.ones(len(rows), len(base), dtype=torch.long),
        }
    )
    expect(
        "SEM-SHIFT-1",
        tuple(lp.shape) == (len(rows), len(base)),
        f"logprobs shape {list(lp.shape)} for input_ids {[len(rows), len(base)]}",
    )
    earlier = float((lp[:, : j - 1] - lp[:1, : j - 1]).abs().max())
    expect(
        "SEM-SHIFT-1",
        earlier <= sem.k.same,
        f"changing input_ids[:, {j}] changed columns before {j - 1} by {earlier:.3g}: "
        "a column sees tokens after the one it scores",
    )
    spread = float(lp[:, j - 1].max() - lp[:, j - 1].min())
    moved_j = float(lp[:, j].max() - lp[:, j].min())
    expect(
        "SEM-SHIFT-1",
        spread > sem.k.changed,
        f"changing input_ids[:, {j}] left column {j - 1} unchanged (spread {spread:.3g}; "
        f"column {j} moved {moved_j:.3g}): logprobs[:, i] does not score input_ids[:, i+1]",
        f"column {j - 1}: {lp[:, j - 1].tolist()}",
    )
    total = float(lp[:, j - 1].exp().sum())
    expect(
        "SEM-SHIFT-1",
        total <= 1.0 + 1e-3,
        f"column {j - 1} gives {len(rows)} distinct next tokens probabilities summing to "
        f"{total:.4f} > 1: they are not log p(input_ids[:, {j}] | prefix)",
    )


@checks("SEM-SIGN-1")
def test_policy_gradient_raises_positive_advantage_responses(
    sem_factory: Callable[[str], Sem],
) -> None:
    """grpo rounds (fresh old log-probs, forward-backward, step) with advantage +1 on every
    response token: the responses' total log-probability rises."""
    sem = sem_factory("raw")
    roll = rollout()
    meta = rl_meta()
    adv = roll.batch["response_mask"].clone()
    start = None
    for _ in range(ROUNDS):
        _, total = grpo_round(sem, roll, adv, meta)
        start = total if start is None else start
        sem.step()
    end = roll.response_total(sem.logprobs(roll.batch, meta))
    expect(
        "SEM-SIGN-1",
        start is not None and end > start,
        f"{ROUNDS} policy-gradient steps with positive advantages moved the responses' "
        f"log-probability from {start:.4f} to {end:.4f} (it must rise)",
    )
