"""The keys of the proposed ``Idempotency-Key`` header the store keeps, per account.

Only the bookkeeping lives here (reserve, look up, expire, settle); how a request with a
key is answered is ``fake_gs.http.idempotency``'s, above the store.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.responses import Response

#: The largest answer kept for repeats (submit answers are ~100 bytes).
MAX_STORED_BYTES = 16 * 1024
@dataclass
class Entry:
    """One key of one account: its fingerprint and, once the first call ended, its answer."""

    fingerprint: str
    created: float
    status: int | None = None
    body: bytes = b""
    media_type: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    #: The fingerprint of a body hashed as it streamed, while its hash is still finishing.
    pending: asyncio.Future[str] | None = None

    async def settled_fingerprint(self) -> str:
        if self.pending is not None:
            self.fingerprint = await self.pending
            self.pending = None
        return self.fingerprint


class KeyStore:
    """Keys per account, in creation order (so expiry and eviction pop from the front)."""

    def __init__(self, window_s: float, max_keys: int) -> None:
        self.window_s = window_s
        self.max_keys = max_keys
        self.accounts: dict[str, OrderedDict[str, Entry]] = {}
        self.replays = 0
        self.conflicts = 0
        self.executed = 0
        #: Last stored answer per account (what the bend ``key-crossed-answer`` answers).
        self.latest: dict[str, Entry] = {}

    def lookup(self, owner: str, key: str, now: float) -> Entry | None:
        keys = self.accounts.setdefault(owner, OrderedDict())
        while keys:
            oldest = next(iter(keys.values()))
            if oldest.created + self.window_s > now and len(keys) <= self.max_keys:
                break
            keys.popitem(last=False)
        return keys.get(key)

    def reserve(self, owner: str, key: str, fp: str, now: float) -> Entry:
        entry = Entry(fp, now)
        keys = self.accounts.setdefault(owner, OrderedDict())
        keys.pop(key, None)  # a re-used key goes to the back: the order stays by creation
        keys[key] = entry
        return entry

    def settle(self, owner: str, key: str, entry: Entry, response: Response | None) -> None:
        """Keep a successful answer for repeats; free the key after anything else."""
        body = bytes(response.body) if response is not None else b""
        if response is not None and response.status_code < 400 and len(body) <= MAX_STORED_BYTES:
            entry.status, entry.body, entry.media_type = response.status_code, body, response.media_type
            self.latest[owner] = entry
        else:
            keys = self.accounts.get(owner)
            if keys is not None and keys.get(key) is entry:
                del keys[key]
        entry.done.set()

    def describe(self) -> dict[str, Any]:
        return {"keys": sum(len(k) for k in self.accounts.values()), "replays": self.replays,
                "conflicts": self.conflicts, "executed": self.executed,
                "window_s": self.window_s}
