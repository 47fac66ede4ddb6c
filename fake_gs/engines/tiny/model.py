"""A small causal transformer, just big enough that training, sampling and log-probs are real.

Pre-LayerNorm blocks with rotary position embeddings, so any position id works without a
position table and left-padded batches (verl layout) score exactly like unpadded prompts
when ``position_ids`` and ``attention_mask`` are honoured. Initialisation is seeded
through an explicit generator, so a job's weights depend on its seed only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fake_gs.engines.tiny.byte_tokenizer import VOCAB_SIZE

KV = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class TinyConfig:
    vocab_size: int = VOCAB_SIZE
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    mlp_ratio: int = 4
    rope_base: float = 10000.0
    init_std: float = 0.02


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Block(nn.Module):
    def __init__(self, cfg: TinyConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc = nn.Linear(cfg.d_model, cfg.mlp_ratio * cfg.d_model)
        self.out = nn.Linear(cfg.mlp_ratio * cfg.d_model, cfg.d_model)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor | None,
        past: KV | None = None,
    ) -> tuple[torch.Tensor, KV]:
        b, s, d = x.shape
        h = self.n_heads
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if past is not None:
            k, v = torch.cat((past[0], k), dim=2), torch.cat((past[1], v), dim=2)
        if mask is None:  # unpadded, no cache: the fused causal kernel is much faster
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)))), (k, v)


class TinyLM(nn.Module):
    """Causal LM: ``forward(input_ids, attention_mask?, position_ids?) -> logits [B, S, V]``."""

    def __init__(self, cfg: TinyConfig | None = None, *, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg = cfg or TinyConfig()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        head_dim = cfg.d_model // cfg.n_heads
        inv = 1.0 / cfg.rope_base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.inv_freq: torch.Tensor
        self.register_buffer("inv_freq", inv, persistent=False)
        self.reset_parameters(seed)

    @torch.no_grad()
    def reset_parameters(self, seed: int) -> None:
        """GPT-2 style init drawn from one seeded generator, in a fixed parameter order."""
        gen = torch.Generator().manual_seed(seed)
        residual_std = self.cfg.init_std / math.sqrt(2 * self.cfg.n_layers)
        for name, param in self.named_parameters():
            if name.endswith("bias"):
                param.zero_()
            elif ".ln" in name or name.startswith("ln_"):
                param.fill_(1.0)
            else:
                std = (
                    residual_std
                    if name.endswith(("proj.weight", "out.weight"))
                    else self.cfg.init_std
                )
                param.normal_(0.0, std, generator=gen)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits ``[B, S, V]``; ``attention_mask`` hides padding keys (left or right)."""
        return self.forward_cached(input_ids, attention_mask, position_ids)[0]

    def forward_cached(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        past: list[KV] | None = None,
    ) -> tuple[torch.Tensor, list[KV]]:
        """Logits of the new tokens plus the key/value cache, for incremental decoding.

        With ``past``, ``input_ids`` are the next ``S`` tokens and ``attention_mask``
        covers every position so far (``past`` length + ``S``).
        """
        b, s = input_ids.shape
        past_len = past[0][0].shape[2] if past else 0
        total = past_len + s
        if attention_mask is None:
            attention_mask = torch.ones((b, total), dtype=torch.bool)
        keep = attention_mask.bool()
        if keep.shape != (b, total):
            raise ValueError(f"attention_mask must be {[b, total]}, got {list(keep.shape)}")
        if position_ids is None:
            position_ids = (keep.long().cumsum(-1) - 1).clamp_min(0)[:, past_len:]
        angles = position_ids.to(torch.float32)[:, None, :, None] * self.inv_freq  # [B,1,S,hd/2]
        cos, sin = angles.cos(), angles.sin()
        q_pos = torch.arange(past_len, total)[:, None]
        k_pos = torch.arange(total)[None, :]
        # Padding keys are hidden; every query still sees itself so no row is all -inf (NaN).
        mask: torch.Tensor | None = None
        if past or not bool(keep.all()):
            mask = ((k_pos <= q_pos) & keep[:, None, None, :]) | (k_pos == q_pos)
        x = self.embed(input_ids)
        cache: list[KV] = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, cos, sin, mask, past[i] if past else None)
            cache.append(kv)
        return self.head(self.ln_f(x)), cache


def shifted_logprobs(
    logits: torch.Tensor, input_ids: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """``out[:, i] = log p(input_ids[:, i+1])``; the last column is 0.0 so the shape stays [B, S]."""
    logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)
    picked = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return F.pad(picked, (0, 1), value=0.0)


def shifted_entropy(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy of the next-token distribution, aligned with :func:`shifted_logprobs`."""
    logp = torch.log_softmax(logits[:, :-1].float() / temperature, dim=-1)
    ent = -(logp.exp() * logp).sum(-1)
    return F.pad(ent, (0, 1), value=0.0)
