"""Sampling for the tiny engine: a left-padded batch decoded with a key/value cache.

Per-row generators make a seeded prompt sample the same tokens whatever shares its batch;
the reported log-probs are those of the unscaled model (conventions: ``fake_gs.engines.tiny``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from contract.models import SamplingParams
from fake_gs.engines.tiny.byte_tokenizer import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE, ByteTokenizer
from fake_gs.engines.tiny.model import TinyLM


class Row:
    """One prompt being sampled: its tokens, params, generator and outcome."""

    def __init__(
        self, prompt: list[int], params: SamplingParams, seed: int, max_seq_len: int
    ) -> None:
        self.prompt = prompt or [BOS_ID]
        self.params = params
        self.generator = torch.Generator().manual_seed(int(seed) % (2**63))
        room = max_seq_len - len(self.prompt) if max_seq_len > 0 else params.max_tokens
        if room < 1:  # prompt + output never exceed max_seq_len (GEN-SEQLEN-1)
            raise ValueError(f"a prompt of {len(self.prompt)} tokens leaves no room under max_seq_len {max_seq_len}")
        self.max_new = min(params.max_tokens, room)
        stop = params.stop
        self.stops = [stop] if isinstance(stop, str) else [s for s in (stop or []) if s]
        extra = params.model_extra or {}
        self.stop_ids = {int(t) for t in (extra.get("stop_token_ids") or [])}
        if not extra.get("ignore_eos"):
            self.stop_ids.add(EOS_ID)
        top_k = extra.get("top_k")
        self.top_k = int(top_k) if isinstance(top_k, int) and top_k > 0 else 0
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.finish: str | None = None
        self.text_end: int | None = None

    def push(self, token: int, logprob: float, tokenizer: ByteTokenizer) -> None:
        self.tokens.append(token)
        self.logprobs.append(logprob)
        if token in self.stop_ids:
            self.finish = "stop"
        elif self.stops:
            text = tokenizer.decode(self.tokens)
            hits = [i for i in (text.find(s) for s in self.stops) if i >= 0]
            if hits:
                self.finish, self.text_end = "stop", min(hits)
        if self.finish is None and len(self.tokens) >= self.max_new:
            self.finish = "length"

    def result(self, tokenizer: ByteTokenizer) -> dict[str, Any]:
        text = tokenizer.decode(self.tokens)
        if self.text_end is not None:
            text = text[: self.text_end]
        out: dict[str, Any] = {
            "text": text,
            "token_ids": torch.tensor(self.tokens, dtype=torch.int64),
            "finish_reason": self.finish or "length",
        }
        if self.params.logprobs is not None and self.params.logprobs is not False:
            out["logprobs"] = torch.tensor(self.logprobs, dtype=torch.float32)
        return out


_TOKENIZER = ByteTokenizer()
_NEVER_SAMPLED = torch.tensor([PAD_ID, BOS_ID])


def sample(model: TinyLM, rows: list[Row]) -> None:
    """Decode all rows in one left-padded batch with a key/value cache.

    Rows that finish keep riding along (their tokens are ignored) so the batch stays
    rectangular; each row draws one uniform per step from its own generator, so a seeded
    prompt samples the same tokens whatever else is in the batch.
    """
    b = len(rows)
    width = max(len(r.prompt) for r in rows)
    ids = torch.full((b, width), PAD_ID, dtype=torch.long)
    keep = torch.zeros((b, width), dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, width - len(row.prompt) :] = torch.tensor(row.prompt).remainder(VOCAB_SIZE)
        keep[i, width - len(row.prompt) :] = True
    logits, cache = model.forward_cached(ids, keep)
    positions = keep.sum(-1, keepdim=True)
    temps = torch.tensor([_temperature(r) for r in rows])
    top_p = torch.tensor([r.params.top_p or 1.0 for r in rows])
    top_k = torch.tensor([r.top_k for r in rows])
    for _ in range(max(r.max_new for r in rows)):
        last = logits[:, -1, :].float()
        logp = torch.log_softmax(last, dim=-1)
        tokens = _pick(last, rows, temps, top_p, top_k)
        for i, row in enumerate(rows):
            if row.finish is None:
                row.push(int(tokens[i]), float(logp[i, tokens[i]]), _TOKENIZER)
        if all(r.finish is not None for r in rows):
            return
        keep = torch.cat((keep, torch.ones((b, 1), dtype=torch.bool)), dim=1)
        logits, cache = model.forward_cached(tokens[:, None], keep, positions, cache)
        positions = positions + 1


def _temperature(row: Row) -> float:
    """0 means greedy (marked as 0 here); None is vLLM's default of 1."""
    t = row.params.temperature
    return 1.0 if t is None else float(t)


def _pick(
    logits: torch.Tensor,
    rows: list[Row],
    temps: torch.Tensor,
    top_p: torch.Tensor,
    top_k: torch.Tensor,
) -> torch.Tensor:
    """One token per row: greedy at temperature 0, else top-k/top-p inverse-CDF sampling."""
    logits = logits.clone()
    logits[:, _NEVER_SAMPLED] = -math.inf
    greedy = logits.argmax(-1)
    scaled = logits / torch.where(temps > 0, temps, torch.ones_like(temps))[:, None]
    if bool((top_k > 0).any()):
        ordered = scaled.sort(dim=-1, descending=True).values
        k = top_k.clamp(1, scaled.shape[-1]) - 1
        kth = ordered.gather(-1, k[:, None])
        scaled = torch.where((top_k[:, None] > 0) & (scaled < kth), -math.inf, scaled)
    probs = torch.softmax(scaled, dim=-1)
    if bool((top_p < 1.0).any()):
        sorted_p, order = probs.sort(dim=-1, descending=True)
        sorted_p = torch.where((sorted_p.cumsum(-1) - sorted_p) >= top_p[:, None], 0.0, sorted_p)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    cdf = probs.cumsum(-1)
    cdf = cdf / cdf[:, -1:]
    draws = torch.tensor(
        [float(torch.rand((), generator=r.generator)) if r.finish is None else 0.0 for r in rows]
    )
    # right=True: the first token whose cdf exceeds the draw; zero-probability tokens never win.
    sampled = (
        torch.searchsorted(cdf, draws[:, None], right=True).squeeze(-1).clamp_max(cdf.shape[-1] - 1)
    )
    return torch.where(temps > 0, sampled, greedy)
