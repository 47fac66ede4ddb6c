"""A request chunk's payload, received where it stays.

Once the chunk's header is read (:mod:`fake_gs.chunking.stream`), its payload streams
straight to the offset it takes in its group's buffer (:class:`~fake_gs.chunking.buffer.GroupBuffer`): chunk 0 of a new group
into a fresh buffer that becomes the group's, a next chunk of a known open group into that
group's buffer. Only a chunk that cannot go there (a resend of bytes already kept, one
racing another copy of itself, one of a group not known here) gets a buffer of its own.
The chunk machine still decides once the payload is in; a chunk it refuses, or one whose
body breaks off, leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from contract import wire
from fake_gs.chunking.buffer import GroupBuffer
from fake_gs.chunking.groups import ChunkGroup
from fake_gs.chunking.machine import OPEN
from fake_gs.chunking.stream import BodyReader, Head, malformed

#: Bytes of a chunk's payload handed to the frame hash at once (pieces arrive in 64-256 KiB).
#: Each span's hash ends by taking the GIL back from the loop, which is busy receiving: 1 MiB
#: spans made 512 such waits per 512 MiB frame, and the final chunk was answered 46-114 ms
#: after its last byte; with 8 MiB spans, 14-33 ms.
HASH_SPAN = 8 * 1024 * 1024


@dataclass
class Sink:
    """Where one chunk's payload goes: ``buffer`` at ``start`` (a group's, or a new one that
    becomes the new group's), or a private bytearray."""

    length: int
    buffer: GroupBuffer | None = None
    start: int = 0
    #: ``buffer`` was made for this chunk (chunk 0 of a group not known yet).
    fresh: bool = False
    #: The group whose ``arriving`` slot this write holds until its fate is decided.
    group: ChunkGroup | None = None
    idx: int = -1
    private: bytearray = field(default_factory=bytearray)
    written: int = 0
    #: The bytes are hashed into ``buffer``'s frame hash as they arrive.
    hashing: bool = False
    #: ``buffer`` is the arrived bytes themselves (a one-chunk frame that came whole).
    adopted: bool = False

    def view(self) -> memoryview:
        """The payload as received."""
        if self.buffer is not None:
            return self.buffer.span(self.start, self.start + self.length)
        return memoryview(self.private)

    def take_hash(self) -> None:
        """Hash the chunk into its buffer's frame hash as it streams, when it is the next in
        frame order and no other chunk streams (the digest marked before its first byte); any
        other chunk is hashed from the buffer once kept (``FrameHash.catch_up``)."""
        frame_hash = self.buffer.hash if self.buffer is not None else None
        if frame_hash is not None and frame_hash.next == self.idx and frame_hash.streaming is None:
            frame_hash.streaming, self.hashing = self.idx, True
            frame_hash.digest.mark()

    def forget(self) -> None:
        """Free what was written (the body was dropped or broke off)."""
        if self.buffer is not None:
            self.buffer.forget(self.start, self.start + self.written)
        else:
            self.private.clear()

    def finish(self, kept: bool) -> None:
        """The chunk's fate is decided: another copy of it waiting for the slot may go on, and
        its bytes stay in ``buffer``'s hash (kept) or are rolled back out."""
        if self.group is not None:
            settled = self.group.arriving.pop(self.idx, None)
            if settled is not None:
                settled.set()
            self.group = None
        if self.hashing and self.buffer is not None:
            self.buffer.hash.settle(self.idx, kept)
        self.hashing = False


def _sink(group: ChunkGroup | None, route: str, desc: dict[str, Any], length: int,
          arrived: memoryview | None) -> Sink:
    """Where a chunk's payload should be written as it arrives (under the store lock);
    ``arrived``: the whole payload, already in (a one-chunk frame is then kept in place)."""
    idx, total, size = desc["chunk_idx"], desc["total_chunks"], desc["frame_size_bytes"]
    if group is None:
        if idx == 0 and 0 < length <= size:  # opens a group: its buffer, from the start
            whole = arrived is not None and total == 1 and len(arrived) == length
            fresh = GroupBuffer(size, arrived if whole else None)
            return Sink(length, fresh, fresh=True, idx=0, adopted=whole)
        return Sink(length)
    buffer = group.buffer
    usable = (group.status == OPEN and group.route == route
              and idx not in group.received and idx not in group.arriving
              and (group.total, group.frame_size) == (total, size) and idx < total)
    if usable and buffer is not None:
        start, end = wire.chunk_span(idx, total, group.range_size, size)
        if end - start == length:
            group.arriving[idx] = asyncio.Event()
            return Sink(length, buffer, start, group=group, idx=idx)
    return Sink(length)


async def receive(body: BodyReader, head: Head, found: wire.ChunkHead, group: ChunkGroup | None, route: str,
                  lock: threading.RLock) -> Sink:
    """Choose where the chunk's payload goes (under the lock), then write it there as it
    arrives (what came with the head, then the rest), handing it to the frame hash in spans
    of :data:`HASH_SPAN` when it is the next chunk in frame order. The body must carry
    exactly the declared payload; one that does not, or breaks off, leaves nothing behind."""
    length, arrived = found.payload_len, len(head.data) >= found.payload_start + found.payload_len
    with lock:
        sink = _sink(group, route, found.desc, length, memoryview(head.data)[found.payload_start :] if arrived else None)
        sink.take_hash()
    body.on_evict = sink.forget
    hashed = 0
    try:
        piece: Any = memoryview(head.data)[found.payload_start :]
        while True:
            if sink.written + len(piece) > length:
                raise malformed(f"malformed DSSST1 frame: the chunk carries more than the {length} payload "
                                "bytes its header declares")
            if sink.buffer is None:
                sink.private += piece
            elif not sink.adopted:
                sink.buffer.write(sink.start + sink.written, piece)
            sink.written += len(piece)
            del piece
            # Hashed from the buffer (a hash running behind holds no piece alive), once a span
            # is full or the payload complete: the hashing threads wake once per span.
            if sink.hashing and (sink.written - hashed >= HASH_SPAN or sink.written == length):
                assert sink.buffer is not None
                sink.buffer.hash.digest.feed(sink.buffer.span(sink.start + hashed, sink.start + sink.written))
                hashed = sink.written
            try:
                piece = await anext(head.rest)
            except StopAsyncIteration:
                break
        if sink.written != length:
            raise malformed(f"malformed DSSST1 frame: the chunk's payload ended after {sink.written} of the "
                            f"{length} bytes its header declares")
    except BaseException:
        sink.forget()
        with lock:
            sink.finish(kept=False)
        raise
    finally:
        body.on_evict = None
    return sink
