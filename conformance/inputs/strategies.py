"""Hypothesis strategies: batches of any shape and dtype, prompts, sampling params, chunk
counts, malformed frames and broken create valid_bodies.

Tensors are built from a drawn seed (so they shrink by shape, not by value); token ids
stay below 100 so a real tiny model can embed them.
"""

from __future__ import annotations

import copy
import struct
from typing import Any

from hypothesis import strategies as st

VOCAB = 100
INT_DTYPES = ("int64", "int32", "int16", "uint8")
ALL_DTYPES = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
)


def _torch() -> Any:
    import torch

    return torch


def tensor(shape: tuple[int, ...], dtype: str, seed: int, high: int = VOCAB) -> Any:
    """A deterministic tensor of ``shape``/``dtype``."""
    torch = _torch()
    gen = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dt.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(dt)
    hi = min(high, 127) if dtype in ("int8", "uint8") else high
    return torch.randint(0, hi, shape, generator=gen).to(dt)


batch_dims = st.tuples(st.integers(1, 4), st.integers(1, 24))


@st.composite
def model_kwargs(
    draw: st.DrawFn, dims: tuple[int, int] | None = None, extras: bool = True
) -> dict[str, Any]:
    """Model kwargs ``[B, S]``: input_ids plus optional masks, labels and extra tensors."""
    b, s = dims or draw(batch_dims)
    seed = draw(st.integers(0, 2**16))
    kw: dict[str, Any] = {"input_ids": tensor((b, s), draw(st.sampled_from(INT_DTYPES)), seed)}
    if draw(st.booleans()):
        kw["attention_mask"] = tensor(
            (b, s), draw(st.sampled_from(("int64", "bool", "int32"))), seed + 1, 2
        )
    if draw(st.booleans()):
        torch = _torch()
        kw["position_ids"] = torch.arange(s).repeat(b, 1)
    if draw(st.booleans()):
        kw["labels"] = tensor((b, s), "int64", seed + 2)
    if extras and draw(st.booleans()):
        kw["advantages"] = tensor(
            (b, s), draw(st.sampled_from(("float32", "float16", "bfloat16", "float64"))), seed + 3
        )
    return kw


@st.composite
def fb_payloads(draw: st.DrawFn) -> dict[str, Any]:
    """A forward-backward frame object: ``{args, kwargs}`` plus optional processing."""
    obj: dict[str, Any] = {"args": [], "kwargs": draw(model_kwargs())}
    if draw(st.booleans()):
        obj["processing"] = {
            "loss_fn": draw(st.sampled_from([None, "verl_grpo"])),
            "config": {},
            "post": [],
        }
    return obj


@st.composite
def verl_batches(draw: st.DrawFn) -> dict[str, Any]:
    """The verl-GRPO kwargs (spec §10): prompt P + response R."""
    b = draw(st.integers(1, 3))
    p = draw(st.integers(1, 8))
    r = draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**16))
    torch = _torch()
    kw: dict[str, Any] = {
        "input_ids": tensor((b, p + r), "int64", seed),
        "attention_mask": torch.ones(b, p + r, dtype=torch.int64),
        "position_ids": torch.arange(p + r).repeat(b, 1),
        "prompts": tensor((b, p), "int64", seed + 1),
        "responses": tensor((b, r), "int64", seed + 2),
        "response_mask": torch.ones(b, r, dtype=torch.int64),
        "advantages": tensor((b, r), "float32", seed + 3),
        "old_log_probs": -tensor((b, r), "float32", seed + 4).abs(),
    }
    if draw(st.booleans()):
        kw["ref_log_prob"] = -tensor((b, r), "float32", seed + 5).abs()
    return kw


def verl_envelope(batch: dict[str, Any], entropy: bool = False) -> dict[str, Any]:
    """The RPC body a verl call becomes: ``{args, kwargs, meta, processing}``."""
    p = int(batch["prompts"].shape[1]) if "prompts" in batch else 0
    r = int(batch["responses"].shape[1]) if "responses" in batch else 0
    return {
        "args": [],
        "kwargs": batch,
        "meta": {
            "pad_token_id": 0,
            "rollout_n": 1,
            "max_prompt_len": p,
            "max_response_len": r,
            "temperature": 1.0,
            "calculate_entropy": entropy,
        },
        "processing": {"loss_fn": "verl_grpo", "config": {}, "post": []},
    }


