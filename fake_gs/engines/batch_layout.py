"""Read a forward(-backward) body the way the service does, whatever layout it came in.

Three layouts reach the training sub-job (spec §10.1, §10.3):

- ``{"args", "kwargs": {input_ids, ...}}``: model kwargs, RL tensors beside them;
- the verl envelope ``{"batch": {...}, "meta": {...}, "processing": {...}}`` (the client
  rewrites it to ``kwargs``, but a raw caller may send it as is);
- ArcticTraining's: model kwargs under ``kwargs`` and the RL side under a top-level
  ``context`` block: tensors such as ``advantages``/``loss_mask``/``old_log_probs`` and
  loss settings such as ``eps_clip``. The service's own GRPO recipe sends this one.

:func:`normalize` folds all three into one view: model inputs plus RL tensors in one
mapping, and one flat loss-setting dict with ArcticTraining's spellings mapped onto the
engine's (``eps_clip`` -> ``clip_ratio`` ...). A tensor named ``X_shifted`` follows the
shifted convention of spec §10.4 (column ``i`` is about token ``i + 1``); it is realigned
to token order here so the loss reads it like any other ``[B, S]`` tensor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from contract.shapes import model_inputs

#: ArcticTraining/other spellings of a tensor -> the name the loss reads.
TENSOR_ALIASES: dict[str, str] = {
    "old_logprobs": "old_log_probs",
    "old_log_prob": "old_log_probs",
    "ref_log_probs": "ref_log_prob",
    "ref_logprobs": "ref_log_prob",
    "advantage": "advantages",
}
#: Loss-setting spellings -> the names the engine's verl-style loss reads.
SETTING_ALIASES: dict[str, str] = {
    "eps_clip": "clip_ratio",
    "eps_clip_low": "clip_ratio_low",
    "eps_clip_high": "clip_ratio_high",
    "kl_coef": "kl_loss_coef",
    "entropy_coef": "entropy_coeff",
}
SHIFTED_SUFFIX = "_shifted"


@dataclass
class Layout:
    """One body, read: the tensors, the meta, the processing block and the loss settings."""

    inputs: dict[str, Any]
    meta: dict[str, Any]
    processing: dict[str, Any]
    #: Loss settings from every source, lowest precedence first already applied.
    loss_config: dict[str, Any]


def _is_tensor_like(value: Any) -> bool:
    return isinstance(value, torch.Tensor) or (isinstance(value, (list, tuple)) and bool(value))


def _settings(part: Any) -> dict[str, Any]:
    """Scalar loss settings of one source, ArcticTraining spellings mapped (canonical wins)."""
    if not isinstance(part, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key, value in part.items():
        if isinstance(value, (bool, int, float, str)) or value is None:
            name = SETTING_ALIASES.get(str(key), str(key))
            if name not in out or name == key:
                out[name] = value
    return out


def _unshift(value: Any, seq_len: int) -> torch.Tensor:
    """``[B, S]`` or ``[B, S-1]`` shifted (column i about token i+1) -> token-aligned ``[B, S]``."""
    x = torch.as_tensor(value).detach().to(torch.float32)
    if x.dim() != 2 or x.shape[1] not in (seq_len, seq_len - 1):
        raise ValueError(
            f"a *{SHIFTED_SUFFIX} tensor must be [B, S] or [B, S-1] with S={seq_len}, "
            f"got {list(x.shape)}"
        )
    return F.pad(x[:, : seq_len - 1], (1, 0), value=0.0)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(torch.equal(torch.as_tensor(a), torch.as_tensor(b)))
    except (TypeError, ValueError, RuntimeError):
        return False


def _merge_context(inputs: dict[str, Any], context: Mapping[str, Any], seq_len: int) -> None:
    """Context tensors join the model inputs; one named in both places must agree."""
    for key, value in context.items():
        if not _is_tensor_like(value):
            continue
        name = str(key)
        if name.endswith(SHIFTED_SUFFIX):
            name = name[: -len(SHIFTED_SUFFIX)]
            value = _unshift(value, seq_len)
        name = TENSOR_ALIASES.get(name, name)
        if name in inputs and not _same(inputs[name], value):
            raise ValueError(f"{name!r} is given in both kwargs and context with different values")
        inputs.setdefault(name, value)


def normalize(request: Mapping[str, Any], *, need_loss: bool = True) -> Layout:
    """The body in one view (see module docstring); raises ValueError on a contradiction."""
    inputs = dict(model_inputs(request))
    for alias, name in TENSOR_ALIASES.items():
        if alias in inputs and name not in inputs:
            inputs[name] = inputs.pop(alias)
    meta_raw = request.get("meta")
    meta = dict(meta_raw) if isinstance(meta_raw, Mapping) else {}
    processing_raw = request.get("processing") if need_loss else None
    processing = dict(processing_raw) if isinstance(processing_raw, Mapping) else {}
    context_raw = request.get("context")
    context = context_raw if isinstance(context_raw, Mapping) else {}
    if context:
        shape = torch.as_tensor(inputs["input_ids"]).shape
        _merge_context(inputs, context, int(shape[-1]))
        if "temperature" in context and "temperature" not in meta:
            meta["temperature"] = context["temperature"]
    config: dict[str, Any] = {}
    # Lowest precedence first: context, then processing.config, then verl's meta blocks.
    for part in (context, processing.get("config"), meta.get("policy_loss_config"),
                 meta.get("actor_config")):
        config.update(_settings(part))
    return Layout(inputs, meta, processing, config)
