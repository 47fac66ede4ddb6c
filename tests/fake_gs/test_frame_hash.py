"""The frame hash of a chunk group (fake_gs/chunking/buffer.py): fed in frame order as a
chunk streams in, its state before the chunk's first byte remembered at that byte, and
the chunk's bytes rolled back out when it is not kept; a chunk hashed from the buffer once
kept joins in frame order."""

from __future__ import annotations

import asyncio
import hashlib

from fake_gs.chunking.buffer import FrameHash, GroupBuffer


def _hex(frame_hash: FrameHash) -> str:
    return asyncio.run(frame_hash.digest.hexdigest())


def test_a_streamed_chunk_not_kept_is_rolled_back_out() -> None:
    frame_hash = FrameHash()
    assert frame_hash.start(0)
    frame_hash.feed(memoryview(b"kept"))
    frame_hash.finish(0, kept=True)
    assert frame_hash.next == 1 and frame_hash.start(1) and not frame_hash.start(1)
    frame_hash.feed(memoryview(b"dropped"))
    frame_hash.finish(1, kept=False)
    assert frame_hash.next == 1 and frame_hash.streaming is None
    assert _hex(frame_hash) == hashlib.sha256(b"kept").hexdigest()


def test_a_chunk_dropped_before_its_first_byte_was_hashed_rolls_nothing_back() -> None:
    """The hash of the chunk kept before stays in (no remembered state of an earlier chunk
    is restored)."""
    frame_hash = FrameHash()
    assert frame_hash.start(0)
    frame_hash.feed(memoryview(b"first"))
    frame_hash.finish(0, kept=True)
    assert frame_hash.start(1)
    frame_hash.finish(1, kept=False)
    assert frame_hash.start(1)
    frame_hash.feed(memoryview(b"second"))
    frame_hash.finish(1, kept=True)
    assert _hex(frame_hash) == hashlib.sha256(b"firstsecond").hexdigest()


def test_chunks_kept_out_of_order_are_hashed_in_frame_order() -> None:
    frame = b"aaaabbbbcc"
    buffer = GroupBuffer(len(frame))
    buffer.write(4, frame[4:8])
    buffer.hash_in_order({1}, total=3, range_size=4)
    assert buffer.hash.next == 0  # chunk 0 is not in yet
    buffer.write(0, frame[:4])
    buffer.write(8, frame[8:])
    buffer.hash_in_order({0, 1, 2}, total=3, range_size=4)
    assert buffer.hash.next == 3
    assert _hex(buffer.hash) == hashlib.sha256(frame).hexdigest()