@st.composite
def forward_payloads(draw: st.DrawFn, verl: bool | None = None) -> dict[str, Any]:
    """A forward / forward-no-grad body, sometimes the verl envelope, sometimes with entropy."""
    entropy = draw(st.booleans())
    if verl if verl is not None else draw(st.booleans()):
        return verl_envelope(draw(verl_batches()), entropy)
    return {
        "args": [],
        "kwargs": draw(model_kwargs(extras=False)),
        "meta": {"calculate_entropy": entropy},
    }


# --- generate ---------------------------------------------------------------------------

text_prompts = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40
)
token_prompts = st.lists(st.integers(1, VOCAB - 1), min_size=1, max_size=12)
prompts = st.one_of(text_prompts, token_prompts)


@st.composite
def sampling_params(draw: st.DrawFn) -> dict[str, Any]:
    sp: dict[str, Any] = {"max_tokens": draw(st.integers(1, 16))}
    if draw(st.booleans()):
        sp["temperature"] = draw(st.sampled_from([0.0, 0.7, 1.0]))
    if draw(st.booleans()):
        sp["logprobs"] = draw(st.sampled_from([True, 1, 0]))
    if draw(st.booleans()):
        sp["seed"] = draw(st.integers(0, 1000))
    return sp


@st.composite
def generate_requests(draw: st.DrawFn, max_prompts: int = 4) -> dict[str, Any]:
    """A generate frame object: prompts plus shared, aligned or absent sampling params."""
    ps = draw(st.lists(prompts, min_size=1, max_size=max_prompts))
    req: dict[str, Any] = {"prompts": ps}
    how = draw(st.sampled_from(["none", "shared", "aligned"]))
    if how == "shared":
        req["sampling_params"] = draw(sampling_params())
    elif how == "aligned":
        req["sampling_params"] = [draw(st.one_of(st.none(), sampling_params())) for _ in ps]
    if draw(st.booleans()):
        req["routing_key"] = draw(
            st.one_of(st.text(min_size=1, max_size=8), st.just([None] * len(ps)))
        )
    return req


# --- chunks -----------------------------------------------------------------------------

chunk_counts = st.integers(1, 6)


# --- malformed frames -------------------------------------------------------------------


@st.composite
def malformed_frames(draw: st.DrawFn, good: bytes) -> bytes:
    """Bytes that are not a valid frame: truncated, garbled header, lying lengths, noise."""
    kind = draw(
        st.sampled_from(
            ["truncate", "header-garbage", "length-lies", "noise", "flip-header", "empty", "short"]
        )
    )
    if kind == "truncate":
        cut = draw(st.integers(0, max(0, len(good) - 1)))
        return good[:cut]
    if kind == "header-garbage":
        junk = draw(st.binary(min_size=2, max_size=64))
        return struct.pack("<Q", len(junk)) + junk
    if kind == "length-lies":
        n = draw(st.integers(len(good), 2**40))
        return struct.pack("<Q", n) + good[8:]
    if kind == "noise":
        return draw(st.binary(min_size=9, max_size=256))
    if kind == "flip-header":
        (n,) = struct.unpack_from("<Q", good, 0)
        pos = draw(st.integers(8, 8 + n - 1))
        return good[:pos] + bytes([good[pos] ^ 0xFF]) + good[pos + 1 :]
    if kind == "empty":
        return b""
    return draw(st.binary(min_size=1, max_size=7))


# --- create-job bodies ------------------------------------------------------------------


def without(body: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    out = copy.deepcopy(body)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node.pop(path[-1], None)
    return out


def with_value(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


# --- valid create bodies ------------------------------------------------------------------


@st.composite
def valid_job_bodies(draw: st.DrawFn, models: tuple[str, ...]) -> dict[str, Any]:
    """1-4 sub-jobs of any type (several of one type allowed), each with its config."""
    from conformance.inputs import valid_bodies

    subs = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["training", "sampling", "log_probability"]))
        model = draw(st.sampled_from(models))
        gpus = draw(st.integers(1, 2))
        if kind == "training":
            subs.append(valid_bodies.training(model, gpus, max_seq_len=draw(st.integers(16, 4096))))
        else:
            subs.append(
                valid_bodies.inference(kind, model, gpus, max_seq_len=draw(st.integers(16, 4096)))
            )
    return valid_bodies.job(*subs, experiment=draw(st.one_of(st.none(), st.just("gs-exp"))))
