"""What the proxy keeps of a body as it passes: its first bytes for the judge (the whole of
a JSON call, a chunk's frame header), its size, its sha256 when a rule reads it, and the
tape's sink. Bounded by what it keeps, never by the body's size."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from contract.tape import BodySink
from contract.wire import frame_head_size

#: The largest frame header kept of a body past its cap (a chunk's is a few hundred bytes).
MAX_FRAME_HEAD = 1024 * 1024


@dataclass
class Observed:
    """One message's body as it passes: the part kept for the judge, its size and hash."""

    keep: int
    hash_it: bool = False
    sink: BodySink | None = None
    kept: bytearray = field(default_factory=bytearray)
    size: int = 0
    whole: bool = True
    head_done: bool = False
    _sha: Any = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self.size += len(data)
        if self.hash_it:
            if self._sha is None:
                self._sha = hashlib.sha256()
            self._sha.update(data)
        if self.sink is not None:
            self.sink.feed(data)
        if self.whole and len(self.kept) + len(data) <= self.keep:
            self.kept += data
            return
        self.whole = False
        view = memoryview(data)
        while view and not self.head_done:  # past the cap: keep a frame's header, no more
            need = frame_head_size(self.kept) if len(self.kept) >= 8 else 8
            if need is None or need > MAX_FRAME_HEAD or len(self.kept) >= need:
                self.head_done = len(self.kept) >= 8 or need is None or need > MAX_FRAME_HEAD
                if self.head_done:
                    break
            take = (need or 8) - len(self.kept)
            self.kept += view[:take]
            view = view[take:]

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest() if self._sha is not None else ""

    @property
    def satisfied(self) -> bool:
        """Has the observer all it wants of this body (the rest may pass unseen)?"""
        return not (self.hash_it or self.sink is not None or self.whole or not self.head_done)

    def passed_unseen(self, size: int) -> None:
        """``size`` more bytes went by without being looked at."""
        self.size += size
