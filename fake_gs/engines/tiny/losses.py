"""The tiny engine's losses: verl's PPO-clip policy loss with its KL and entropy terms, and SFT.

Each term is its own function so the order of operations (and so every number) stays
that of verl's actor; ``quirks`` are the engine seam points in force (``fake_gs/controls/seams.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from fake_gs.controls.seams import EngineQuirk
from fake_gs.engines.tiny.batch import Batch, as_tensor
from fake_gs.engines.tiny.byte_tokenizer import VOCAB_SIZE
from fake_gs.engines.tiny.model import TinyLM, shifted_entropy, shifted_logprobs

METRIC_KEYS = ("pg_loss", "ppo_kl", "pg_clipfrac", "pg_clipfrac_lower", "kl_loss", "kl_coef")

Loss = tuple[torch.Tensor, dict[str, float]]


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """verl's agg_loss: token-mean (default), seq-mean-token-mean, seq-mean-token-sum."""
    if mode == "seq-mean-token-mean":
        per_seq = (values * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)
        return (
            per_seq[mask.sum(-1) > 0].mean()
            if bool((mask.sum(-1) > 0).any())
            else per_seq.sum() * 0
        )
    if mode == "seq-mean-token-sum":
        return (values * mask).sum(-1).mean()
    return masked_mean(values, mask)


def rl_loss(batch: Batch, logits: torch.Tensor, reference: TinyLM, quirks: frozenset[EngineQuirk]) -> Loss:
    """verl's vanilla PPO-clip policy loss (dual-clip for negative advantages) + KL loss."""
    logp = batch.token_logprobs(logits)
    loss, metrics = _policy_loss(batch, logp, EngineQuirk.ADVANTAGES_FLIPPED in quirks)
    if batch.loss_config.get("use_kl_loss"):
        loss = loss + _kl_loss(batch, logp, reference, metrics)
    return _entropy_bonus(batch, logits, loss, metrics), metrics


def _policy_loss(batch: Batch, logp: torch.Tensor, advantages_flipped: bool) -> Loss:
    """The clipped surrogate; ``old_log_probs`` default to the current ones (ratio 1)."""
    cfg = batch.loss_config
    clip = float(cfg.get("clip_ratio", 0.2))
    low = float(cfg.get("clip_ratio_low") or clip)
    high = float(cfg.get("clip_ratio_high") or clip)
    clip_c = float(cfg.get("clip_ratio_c", 3.0))
    mask = batch.response_mask
    adv = batch.aligned("advantages")
    if adv is None:
        raise ValueError(f"loss_fn {batch.loss_fn!r} needs 'advantages'")
    if advantages_flipped:
        adv = -adv
    old = batch.aligned("old_log_probs")
    if old is None:
        old = logp.detach()
    neg_kl = (logp - old).clamp(-20.0, 20.0)
    ratio = neg_kl.exp()
    pg1 = -adv * ratio
    pg2 = -adv * ratio.clamp(1.0 - low, 1.0 + high)
    clipped1 = torch.maximum(pg1, pg2)
    pg3 = -adv * clip_c
    pg_losses = torch.where(adv < 0, torch.minimum(pg3, clipped1), clipped1)
    pg_loss = aggregate(pg_losses, mask, str(cfg.get("loss_agg_mode", "token-mean")))
    return pg_loss, {
        "pg_loss": float(pg_loss.detach()),
        "ppo_kl": float(masked_mean(-neg_kl.detach(), mask)),
        "pg_clipfrac": float(masked_mean((pg2 > pg1).float(), mask)),
        "pg_clipfrac_lower": float(masked_mean(((clipped1 > pg3) & (adv < 0)).float(), mask)),
        "kl_loss": 0.0,
        "kl_coef": 0.0,
    }


def _kl_loss(
    batch: Batch, logp: torch.Tensor, reference: TinyLM, metrics: dict[str, float]
) -> torch.Tensor:
    """``kl_loss_coef`` times k3 ("low_var_kl") against ``ref_log_prob`` or the reference."""
    cfg = batch.loss_config
    ref = batch.aligned("ref_log_prob")
    if ref is None:
        with torch.no_grad():
            ref_logits = reference(batch.input_ids, batch.attention_mask, batch.position_ids)
        ref = batch.token_logprobs(ref_logits)
    diff = (ref - logp).clamp(-20.0, 20.0)  # k3 "low_var_kl": e^d - d - 1
    kl = (diff.exp() - diff - 1.0).clamp(-10.0, 10.0)
    kl_loss = aggregate(kl, batch.response_mask, str(cfg.get("loss_agg_mode", "token-mean")))
    coef = float(cfg.get("kl_loss_coef", 0.001))
    metrics["kl_loss"] = float(kl_loss.detach())
    metrics["kl_coef"] = coef
    return coef * kl_loss


def _entropy_bonus(
    batch: Batch, logits: torch.Tensor, loss: torch.Tensor, metrics: dict[str, float]
) -> torch.Tensor:
    """Reports the entropy when asked or used; subtracts ``entropy_coeff`` times it."""
    ent_coef = float(batch.loss_config.get("entropy_coeff", 0.0) or 0.0)
    if ent_coef or batch.calculate_entropy:
        ent = batch.token_aligned(shifted_entropy(logits, batch.temperature))
        ent_mean = masked_mean(ent, batch.response_mask)
        metrics["entropy"] = float(ent_mean.detach())
        if ent_coef:
            loss = loss - ent_coef * ent_mean
    return loss


def post_outputs(batch: Batch, logits: torch.Tensor) -> dict[str, Any]:
    """``processing.post`` asks for per-token outputs of this (pre-update) forward pass."""
    names: list[str] = []
    for item in batch.post:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            names.append(item["name"])
    out: dict[str, Any] = {}
    with torch.no_grad():
        for name in names:
            if name in ("logprobs", "log_probs"):
                out[name] = shifted_logprobs(logits.detach(), batch.input_ids, batch.temperature)
            elif name == "entropy":
                out[name] = shifted_entropy(logits.detach(), batch.temperature)
    return out


def sft_loss(batch: Batch, logits: torch.Tensor) -> Loss:
    """Token-mean cross-entropy on ``labels`` (HF convention: shifted inside, -100 ignored)."""
    labels_raw = batch.inputs.get("labels")
    if labels_raw is not None:
        labels = as_tensor(labels_raw, torch.long).reshape(batch.shape)
        labels = torch.where(labels == -100, labels, labels.remainder(VOCAB_SIZE))
    else:
        labels = batch.input_ids.clone()
        if batch.attention_mask is not None:
            labels[~batch.attention_mask] = -100
    target = labels[:, 1:]
    if bool((target != -100).any()):
        loss = F.cross_entropy(
            (logits[:, :-1].float() / batch.temperature).reshape(-1, logits.shape[-1]),
            target.reshape(-1),
            ignore_index=-100,
        )
    else:
        loss = logits.sum() * 0.0  # nothing to learn from; keep the graph for backward
    metrics = dict.fromkeys(METRIC_KEYS, 0.0)
    return loss, metrics
