"""Shape rules (spec §6.1, §10): what a correct result must look like for a request.

Pure functions over duck-typed payloads (anything with ``.shape``/``.dtype``, or nested
lists), so they need no torch. The fake uses them to synthesise answers; the conformance
suite uses the same functions to judge any server's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contract.limits import DEFAULT_MAX_TOKENS
from contract.models import GenerateRequest

FINISH_REASONS = frozenset({"stop", "length"})


class ShapeError(ValueError):
    """The request carries no shape the rules can work from (e.g. no ``input_ids``)."""


def shape_of(value: Any) -> tuple[int, ...]:
    """Shape of a tensor-like or a rectangular nested list."""
    shape = getattr(value, "shape", None)
    if shape is not None:
        return tuple(int(d) for d in shape)
    dims: list[int] = []
    while isinstance(value, (list, tuple)):
        dims.append(len(value))
        if not value:
            break
        value = value[0]
    return tuple(dims)


def dtype_name(value: Any) -> str:
    """``torch.float32`` -> ``float32``; lists of floats -> ``float64``-ish names."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        return str(dtype).rsplit(".", 1)[-1]
    return type(value).__name__


def model_inputs(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """The model kwargs of a forward request: ``kwargs``, or ``batch`` for the verl envelope."""
    for key in ("kwargs", "batch"):
        inner = payload.get(key)
        if isinstance(inner, Mapping) and "input_ids" in inner:
            return inner
    if "input_ids" in payload:
        return payload
    raise ShapeError("request has no input_ids under kwargs or batch")


def wants_entropy(payload: Mapping[str, Any]) -> bool:
    meta = payload.get("meta")
    return bool(isinstance(meta, Mapping) and meta.get("calculate_entropy"))


@dataclass(frozen=True)
class ForwardExpectation:
    batch: int
    seq: int
    entropy: bool

    @property
    def shape(self) -> tuple[int, int]:
        return (self.batch, self.seq)


def forward_expectation(payload: Mapping[str, Any]) -> ForwardExpectation:
    """forward / forward-no-grad: ``model_outputs.logprobs`` float32 ``[B, S]`` of input_ids."""
    shape = shape_of(model_inputs(payload)["input_ids"])
    if len(shape) != 2:
        raise ShapeError(f"input_ids must be [batch, seq], got shape {list(shape)}")
    return ForwardExpectation(batch=shape[0], seq=shape[1], entropy=wants_entropy(payload))


@dataclass(frozen=True)
class GenerateExpectation:
    count: int
    max_tokens: tuple[int, ...]
    logprobs: tuple[bool, ...]


def generate_expectation(request: GenerateRequest | Mapping[str, Any]) -> GenerateExpectation:
    """generate: one result per prompt, 1 <= len(token_ids) <= max_tokens, aligned logprobs."""
    req = request if isinstance(request, GenerateRequest) else GenerateRequest.model_validate(request)
    params = [req.params_for(i) for i in range(len(req.prompts))]
    return GenerateExpectation(
        count=len(req.prompts),
        max_tokens=tuple(p.max_tokens or DEFAULT_MAX_TOKENS for p in params),
        logprobs=tuple(p.logprobs is not None and p.logprobs is not False for p in params),
    )


def _as_list(value: Any) -> list[Any]:
    tolist = getattr(value, "tolist", None)
    out = tolist() if callable(tolist) else value
    return list(out) if isinstance(out, (list, tuple)) else [out]


def check_forward_result(payload: Mapping[str, Any], result: Any) -> list[str]:
    """Violations of the forward shape rule (empty when the result is right)."""
    exp = forward_expectation(payload)
    problems: list[str] = []
    outputs = result.get("model_outputs") if isinstance(result, Mapping) else None
    if not isinstance(outputs, Mapping):
        return ["result has no model_outputs object"]
    logprobs = outputs.get("logprobs")
    if logprobs is None:
        return ["model_outputs has no logprobs"]
    if shape_of(logprobs) != exp.shape:
        problems.append(f"logprobs shape {list(shape_of(logprobs))} != input_ids shape {list(exp.shape)}")
    if hasattr(logprobs, "dtype") and dtype_name(logprobs) != "float32":
        problems.append(f"logprobs dtype {dtype_name(logprobs)} != float32")
    flat = _flatten(logprobs)
    if any(not math.isfinite(v) or v > 0 for v in flat):
        problems.append("logprobs must be finite and <= 0")
    if exp.entropy:
        entropy = outputs.get("entropy")
        if entropy is None:
            problems.append("entropy requested (meta.calculate_entropy) but missing")
        elif shape_of(entropy) != exp.shape:
            problems.append(f"entropy shape {list(shape_of(entropy))} != {list(exp.shape)}")
    return problems


def check_generate_result(request: GenerateRequest | Mapping[str, Any], result: Any) -> list[str]:
    """Violations of the generate shape rule."""
    exp = generate_expectation(request)
    results = result.get("results") if isinstance(result, Mapping) else None
    if not isinstance(results, Sequence) or isinstance(results, (str, bytes)):
        return ["result has no results list"]
    problems: list[str] = []
    if len(results) != exp.count:
        problems.append(f"{len(results)} results for {exp.count} prompts")
    for i, item in enumerate(results[: exp.count]):
        if not isinstance(item, Mapping):
            problems.append(f"results[{i}] is not an object")
            continue
        tokens = _as_list(item.get("token_ids", []))
        if not 1 <= len(tokens) <= exp.max_tokens[i]:
            problems.append(f"results[{i}] has {len(tokens)} tokens, want 1..{exp.max_tokens[i]}")
        if item.get("finish_reason") not in FINISH_REASONS:
            problems.append(f"results[{i}].finish_reason {item.get('finish_reason')!r} not stop|length")
        if "text" not in item:
            problems.append(f"results[{i}] has no text")
        if exp.logprobs[i]:
            lps = item.get("logprobs")
            if lps is None or len(_as_list(lps)) != len(tokens):
                problems.append(f"results[{i}].logprobs not aligned with token_ids")
    return problems


def check_loss(value: Any) -> list[str]:
    """Losses are finite floats."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return [f"loss {value!r} is not a finite number"]
    return []


def _flatten(value: Any) -> list[float]:
    data = value.tolist() if callable(getattr(value, "tolist", None)) else value
    out: list[float] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            out.append(float(item))
    return out
