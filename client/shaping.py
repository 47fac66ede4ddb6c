"""Response shaping the integrations (SkyRL's and verl's code) rely on.

SkyRL and verl were written against the on-prem server's answers. These pure functions
bend Cortex answers into that shape without copying tensors: loss-only results gain
``loss``/``metrics``/``post_process_outputs``, ``metrics.grad_norm``/``metrics.loss``
bubble to the top, ``loss`` and ``avg_loss`` mirror each other, ``model_outputs`` is also
reachable as ``batch`` and tensors under generate ``results`` become lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Metric keys copied to the top level, where callers ``.get()`` them.
BUBBLED_METRICS: tuple[str, ...] = ("grad_norm", "loss")
#: Two spellings callers use for per-token log-probabilities under ``batch``.
LOGPROB_KEYS: tuple[str, str] = ("logprobs", "log_probs")


def logprobs_of(answer: Mapping[str, Any]) -> Any:
    """The per-token log-probs of a forward(-no-grad) answer, under ``model_outputs`` or its
    ``batch`` alias, in either spelling; None when it carries none."""
    for outer in ("model_outputs", "batch"):
        inner = answer.get(outer)
        if isinstance(inner, Mapping):
            found = next((inner[k] for k in LOGPROB_KEYS if k in inner), None)
            if found is not None:
                return found
    return None


def flatten_metrics(result: Mapping[str, Any]) -> dict[str, Any]:
    """Bubble ``metrics.grad_norm``/``metrics.loss`` up; mirror ``loss`` <-> ``avg_loss``."""
    out = dict(result)
    metrics = out.get("metrics")
    if isinstance(metrics, Mapping):
        for key in BUBBLED_METRICS:
            if key in metrics and out.get(key) is None:
                out[key] = metrics[key]
    if "loss" in out and "avg_loss" not in out:
        out["avg_loss"] = out["loss"]
    elif "avg_loss" in out and "loss" not in out:
        out["loss"] = out["avg_loss"]
    return out


#: The value of a metric the service did not report (a float, so means and logs work).
NOT_REPORTED = float("nan")


def with_train_metrics(result: Mapping[str, Any]) -> dict[str, Any]:
    """A forward-backward answer whose ``metrics`` hold ``loss`` (the service's, else its
    ``avg_loss``) and ``grad_norm`` (the service's, else NaN: today's surface reports none,
    and verl averages these values, which a None would break)."""
    out = dict(result)
    metrics = dict(out.get("metrics") or {})
    loss = next((v for v in (metrics.get("loss"), out.get("loss"), out.get("avg_loss"))
                 if v is not None), None)
    if loss is not None:
        metrics["loss"] = loss
    if metrics.get("grad_norm") is None:
        metrics["grad_norm"] = NOT_REPORTED
    out["metrics"] = metrics
    return out


def with_step_metrics(result: Mapping[str, Any]) -> dict[str, Any]:
    """A step answer with a ``metrics`` block: the service's, plus ``last_lr`` (verl reads
    the learning rate there) and ``grad_norm`` (NaN when not reported)."""
    out = dict(result)
    metrics = dict(out.get("metrics") or {})
    if out.get("last_lr") is not None:
        metrics.setdefault("last_lr", out["last_lr"])
    if metrics.get("grad_norm") is None:
        metrics["grad_norm"] = NOT_REPORTED
    out["metrics"] = metrics
    return out


def alias_model_outputs(result: Mapping[str, Any]) -> dict[str, Any]:
    """Expose ``model_outputs`` as ``batch`` too, with both log-prob spellings."""
    out = dict(result)
    outputs = out.get("model_outputs")
    if isinstance(outputs, Mapping) and "batch" not in out:
        batch = dict(outputs)
        first, second = LOGPROB_KEYS
        if first in batch and second not in batch:
            batch[second] = batch[first]
        elif second in batch and first not in batch:
            batch[first] = batch[second]
        out["batch"] = batch
    return out


def shape_train_result(result: Any) -> dict[str, Any]:
    """A forward(-backward) answer in the on-prem shape."""
    out = alias_model_outputs(result if isinstance(result, Mapping) else {"result": result})
    if "avg_loss" in out or "loss" in out:
        metrics = dict(out.get("metrics") or {})
        metrics.setdefault("grad_norm", None)
        out["metrics"] = metrics
        out.setdefault("post_process_outputs", {})
    return flatten_metrics(out)


def shape_step_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """A step answer with a scalar ``last_lr``: spec §6.2 lets a backend report one per
    parameter group (a list); the integrations read one number, so the first group's rate
    is ``last_lr`` and the whole list stays as ``last_lrs``."""
    out = dict(result)
    lrs = out.get("last_lr")
    if isinstance(lrs, list) and lrs and all(isinstance(v, (int, float)) for v in lrs):
        out["last_lr"], out["last_lrs"] = lrs[0], lrs
    return out


def to_plain(value: Any) -> Any:
    """Tensors (anything with ``tolist``) become lists, recursively; no torch import."""
    if isinstance(value, Mapping):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_plain(v) for v in value)
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and not isinstance(value, (str, bytes)):
        return tolist()
    return value


def shape_generate_result(result: Any) -> dict[str, Any]:
    """Generate answers with lists, not tensors, under ``results``."""
    out = dict(result) if isinstance(result, Mapping) else {"results": result}
    if "results" in out:
        out["results"] = to_plain(out["results"])
    return out
