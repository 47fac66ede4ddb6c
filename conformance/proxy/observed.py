"""What the proxy keeps of a body as it passes: its first bytes for the judge (the whole of
a JSON call, a chunk's frame header), its size, its sha256 when a rule reads it, a request
chunk's payload fed into its group's running frame hash when the judge asks for it, and the
tape's sink. Bounded by what it keeps, never by the body's size."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contract.tape import BodySink
from contract.wire import ChunkHead, WireError, frame_head_size, read_chunk_head

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
    #: Asked, once a request chunk's header is in, for its group's frame hash so far (a
    #: hashlib object this chunk's payload continues; None: the judge does not hash it).
    group_hash: Callable[[ChunkHead], Any] | None = None
    #: The group's frame hash through this chunk's payload (what ``group_hash`` gave, fed).
    frame_hash: Any = None
    _sha: Any = None
    _asked: bool = False
    _payload: tuple[int, int] = (0, 0)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        at = self.size
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
        if self.group_hash is not None and not self._asked:
            self._ask()
        if self.frame_hash is not None:
            start, end = max(at, self._payload[0]), min(self.size, self._payload[1])
            if start < end:
                self.frame_hash.update(memoryview(data)[start - at:end - at])

    def _ask(self) -> None:
        """Once the chunk's header is in: the group's hash to continue, and where the payload lies."""
        need = frame_head_size(self.kept)
        if need is None or (need <= MAX_FRAME_HEAD and len(self.kept) < need):
            return  # the header is still arriving
        self._asked = True
        if need > MAX_FRAME_HEAD:
            return
        try:
            head = read_chunk_head(bytes(self.kept[:need]))
        except WireError:
            return
        if head is not None and head.kind == "request" and self.group_hash is not None:
            self.frame_hash = self.group_hash(head)
            self._payload = (head.payload_start, head.payload_start + head.payload_len)

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest() if self._sha is not None else ""

    @property
    def satisfied(self) -> bool:
        """Has the observer all it wants of this body (the rest may pass unseen)?"""
        return not (self.hash_it or self.sink is not None or self.whole or not self.head_done
                    or self.frame_hash is not None or (self.group_hash is not None and not self._asked))

    def passed_unseen(self, size: int) -> None:
        """``size`` more bytes went by without being looked at."""
        self.size += size
