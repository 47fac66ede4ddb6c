"""A chunk group's frame hash: the sha256 of its frame, fed in frame order while its
chunks arrive (spec §9.3: ``frame_sha256`` is the whole frame's).

The next chunk in frame order is hashed as it streams in: the payload stage
(:mod:`fake_gs.chunking.payload`) takes the hash for it (``streaming``), marks the digest
and feeds it the chunk's spans. Once the chunk's fate is decided the judge settles the hash
(:meth:`FrameHash.settle`): a kept chunk moves the frame order on, and the chunks already in
that now follow it are fed (:meth:`FrameHash.catch_up`); a chunk not kept is rolled back
out. The final chunk's outcome reads the digest. The hashing itself runs off the loop
(:class:`fake_gs.digest.OrderedDigest`).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

from contract.wire import chunk_span
from fake_gs.digest import OrderedDigest


@dataclass
class FrameHash:
    """The frame's running hash: ``next`` is the chunk whose bytes go in next, ``streaming``
    the chunk being hashed as it arrives (the digest was marked before its first byte), if
    any."""

    #: The frame's sha256 so far (``OrderedDigest(hashlib.sha256())``).
    digest: OrderedDigest
    next: int = 0
    streaming: int | None = None

    def settle(self, idx: int, kept: bool) -> None:
        """Chunk ``idx``'s fate is decided: its streamed bytes stay in the hash (kept) or are
        rolled back out."""
        if self.streaming != idx:
            return
        self.streaming = None
        if kept:
            self.next = idx + 1
        else:
            self.digest.rollback()

    def catch_up(self, frame: memoryview, frame_size: int, received: Set[int], total: int, range_size: int) -> None:
        """Feed the received chunks now contiguous with the hashed ones (hashed on worker
        threads, off the event loop); a chunk hashed as it streamed in is already there."""
        while self.streaming is None and self.next in received:
            start, end = chunk_span(self.next, total, range_size, frame_size)
            self.digest.feed(frame[start:end])
            self.next += 1
