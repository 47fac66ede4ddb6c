"""Where a chunk group's frame lands: one buffer, written as bytes arrive, decoded in place.

The buffer is an anonymous memory map the size of the declared frame, so every chunk is
written straight to its offset as its bytes come off the socket, in any order, and the
finished frame is already contiguous: nothing is joined, and decoding makes its tensors
views of it (``wire.loads(share=True)``). Only pages bytes are written to take memory
(the map is made without a swap reservation), so what a group costs follows the bytes
received; the declared size costs address space only, which the chunk caps bound. Dropping
the last reference (the group's, then the decoded tensors') unmaps it.
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import sys
from collections.abc import Set

from contract.errors import ErrorCode
from fake_gs.answers.refusals import ApiError
from fake_gs.chunking.digest import OrderedDigest

#: Map without reserving swap for the whole size (Linux): untouched pages cost nothing and
#: a large declared frame never fails for lack of commit charge.
_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)
_PAGE = mmap.PAGESIZE
#: ``madvise`` advice that faults a range's pages in with one call (Linux 5.14+): a write
#: into fresh pages then costs no page fault per 4 KiB. Only the range being written is
#: populated, so memory still follows the bytes received.
_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform.startswith("linux") else None)


def _anonymous_map(size: int) -> mmap.mmap:
    if sys.platform == "win32":  # pragma: no cover - the fake runs on POSIX hosts
        return mmap.mmap(-1, size)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _NORESERVE
    return mmap.mmap(-1, size, flags=flags)


def chunk_span(idx: int, total: int, range_size: int, frame_size: int) -> tuple[int, int]:
    """The frame bytes chunk ``idx`` carries: equal ranges, the last one takes the rest."""
    start = idx * range_size
    end = frame_size if idx == total - 1 else start + range_size
    return start, end


class FrameHash:
    """The frame's sha256, fed in frame order while its bytes arrive: ``next`` is the chunk
    whose bytes go in next; that chunk may be hashed piece by piece as it streams in
    (``streaming``), and is rolled back out if it ends up not kept."""

    def __init__(self) -> None:
        self.digest = OrderedDigest(hashlib.sha256())
        self.next = 0
        self.streaming: int | None = None
        #: The state before the streaming chunk's first byte is remembered (for a rollback).
        self._marked = False

    def start(self, idx: int) -> bool:
        """Hash chunk ``idx`` as it arrives, if it is the next one and no other streams."""
        if idx != self.next or self.streaming is not None:
            return False
        self.streaming, self._marked = idx, False
        return True

    def feed(self, piece: memoryview) -> None:
        """The streaming chunk's next bytes (the hash's state before its first is remembered)."""
        if not self._marked:
            self.digest.mark()
            self._marked = True
        self.digest.feed(piece)

    def finish(self, idx: int, kept: bool) -> None:
        """Chunk ``idx``'s fate is decided: its bytes stay in the hash (kept) or are rolled
        back out."""
        if self.streaming != idx:
            return
        self.streaming = None
        if kept:
            self.next = idx + 1
        elif self._marked:
            self.digest.rollback()
        self._marked = False


class GroupBuffer:
    """One frame's bytes at their final offsets (``written`` counts the bytes received) and
    its running hash."""

    def __init__(self, size: int, arrived: memoryview | None = None) -> None:
        """A map of ``size`` bytes, or (``arrived``) the bytes of a one-chunk frame that came
        whole with its header: kept where they are, nothing mapped or copied."""
        self.size = size
        self.hash = FrameHash()
        self._map: mmap.mmap | None = None
        if arrived is not None:
            self.view = arrived
        else:
            self._map = self._mapped(size)
            self.view = memoryview(self._map)[:size]
        self.written = 0

    @staticmethod
    def _mapped(size: int) -> mmap.mmap:
        try:
            mapped = _anonymous_map(max(size, 1))
        except (OSError, OverflowError, ValueError) as exc:  # only past caps raised (or waived)
            raise ApiError(ErrorCode.BUFFER_LIMIT, f"cannot hold a frame of {size} bytes: {exc}") from None
        if hasattr(mmap, "MADV_NOHUGEPAGE"):  # one byte written must not fault in 2 MiB
            mapped.madvise(mmap.MADV_NOHUGEPAGE)
        return mapped

    def write(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        self._populate(pos, pos + len(data))
        self.view[pos : pos + len(data)] = data

    def _populate(self, start: int, end: int) -> None:
        """Fault in the pages of ``[start, end)`` at once, before they are written (a kernel
        without the advice, or one short of memory, leaves them to fault one by one)."""
        global _POPULATE_WRITE
        if _POPULATE_WRITE is None or self._map is None or end <= start:
            return
        first = start // _PAGE * _PAGE
        try:
            self._map.madvise(_POPULATE_WRITE, first, end - first)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOSYS):  # an older kernel: never ask again
                _POPULATE_WRITE = None

    def span(self, start: int, end: int) -> memoryview:
        return self.view[start:end]

    def hash_in_order(self, received: Set[int], total: int, range_size: int) -> None:
        """Queue the received chunks now contiguous with the hashed ones (hashed on worker
        threads, off the event loop); a chunk hashed as it streamed in is already there."""
        frame_hash = self.hash
        while frame_hash.streaming is None and frame_hash.next in received:
            frame_hash.digest.feed(self.span(*chunk_span(frame_hash.next, total, range_size, self.size)))
            frame_hash.next += 1

    def forget(self, start: int, end: int) -> None:
        """Give the pages wholly inside ``[start, end)`` back to the OS (an abandoned write)."""
        first = -(-start // _PAGE) * _PAGE
        last = end // _PAGE * _PAGE
        if last > first and self._map is not None and hasattr(self._map, "madvise"):
            self._map.madvise(mmap.MADV_DONTNEED, first, last - first)
