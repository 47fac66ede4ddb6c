"""What the load users send: token prompts and verl-shaped training batches of the profile's
sizes (tensors, so forward-backward uploads real DSSST1 frames)."""

from __future__ import annotations

import random
from typing import Any

#: Token ids are drawn below this (every model the kit knows has a larger vocabulary).
VOCAB = 1000


def prompts(rng: random.Random, count: int, tokens: int) -> list[list[int]]:
    """``count`` pre-tokenised prompts of ``tokens`` ids each."""
    return [[rng.randrange(1, VOCAB) for _ in range(tokens)] for _ in range(count)]


def rl_batch(prompt_ids: list[list[int]], completions: list[list[int]], seq_len: int) -> dict[str, Any]:
    """A GRPO batch: each prompt + its completion, right-padded to ``seq_len``, with a
    response mask over the completion, random advantages and zero old log-probs."""
    import torch

    rows = len(prompt_ids)
    input_ids = torch.zeros(rows, seq_len, dtype=torch.long)
    attention = torch.zeros(rows, seq_len, dtype=torch.long)
    response = torch.zeros(rows, seq_len)
    for row, (prompt, completion) in enumerate(zip(prompt_ids, completions, strict=True)):
        ids = (list(prompt) + list(completion))[:seq_len]
        input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention[row, : len(ids)] = 1
        response[row, len(prompt) : len(ids)] = 1.0
    return {
        "batch": {"input_ids": input_ids, "attention_mask": attention, "response_mask": response,
                  "advantages": torch.randn(rows, seq_len) * response,
                  "old_log_probs": torch.zeros(rows, seq_len)},
        "meta": {"pad_token_id": 0},
        "processing": {"loss_fn": "verl_grpo"},
    }


def sft_batch(rng: random.Random, rows: int, seq_len: int) -> dict[str, Any]:
    """An SFT batch: random token rows, every position attended."""
    import torch

    ids = torch.tensor([[rng.randrange(1, VOCAB) for _ in range(seq_len)] for _ in range(rows)])
    return {
        "batch": {"input_ids": ids, "attention_mask": torch.ones(rows, seq_len, dtype=torch.long)},
        "meta": {"pad_token_id": 0},
        "processing": {"loss_fn": "sft"},
    }
