"""A request chunk's payload, received where it stays.

Once the chunk's header is read (:mod:`fake_gs.chunking.stream`), its payload streams straight to the offset it takes in
its group's buffer (:class:`~fake_gs.chunking.buffer.GroupBuffer`): chunk 0 of a new group
into a fresh buffer that becomes the group's, a next chunk of a known open group into that
group's buffer. Only a chunk that cannot go there (a resend of bytes already kept, one
racing another copy of itself, one of a group not known here) gets a buffer of its own.
The chunk machine still decides once the payload is in; a chunk it refuses, or one whose
body breaks off, leaves nothing behind.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from fake_gs.chunking.buffer import GroupBuffer
from fake_gs.chunking.groups import ChunkGroup, malformed
from fake_gs.chunking.machine import OPEN, chunk_span
from fake_gs.chunking.stream import BodyReader, Head

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
    #: Payload bytes already fed to the frame hash (it is fed in spans of ``HASH_SPAN``).
    hashed: int = 0

    def write(self, data: Any) -> None:
        if self.written + len(data) > self.length:
            raise malformed(f"malformed DSSST1 frame: the chunk carries more than the {self.length} payload "
                            "bytes its header declares")
        if self.buffer is not None:
            pos = self.start + self.written
            if not self.adopted:
                self.buffer.write(pos, data)
        else:
            self.private += data
        self.written += len(data)
        if self.hashing:
            self._feed_hash()

    def _feed_hash(self) -> None:
        """Hand the bytes written since the last span to the frame hash once a span is full
        or the payload is complete: from the buffer (a hash running behind holds no piece
        alive), in spans, so the hashing threads are woken once per span, not per piece."""
        if self.written - self.hashed < HASH_SPAN and self.written != self.length:
            return
        assert self.buffer is not None
        self.buffer.hash.digest.feed(self.buffer.span(self.start + self.hashed, self.start + self.written))
        self.hashed = self.written

    def finish(self, kept: bool) -> None:
        """The chunk's fate is decided: kept in ``buffer`` (its hash stays in) or not (rolled
        back out); another copy of it waiting for the slot may go on."""
        if self.hashing and self.buffer is not None:
            self.buffer.hash.finish(self.idx, kept)
        self.hashing = False
        self.done()

    def view(self) -> memoryview:
        if self.buffer is not None:
            return self.buffer.span(self.start, self.start + self.length)
        return memoryview(self.private)

    def forget(self) -> None:
        """Free what was written (the body was dropped or broke off)."""
        if self.buffer is not None:
            self.buffer.forget(self.start, self.start + self.written)
        else:
            self.private.clear()

    def done(self) -> None:
        if self.group is not None:
            settled = self.group.arriving.pop(self.idx, None)
            if settled is not None:
                settled.set()
            self.group = None


async def settled(group: ChunkGroup | None, idx: int) -> None:
    """Wait until no other copy of chunk ``idx`` is being written into the group's buffer."""
    while group is not None and (arriving := group.arriving.get(idx)) is not None:
        await arriving.wait()


def choose_sink(group: ChunkGroup | None, route: str, desc: dict[str, Any], length: int,
                arrived: memoryview | None = None) -> Sink:
    """Where a chunk's payload should be written as it arrives (under the store lock);
    ``arrived``: the whole payload, already in (a one-chunk frame is then kept in place)."""
    idx, total, size = desc["chunk_idx"], desc["total_chunks"], desc["frame_size_bytes"]
    if group is None:
        if idx == 0 and 0 < length <= size:  # opens a group: its buffer, from the start
            whole = arrived is not None and total == 1 and len(arrived) == length
            fresh = GroupBuffer(size, arrived if whole else None)
            return Sink(length, fresh, fresh=True, idx=0, hashing=fresh.hash.start(0), adopted=whole)
        return Sink(length)
    buffer = group.buffer
    usable = (group.status == OPEN and group.route == route
              and idx not in group.received and idx not in group.arriving
              and (group.total, group.frame_size) == (total, size) and idx < total)
    if usable and buffer is not None:
        start, end = chunk_span(idx, total, group.range_size, size)
        if end - start == length:
            group.arriving[idx] = asyncio.Event()
            return Sink(length, buffer, start, group=group, idx=idx, hashing=buffer.hash.start(idx))
    return Sink(length)


async def receive_payload(body: BodyReader, head: Head, payload_start: int, sink: Sink) -> memoryview:
    """Write the chunk's payload (what came with the head, then the rest) into ``sink``;
    the body must carry exactly the declared payload."""
    body.on_evict = sink.forget
    try:
        with memoryview(head.data) as arrived:
            sink.write(arrived[payload_start:])
        async for piece in head.rest:
            sink.write(piece)
        if sink.written != sink.length:
            raise malformed(f"malformed DSSST1 frame: the chunk's payload ended after {sink.written} of the "
                            f"{sink.length} bytes its header declares")
    except BaseException:
        sink.forget()
        raise
    finally:
        body.on_evict = None
    return sink.view()
