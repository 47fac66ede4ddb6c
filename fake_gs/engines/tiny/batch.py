"""A forward(-backward) batch of the tiny engine, every RL tensor aligned to ``input_ids``.

The alignment rules (``[B, R]``, ``[B, P+R]`` or ``[B]``) are the conventions of
``fake_gs.engines.tiny``; kept here so losses and forward read one aligned view.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from fake_gs.engines.batch_layout import normalize
from fake_gs.engines.tiny.byte_tokenizer import VOCAB_SIZE
from fake_gs.engines.tiny.model import shifted_logprobs

RL_LOSSES = frozenset({"grpo", "verl_grpo", "ppo", "verl_ppo", "policy_loss", "rl"})
SFT_LOSSES = frozenset({"sft", "cross_entropy", "ce", "nll"})


def as_tensor(value: Any, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(value).detach().to(dtype)


def fold_ids(value: Any) -> torch.Tensor:
    """Token ids as ``[B, S]``, folded into the byte vocabulary (module docstring of tiny)."""
    ids = as_tensor(value, torch.long)
    if ids.dim() == 1:
        ids = ids[None, :]
    if ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, seq], got shape {list(ids.shape)}")
    return ids.remainder(VOCAB_SIZE)


class Batch:
    """A forward(-backward) request's tensors, with every RL tensor aligned to input_ids."""

    def __init__(
        self,
        inputs: Mapping[str, Any],
        meta: Mapping[str, Any],
        processing: Mapping[str, Any],
        loss_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.inputs = inputs
        self.input_ids = fold_ids(inputs["input_ids"])
        b, s = self.input_ids.shape
        if b == 0 or s == 0:
            raise ValueError(f"input_ids must be non-empty, got shape {[b, s]}")
        am = inputs.get("attention_mask")
        self.attention_mask = as_tensor(am, torch.bool).reshape(b, s) if am is not None else None
        pos = inputs.get("position_ids")
        self.position_ids = as_tensor(pos, torch.long).reshape(b, s) if pos is not None else None
        temperature = meta.get("temperature")
        self.temperature = (
            float(temperature) if isinstance(temperature, (int, float)) and temperature > 0 else 1.0
        )
        self.calculate_entropy = bool(meta.get("calculate_entropy"))
        loss_fn = processing.get("loss_fn")
        post = processing.get("post")
        self.post: list[Any] = list(post) if isinstance(post, list) else []
        self.loss_fn = str(loss_fn).lower() if loss_fn else None
        self.loss_config: dict[str, Any] = dict(loss_config or {})
        responses = inputs.get("responses")
        self.response_len = (
            int(as_tensor(responses, torch.long).reshape(b, -1).shape[1])
            if responses is not None
            else None
        )
        if self.loss_fn in RL_LOSSES:
            self.is_rl = True
        elif self.loss_fn in SFT_LOSSES:
            self.is_rl = False
        elif self.loss_fn is None:
            self.is_rl = "labels" not in inputs and "advantages" in inputs
        else:
            raise ValueError(
                f"unknown loss_fn {loss_fn!r}; tiny engine knows sft and grpo/verl_grpo"
            )
        self._mask: torch.Tensor | None = None

    @classmethod
    def parse(cls, request: Mapping[str, Any], *, need_loss: bool = True) -> Batch:
        # kwargs, the verl envelope and ArcticTraining's context block (spec §10.3) alike.
        layout = normalize(request, need_loss=need_loss)
        return cls(layout.inputs, layout.meta, layout.processing, layout.loss_config)

    @property
    def shape(self) -> tuple[int, int]:
        b, s = self.input_ids.shape
        return int(b), int(s)

    def token_aligned(self, shifted: torch.Tensor) -> torch.Tensor:
        """Shifted [B, S] (about token i+1) -> token-aligned [B, S] (about token k; k=0 is 0)."""
        return F.pad(shifted[:, :-1], (1, 0), value=0.0)

    def token_logprobs(self, logits: torch.Tensor) -> torch.Tensor:
        return self.token_aligned(shifted_logprobs(logits, self.input_ids, self.temperature))

    def aligned(self, name: str) -> torch.Tensor | None:
        """An RL tensor as [B, S] token-aligned with input_ids (see module docstring)."""
        value = self.inputs.get(name)
        if value is None:
            return None
        b, s = self.shape
        x = as_tensor(value, torch.float32)
        if x.dim() == 1 or (x.dim() == 2 and x.shape[1] == 1):
            return x.reshape(b, 1).expand(b, s) * self._col0_mask()
        if x.dim() != 2 or x.shape[0] != b:
            raise ValueError(f"{name} must be [B, R] or [B, P+R] with B={b}, got {list(x.shape)}")
        width = int(x.shape[1])
        if width == s:
            return x * self._col0_mask()
        if width > s or (self.response_len is not None and width != self.response_len):
            raise ValueError(
                f"{name} width {width} matches neither responses ({self.response_len}) nor input_ids ({s})"
            )
        return F.pad(x, (s - width, 0), value=0.0)

    def _col0_mask(self) -> torch.Tensor:
        b, s = self.shape
        m = torch.ones(b, s)
        m[:, 0] = 0.0  # the first token has no log-prob
        return m

    @property
    def response_mask(self) -> torch.Tensor:
        if self._mask is None:
            mask = self.aligned("response_mask")
            if mask is None:
                mask = self.aligned("loss_mask")
            if mask is None:
                b, s = self.shape
                base = (
                    self.attention_mask.float()
                    if self.attention_mask is not None
                    else torch.ones(b, s)
                )
                if self.response_len is not None:
                    base = base * F.pad(
                        torch.ones(b, self.response_len), (s - self.response_len, 0)
                    )
                mask = base * self._col0_mask()
            self._mask = (mask > 0).float()
        return self._mask
