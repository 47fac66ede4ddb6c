"""The toy GRPO task and its two batch layouts, for ``grpo_toy.py`` and your own loops.

Pure tensor work, no client and no server: the toy reward, GRPO's group-normalised
advantages, the verl-layout rollout (prompts left-padded, responses right-padded), the
shifted old-log-prob slice, and the payload builders for verl's envelope and for
ArcticTraining's kwargs + context layout (spec §10.3, §10.4). Token ids follow the tiny
engine's byte tokenizer: UTF-8 bytes, PAD 256, BOS 257.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

PAD_ID = 256
BOS_ID = 257


def slice_old_log_probs(shifted: torch.Tensor, prompt_len: int, response_len: int) -> torch.Tensor:
    """Response token ``j`` sits at ``P+j``; its log-prob is shifted column ``P-1+j``."""
    return shifted[:, prompt_len - 1 : prompt_len - 1 + response_len]


# --- the toy task --------------------------------------------------------------------------


def encode_prompt(text: str) -> list[int]:
    return [BOS_ID, *text.encode("utf-8")]


def reward(token_ids: Sequence[int], target: str, max_tokens: int) -> float:
    """Fraction of the ``max_tokens`` slots holding a target byte (stopping early earns less)."""
    wanted = set(target.encode("utf-8"))
    return sum(1 for t in token_ids if t in wanted) / max_tokens


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """GRPO: each reward minus its group's mean, over the group's std."""
    groups = rewards.view(-1, group_size)
    mean = groups.mean(-1, keepdim=True)
    std = groups.std(-1, keepdim=True) if group_size > 1 else torch.ones_like(mean)
    return ((groups - mean) / (std + eps)).view(-1)


@dataclass
class Rollout:
    """A verl-layout batch: prompts left-padded to P, responses right-padded to R."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    prompts: torch.Tensor
    responses: torch.Tensor
    response_mask: torch.Tensor
    prompt_len: int
    response_len: int


def build_rollout(
    prompt_ids: Sequence[list[int]], responses: Sequence[list[int]], response_len: int
) -> Rollout:
    b = len(prompt_ids)
    p, r = max(len(x) for x in prompt_ids), response_len
    input_ids = torch.full((b, p + r), PAD_ID, dtype=torch.long)
    attn = torch.zeros((b, p + r), dtype=torch.long)
    resp = torch.full((b, r), PAD_ID, dtype=torch.long)
    resp_mask = torch.zeros((b, r), dtype=torch.float32)
    for i, (pid, rid) in enumerate(zip(prompt_ids, responses, strict=True)):
        rid = list(rid)[:r]
        input_ids[i, p - len(pid) : p] = torch.tensor(pid)
        attn[i, p - len(pid) : p + len(rid)] = 1
        if rid:
            input_ids[i, p : p + len(rid)] = torch.tensor(rid)
            resp[i, : len(rid)] = torch.tensor(rid)
            resp_mask[i, : len(rid)] = 1.0
    position_ids = (attn.cumsum(-1) - 1).clamp_min(0)
    return Rollout(input_ids, attn, position_ids, input_ids[:, :p].clone(), resp, resp_mask, p, r)


# --- the two batch layouts ----------------------------------------------------------------


def verl_payload(batch: dict[str, torch.Tensor], meta: dict[str, Any]) -> Callable[[Any], Any]:
    """verl: every tensor under ``batch`` ([B, R] RL tensors), loss settings in ``meta``."""

    def make(rows: torch.Tensor) -> dict[str, Any]:
        return {
            "batch": {k: v[rows] for k, v in batch.items()},
            "meta": meta,
            "processing": {"loss_fn": "verl_grpo", "post": []},
        }

    return make


def arctic_payload(
    roll: Rollout, advantages: torch.Tensor, old_shifted: torch.Tensor, clip_ratio: float
) -> Callable[[Any], Any]:
    """ArcticTraining: model kwargs only under ``kwargs``; the RL side in ``context``.

    ``advantages`` and ``loss_mask`` are token-aligned with ``input_ids`` ([B, P+R], zero
    over the prompt); the old log-probs go as fwd_no_grad returned them, shifted, under
    ``old_log_probs_shifted`` (spec §10.4), so no slicing is needed on this side.
    """
    p = roll.prompt_len
    full_adv = torch.nn.functional.pad(advantages, (p, 0))
    full_mask = torch.nn.functional.pad(roll.response_mask, (p, 0))
    kwargs = {
        "input_ids": roll.input_ids,
        "attention_mask": roll.attention_mask,
        "position_ids": roll.position_ids,
    }
    context = {"advantages": full_adv, "loss_mask": full_mask, "old_log_probs_shifted": old_shifted}

    def make(rows: torch.Tensor) -> dict[str, Any]:
        return {
            "args": [],
            "kwargs": {k: v[rows] for k, v in kwargs.items()},
            "context": {
                **{k: v[rows] for k, v in context.items()},
                "eps_clip": clip_ratio,
                "loss_agg_mode": "token-mean",
            },
            "processing": {"loss_fn": "grpo", "post": []},
        }

    return make
