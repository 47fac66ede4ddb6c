"""The frame hash of a chunk group (fake_gs/chunking/frame_hash.py): the next chunk in frame
order takes it as it streams in (``Sink.take_hash``, the digest marked before its first
byte), its bytes stay when the judge keeps it and are rolled back out when it does not; a
chunk hashed from the buffer once kept joins in frame order."""

from __future__ import annotations

import asyncio
import hashlib

from fake_gs.chunking.buffer import GroupBuffer
from fake_gs.chunking.frame_hash import FrameHash
from fake_gs.chunking.payload import Sink


def _hex(frame_hash: FrameHash) -> str:
    return asyncio.run(frame_hash.digest.hexdigest())


def _stream(buffer: GroupBuffer, idx: int, start: int, data: bytes) -> Sink:
    """What the payload stage does with chunk ``idx``'s bytes: written in place, and fed
    to the frame hash when the chunk took it."""
    sink = Sink(len(data), buffer, start, idx=idx)
    sink.take_hash()
    buffer.write(start, data)
    if sink.hashing and data:
        buffer.hash.digest.feed(buffer.span(start, start + len(data)))
    return sink


def test_a_streamed_chunk_not_kept_is_rolled_back_out() -> None:
    buffer = GroupBuffer(11)
    assert _stream(buffer, 0, 0, b"kept").hashing
    buffer.hash.settle(0, kept=True)
    assert buffer.hash.next == 1
    sink = _stream(buffer, 1, 4, b"dropped")
    assert sink.hashing and buffer.hash.streaming == 1
    assert not _stream(buffer, 1, 4, b"dropped").hashing  # one chunk streams at a time
    sink.finish(kept=False)
    assert buffer.hash.next == 1 and buffer.hash.streaming is None
    assert _hex(buffer.hash) == hashlib.sha256(b"kept").hexdigest()


def test_a_chunk_dropped_before_its_first_byte_was_hashed_rolls_nothing_back() -> None:
    """The hash of the chunk kept before stays in (no remembered state of an earlier chunk
    is restored)."""
    buffer = GroupBuffer(11)
    _stream(buffer, 0, 0, b"first")
    buffer.hash.settle(0, kept=True)
    _stream(buffer, 1, 5, b"").finish(kept=False)
    _stream(buffer, 1, 5, b"second")
    buffer.hash.settle(1, kept=True)
    assert _hex(buffer.hash) == hashlib.sha256(b"firstsecond").hexdigest()


def test_a_chunk_not_next_in_frame_order_is_not_hashed_as_it_streams() -> None:
    buffer = GroupBuffer(8)
    assert not _stream(buffer, 1, 4, b"bbbb").hashing
    assert buffer.hash.streaming is None and buffer.hash.next == 0


def test_chunks_kept_out_of_order_are_hashed_in_frame_order() -> None:
    frame = b"aaaabbbbcc"
    buffer = GroupBuffer(len(frame))
    buffer.write(4, frame[4:8])
    buffer.hash.catch_up(buffer.view, buffer.size, {1}, total=3, range_size=4)
    assert buffer.hash.next == 0  # chunk 0 is not in yet
    buffer.write(0, frame[:4])
    buffer.write(8, frame[8:])
    buffer.hash.catch_up(buffer.view, buffer.size, {0, 1, 2}, total=3, range_size=4)
    assert buffer.hash.next == 3
    assert _hex(buffer.hash) == hashlib.sha256(frame).hexdigest()
