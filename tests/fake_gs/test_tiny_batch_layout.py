"""The tiny engine reads a training body the way the service does (spec §10.3).

ArcticTraining's recipe puts ``advantages``, ``loss_mask`` and loss settings such as
``eps_clip`` in a top-level ``context`` block beside ``kwargs``; the engine once ignored
that block (failing with "needs 'advantages'") and read only ``clip_ratio``. The same
GRPO data in that layout and in the verl envelope must give the same loss and gradients.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
import torch  # noqa: E402
from test_tiny_engine import sub_jobs, verl_batch  # noqa: E402

from fake_gs.engines.batch_layout import normalize  # noqa: E402
from fake_gs.engines.tiny import TinyEngine  # noqa: E402

pad = torch.nn.functional.pad


def fresh() -> TinyEngine:
    eng = TinyEngine(seed=7)
    eng.create_job("job", sub_jobs(), seed=11)
    return eng


def off_policy_verl(engine: TinyEngine, clip: float = 0.2) -> tuple[dict[str, Any], int, int]:
    """A verl batch whose old log-probs are off the current policy, so clipping bites."""
    payload, p, r = verl_batch(engine)
    batch = payload["batch"]
    noise = torch.randn(batch["old_log_probs"].shape, generator=torch.Generator().manual_seed(3))
    batch["old_log_probs"] = batch["old_log_probs"] + 0.4 * noise * batch["response_mask"]
    payload["meta"]["actor_config"] = {"clip_ratio": clip}
    return payload, p, r


def arctic_from_verl(payload: dict[str, Any], p: int, eps_clip: float = 0.2) -> dict[str, Any]:
    """The same data in ArcticTraining's layout: token-aligned tensors in ``context``, the
    old log-probs in the shifted convention (column i about token i + 1)."""
    b = payload["batch"]
    aligned_old = pad(b["old_log_probs"], (p, 0))
    shifted_old = pad(aligned_old[:, 1:], (0, 1))
    return {
        "args": [],
        "kwargs": {k: b[k] for k in ("input_ids", "attention_mask", "position_ids")},
        "context": {
            "advantages": pad(b["advantages"], (p, 0)),
            "loss_mask": pad(b["response_mask"], (p, 0)),
            "old_log_probs_shifted": shifted_old,
            "eps_clip": eps_clip,
            "temperature": 1.0,
        },
        "processing": {"loss_fn": "grpo", "post": []},
    }


def grads(engine: TinyEngine) -> list[torch.Tensor]:
    trainer = engine._jobs["job"].trainer
    assert trainer is not None
    return [prm.grad.clone() for prm in trainer.model.parameters() if prm.grad is not None]


def test_arctic_context_and_verl_give_the_same_loss_and_gradients() -> None:
    verl_engine, arctic_engine = fresh(), fresh()
    verl, p, _ = off_policy_verl(verl_engine)
    arctic = arctic_from_verl(verl, p)
    a = verl_engine.forward_backward("job", verl)
    b = arctic_engine.forward_backward("job", arctic)
    assert a["metrics"]["pg_clipfrac"] > 0  # the clip is active, so eps_clip matters here
    assert b["avg_loss"] == pytest.approx(a["avg_loss"], abs=1e-6)
    for key in ("pg_loss", "ppo_kl", "pg_clipfrac", "pg_clipfrac_lower", "grad_norm"):
        assert b["metrics"][key] == pytest.approx(a["metrics"][key], abs=1e-6), key
    for ga, gb in zip(grads(verl_engine), grads(arctic_engine), strict=True):
        assert torch.allclose(ga, gb, atol=1e-6)


def test_eps_clip_is_read_and_means_clip_ratio() -> None:
    eng = fresh()
    verl, p, _ = off_policy_verl(eng, clip=0.05)
    tight = eng.forward_backward("job", arctic_from_verl(verl, p, eps_clip=0.05))
    loose = eng.forward_backward("job", arctic_from_verl(verl, p, eps_clip=0.5))
    same = eng.forward_backward("job", verl)
    assert tight["metrics"]["pg_clipfrac"] > loose["metrics"]["pg_clipfrac"]
    assert tight["avg_loss"] != pytest.approx(loose["avg_loss"], abs=1e-6)
    assert tight["avg_loss"] == pytest.approx(same["avg_loss"], abs=1e-6)


def test_context_advantages_no_longer_missing() -> None:
    """The failure the service's own recipe hit: advantages only in context."""
    eng = fresh()
    verl, p, _ = off_policy_verl(eng)
    arctic = arctic_from_verl(verl, p)
    del arctic["context"]["old_log_probs_shifted"]  # on-policy step: old = current
    out = eng.forward_backward("job", arctic)
    assert out["metrics"]["ppo_kl"] == pytest.approx(0.0, abs=1e-6)
    assert out["metrics"]["grad_norm"] > 0


def test_a_tensor_given_twice_must_agree() -> None:
    eng = fresh()
    verl, p, _ = off_policy_verl(eng)
    arctic = arctic_from_verl(verl, p)
    arctic["kwargs"]["advantages"] = -arctic["context"]["advantages"]
    with pytest.raises(ValueError, match="advantages"):
        eng.forward_backward("job", arctic)
    arctic["kwargs"]["advantages"] = arctic["context"]["advantages"].clone()
    eng.forward_backward("job", arctic)  # the same values twice are fine


def test_settings_precedence_and_aliases() -> None:
    ids = torch.zeros((1, 4), dtype=torch.long)
    body = {
        "kwargs": {"input_ids": ids},
        "context": {"eps_clip": 0.1, "kl_coef": 0.5, "clip_ratio_high": 0.3},
        "processing": {"loss_fn": "grpo", "config": {"eps_clip_high": 0.4}},
    }
    layout = normalize(body)
    assert layout.loss_config["clip_ratio"] == 0.1
    assert layout.loss_config["kl_loss_coef"] == 0.5
    assert layout.loss_config["clip_ratio_high"] == 0.4  # processing.config over context
    with pytest.raises(ValueError, match="_shifted"):
        normalize({"kwargs": {"input_ids": ids}, "context": {"old_log_probs_shifted": [[0.0]]}})
