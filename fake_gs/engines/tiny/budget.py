"""What one forward(-backward) batch may ask of the tiny engine.

One batch of 1024x1024 ids (an 8 MiB frame, a job with ``train_batch_size`` 8) took the
fake from 341 MiB to 14 GB, and NaN advantages were accepted and poisoned the weights
(every later loss null, the sampler emitting only eos). Checked at submission, so the
caller gets a 400 naming the bound instead of a failed request or a dead fake:

- at most the budget's tokens (rows x sequence length: ``tiny_max_batch_tokens``), and
  rows x length^2 at most ``ATTENTION_SPAN`` times that: padded batches attend
  quadratically (16 rows of 4096 tokens took 3.1 GiB, 64 rows of 512 took 0.65 GiB).
  ``train_batch_size`` is no bound on one call: the spec only asks it to be positive, and
  clients (the conformance suite among them) send larger micro-batches;
- every float input (advantages, old/ref log-probs, masks, labels...) and every numeric
  loss setting finite.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from fake_gs.engines.batch_layout import normalize
from fake_gs.engines.protocol import BatchRefused

#: Rows x length^2 a batch may reach, per token of the budget (rows of this many tokens
#: fill the whole token budget at the cost a linear batch has).
ATTENTION_SPAN = 1024


def check_batch(request: Mapping[str, Any], max_tokens: int) -> None:
    """Raise :class:`BatchRefused` for a batch over the budget or with a non-finite input;
    a body the engine cannot read at all is left to fail when it runs, as before."""
    try:
        layout = normalize(request)
        ids = torch.as_tensor(layout.inputs["input_ids"])
    except (KeyError, TypeError, ValueError, RuntimeError):
        return
    rows, seq = (1, int(ids.shape[0])) if ids.dim() == 1 else (int(ids.shape[0]), int(ids.shape[-1]))
    _check_size(rows, seq, max_tokens)
    for name, value in layout.inputs.items():
        _check_finite_tensor(name, value)
    for name, value in {**layout.loss_config, "temperature": layout.meta.get("temperature")}.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise BatchRefused(f"loss setting {name} is {value}; the tiny engine takes finite numbers only",
                               field=name)


def _check_size(rows: int, seq: int, max_tokens: int) -> None:
    if rows * seq > max_tokens:
        raise BatchRefused(f"a batch of {rows}x{seq} tokens is over the tiny engine's "
                           f"tiny_max_batch_tokens {max_tokens}", limit="tiny_max_batch_tokens",
                           field="input_ids")
    if rows * seq * seq > max_tokens * ATTENTION_SPAN:
        raise BatchRefused(f"a batch of {rows} sequences of {seq} tokens attends over {rows * seq * seq} "
                           f"positions, over {ATTENTION_SPAN} x the tiny engine's tiny_max_batch_tokens "
                           f"{max_tokens}; send shorter or fewer rows", limit="tiny_max_batch_tokens",
                           field="input_ids")


def _check_finite_tensor(name: str, value: Any) -> None:
    try:
        tensor = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError):
        return
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        bad = int((~torch.isfinite(tensor)).sum())
        raise BatchRefused(f"{name} holds {bad} non-finite value(s) (NaN or infinity); refused so "
                           "the weights are never poisoned", field=name)
