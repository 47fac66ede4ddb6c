"""Values the legacy engine knobs imply for the canonical job-shape fields.

SkyRL and verl never set ``lr``, ``max_seq_len`` or ``train_batch_size``: they say them
inside a DeepSpeed ``ds_config`` (``optimizer.params.lr``, ``train_batch_size``), SkyRL's
``training_config`` dict (``optimizer.lr``, ``max_length``) and the vLLM kwargs
(``max_model_len``). The config's validator lifts them into the canonical fields, so
``config.lr`` is the rate the run asked for and the create-job body is built from one place.
A canonical field the caller gave wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def ds_optimizer(data: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The DeepSpeed optimizer (``{"type", "params"}``) as (name, params), else the legacy
    ``training_config.optimizer`` dict as params; (None, {}) when neither says."""
    ds_opt = _dict(_dict(data.get("ds_config")).get("optimizer"))
    if ds_opt:
        name = ds_opt.get("type")
        return (str(name) if name else None), dict(_dict(ds_opt.get("params")))
    legacy = dict(_dict(_dict(data.get("training_config")).get("optimizer")))
    legacy.pop("gradient_clipping", None)  # a typed training field, not an optimizer param
    return None, legacy


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def lifted(data: Mapping[str, Any]) -> dict[str, Any]:
    """Canonical fields (``lr``, ``optimizer``, ``train_batch_size``, ``max_seq_len``) the
    legacy knobs in ``data`` imply and ``data`` does not set itself."""
    out: dict[str, Any] = {}
    name, params = ds_optimizer(data)
    if name is not None:
        out["optimizer"] = name
    lr = params.get("lr")
    if isinstance(lr, (int, float)) and not isinstance(lr, bool) and lr > 0:
        out["lr"] = float(lr)
    batch = _positive_int(_dict(data.get("ds_config")).get("train_batch_size"))
    if batch is not None:
        out["train_batch_size"] = batch
    seq = (_positive_int(_dict(data.get("training_config")).get("max_length"))
           or _positive_int(_dict(data.get("vllm_config")).get("max_model_len")))
    if seq is not None:
        out["max_seq_len"] = seq
    return {k: v for k, v in out.items() if k not in data}
