"""The codec's one-copy paths: frames as parts, chunk plans sent as pieces, chunk headers
read before their payload, and decoding that shares a handed-over buffer."""

from __future__ import annotations

import hashlib
import mmap
import random
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from contract import wire
from contract.wire import WireError
from contract.wire.basics import _HASH_STAGE as STAGE
from contract.wire.basics import sha256_hex

BATCH: dict[str, Any] = {"args": [], "kwargs": {"input_ids": torch.arange(30_000, dtype=torch.int64).reshape(3, 10_000),
                                "mask": torch.ones(3, 10_000, dtype=torch.bool), "lr": 0.5}}


def test_parts_are_the_frame_and_views_of_the_tensors() -> None:
    parts = wire.dumps_parts(BATCH, metadata={"a": 1})
    assert parts.to_bytes() == wire.dumps(BATCH, metadata={"a": 1})
    assert parts.size == len(parts.to_bytes())
    ids = BATCH["kwargs"]["input_ids"]
    assert any(p.obj is not None and torch.frombuffer(p, dtype=torch.uint8).data_ptr() == ids.data_ptr()
               for p in parts.parts[1:]), "the tensor's own bytes are a part (no copy)"
    out = bytearray(parts.size + 3)
    parts.write_into(out, 3)
    assert bytes(out[3:]) == parts.to_bytes()


@pytest.mark.parametrize("max_bytes", [0, 4096 + 300, 64 * 1024, 10**9])
@pytest.mark.parametrize("force", [False, True])
def test_a_plan_sends_the_same_bytes_as_the_joined_chunks(max_bytes: int, force: bool) -> None:
    frame = wire.dumps(BATCH)
    joined = wire.encode_byte_chunks(frame, "request", "forward-backward", max_bytes, "g-1", force)
    for source in (frame, wire.dumps_parts(BATCH)):
        plan = wire.plan_chunks(source, "request", "forward-backward", max_bytes, "g-1", force)
        assert len(plan) == len(joined)
        assert [b"".join(plan.pieces(i)) for i in range(len(plan))] == joined
        assert plan.plain == (not force and (max_bytes <= 0 or len(frame) <= max_bytes))


def test_pieces_are_views_never_copies() -> None:
    frame = wire.dumps(BATCH)
    plan = wire.plan_chunks(frame, "request", max_bytes=64 * 1024, force_chunk=True)
    for idx in range(len(plan)):
        header, *views = plan.pieces(idx)
        assert all(v.obj is frame for v in views)


def test_a_chunk_head_is_read_before_its_payload() -> None:
    chunk = wire.encode_byte_chunks(wire.dumps(BATCH), "request", "generate", 64 * 1024, "g-2", True)[1]
    size = wire.frame_head_size(chunk)
    assert size is not None and wire.frame_head_size(chunk[:7]) is None
    head = wire.read_chunk_head(chunk[: size + 10])
    kind, desc, payload = wire.split_chunk(chunk) or ("", {}, memoryview(b""))
    assert head is not None and (head.kind, head.desc) == (kind, desc)
    assert chunk[head.payload_start : head.payload_start + head.payload_len] == bytes(payload)
    assert wire.read_chunk_head(wire.dumps(BATCH)[:4096]) is None  # a plain frame
    with pytest.raises(WireError):
        wire.read_chunk_head(chunk[: size - 1])


def test_shared_decode_makes_views_of_a_writable_buffer() -> None:
    frame = wire.dumps(BATCH)
    buffer = mmap.mmap(-1, len(frame))
    buffer[:] = frame
    out = wire.loads(memoryview(buffer), share=True)
    ids = out["kwargs"]["input_ids"]
    base = torch.frombuffer(buffer, dtype=torch.uint8).data_ptr()
    assert base <= ids.data_ptr() < base + len(frame), "a view of the buffer, not a copy"
    assert torch.equal(ids, BATCH["kwargs"]["input_ids"]) and torch.equal(out["kwargs"]["mask"], BATCH["kwargs"]["mask"])
    copied = wire.loads(frame, share=True)["kwargs"]["input_ids"]  # read-only bytes: copied
    assert torch.equal(copied, ids)
    del out, ids


def test_shared_decode_still_checks_bools() -> None:
    frame = bytearray(wire.dumps({"m": torch.ones(8, dtype=torch.bool)}))
    frame[-1] = 2
    with pytest.raises(WireError, match="bytes other than 0 and 1"):
        wire.loads(frame, share=True)


@given(sizes=st.lists(st.sampled_from([0, 1, 4095, STAGE - 1, STAGE, STAGE + 1, 3 * STAGE + 17]), max_size=4),
       seed=st.integers(0, 2**16))
def test_the_staged_hash_is_the_sha256_of_the_joined_parts(sizes: list[int], seed: int) -> None:
    rng = random.Random(seed)
    parts = [rng.randbytes(n) for n in sizes]
    views: list[Any] = [memoryview(p) if i % 2 else p for i, p in enumerate(parts)]
    assert sha256_hex(views) == hashlib.sha256(b"".join(parts)).hexdigest()


def test_the_staged_hash_reads_typed_buffers_as_their_bytes() -> None:
    ids = torch.arange(STAGE, dtype=torch.int64)  # 8 stages of int64, not a byte buffer
    assert sha256_hex([ids.numpy()]) == hashlib.sha256(ids.numpy().tobytes()).hexdigest()
