"""Hashes fed on the event loop as bytes arrive and computed on worker threads, in order.

A body (or a chunk group's frame) is hashed while it is still being received instead of
after: the loop only queues each piece, a small shared pool of threads does the hashing
(hashlib lets go of the GIL), one digest's pieces always in the order they were fed. A
digest can mark where a piece of input starts and roll back to that mark (a chunk whose
body broke off). Pieces must not change once fed (the server's body pieces are ``bytes``;
a group's buffer is written once per chunk).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

#: The first bytes of a digest are hashed on the loop at once (for a small body, queueing
#: costs more than hashing); past them every piece goes to the threads.
INLINE_BYTES = 256 * 1024

_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fake-gs-hash")
_MARK, _ROLLBACK = object(), object()


class OrderedDigest:
    """One running hash; :meth:`feed` never blocks the loop on a large piece."""

    def __init__(self, hasher: Any) -> None:
        self.hasher = hasher
        self.fed = 0
        self._saved: Any = None
        self._items: deque[Any] = deque()
        self._lock = threading.Lock()
        self._running: Future[None] | None = None

    def feed(self, piece: Any) -> None:
        self.fed += len(piece)
        if self.fed <= INLINE_BYTES and self._idle():
            self.hasher.update(piece)
        else:
            self._queue(piece)

    def mark(self) -> None:
        """Remember the state here (:meth:`rollback` returns to it)."""
        self._step(_MARK)

    def rollback(self) -> None:
        """Forget what was fed since :meth:`mark`."""
        self._step(_ROLLBACK)

    def _step(self, item: Any) -> None:
        if self._idle():
            self._apply(item)
        else:
            self._queue(item)

    def ready(self) -> bool:
        """Everything fed is hashed (the digest can be read without waiting)."""
        return self._idle()

    async def hexdigest(self) -> str:
        """The digest of everything fed (waits, off the loop, for the threads to catch up)."""
        while (running := self._current()) is not None:
            await asyncio.wrap_future(running)
        return str(self.hasher.hexdigest())

    def _idle(self) -> bool:
        with self._lock:
            return self._running is None

    def _current(self) -> Future[None] | None:
        with self._lock:
            return self._running

    def _apply(self, item: Any) -> None:
        if item is _MARK:
            self._saved = self.hasher.copy()
        elif item is _ROLLBACK:
            if self._saved is not None:
                self.hasher = self._saved
            self._saved = None
        else:
            self.hasher.update(item)

    def _queue(self, item: Any) -> None:
        with self._lock:
            self._items.append(item)
            if self._running is None:
                self._running = _POOL.submit(self._drain)

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._items:
                    self._running = None
                    return
                item = self._items.popleft()
            self._apply(item)
