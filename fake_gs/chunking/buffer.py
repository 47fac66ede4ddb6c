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

from contract.errors import ErrorCode
from fake_gs.answers.refusals import ApiError
from fake_gs.chunking.frame_hash import FrameHash
from fake_gs.digest import OrderedDigest

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


class GroupBuffer:
    """One frame's bytes at their final offsets (``written`` counts the bytes received) and
    its running hash (:class:`~fake_gs.chunking.frame_hash.FrameHash`)."""

    def __init__(self, size: int, arrived: memoryview | None = None) -> None:
        """A map of ``size`` bytes, or (``arrived``) the bytes of a one-chunk frame that came
        whole with its header: kept where they are, nothing mapped or copied."""
        self.size = size
        self.hash = FrameHash(OrderedDigest(hashlib.sha256()))
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

    def forget(self, start: int, end: int) -> None:
        """Give the pages wholly inside ``[start, end)`` back to the OS (an abandoned write)."""
        first = -(-start // _PAGE) * _PAGE
        last = end // _PAGE * _PAGE
        if last > first and self._map is not None and hasattr(self._map, "madvise"):
            self._map.madvise(mmap.MADV_DONTNEED, first, last - first)
