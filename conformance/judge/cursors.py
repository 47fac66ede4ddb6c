"""Cursors and streams under load: each result chunk reaches the client once, in a chain of
cursor pages that neither repeats nor skips one (POLL-CURSOR-1, spec §6.8), and each
generate-stream event is returned by exactly one poll (GENS-DRAIN-1, spec §6.7).

The meter shows every poll answer to a :class:`DeliveryWatch`; state is kept per request
only until the request's last page.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.judge.tally import Tally
from contract.states import REQUEST_TERMINAL, normalize_request_state
from contract.wire import RESULT_CHUNK_KEY, read_metadata

CURSOR_CLAUSE = "POLL-CURSOR-1"
STREAM_CLAUSE = "GENS-DRAIN-1"
#: Base64 characters decoded to read a result chunk's descriptor (its header comes first).
_HEAD_CHARS = 4096


def _total_chunks(event: Mapping[str, Any]) -> int | None:
    """``total_chunks`` of a result chunk event, read off the head of its payload (the whole
    payload only when its descriptor does not fit the head)."""
    text = str(event.get("payload_b64") or "")
    for part in dict.fromkeys((text[:_HEAD_CHARS], text)):
        try:
            desc = read_metadata(base64.b64decode(part)).get(RESULT_CHUNK_KEY)
        except (binascii.Error, ValueError):
            desc = None
        total = desc.get("total_chunks") if isinstance(desc, Mapping) else None
        if isinstance(total, int):
            return total
    return None


@dataclass
class _Chunks:
    """One request's result chunks: the cursor each came under, and how many there are."""

    by_sha: dict[str, str | None] = field(default_factory=dict)
    total: int | None = None


@dataclass
class _Stream:
    """One generate-stream request: the prompt count, the indexes returned so far."""

    count: int
    seen: set[int] = field(default_factory=set)
    lossy: bool = False


class DeliveryWatch:
    """Judges the pages of every polled request; violations go to ``tally``."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.streams: dict[str, _Stream] = {}
        self.chunks: dict[str, _Chunks] = {}

    def stream_submitted(self, request_id: str, count: Any) -> None:
        if isinstance(count, int) and count >= 0:
            self.streams[request_id] = _Stream(count)

    def poll_failed(self, request_id: str) -> None:
        """A poll went unanswered: its events may be lost legitimately (spec §6.7)."""
        if request_id in self.streams:
            self.streams[request_id].lossy = True

    def page(self, request_id: str, cursor: str | None, body: Mapping[str, Any]) -> None:
        """One 200 poll answer of ``request_id``, asked with ``cursor``."""
        events = [e for e in body.get("events") or [] if isinstance(e, Mapping)]
        if request_id in self.streams:
            self.tally.saw(STREAM_CLAUSE)
            self._stream_page(request_id, events)
            return
        chunk_events = [e for e in events if e.get("type") == "result_chunk"]
        if chunk_events:
            self.tally.saw(CURSOR_CLAUSE)
            self._chunk_page(request_id, cursor, chunk_events)
        last = not body.get("next_cursor")
        if last and normalize_request_state(body.get("status")) in REQUEST_TERMINAL:
            self._chunks_end(request_id)

    def _stream_page(self, request_id: str, events: list[Mapping[str, Any]]) -> None:
        stream = self.streams[request_id]
        for event in events:
            index = event.get("index")
            if event.get("type") in ("result", "error") and isinstance(index, int):
                if index in stream.seen:
                    self.tally.violation(STREAM_CLAUSE, f"request {request_id}: stream event "
                                                        f"{index} returned by a second poll")
                stream.seen.add(index)
            elif event.get("type") == "done":
                self._stream_end(request_id, stream)

    def _stream_end(self, request_id: str, stream: _Stream) -> None:
        del self.streams[request_id]
        missing = sorted(set(range(stream.count)) - stream.seen)
        if missing and not stream.lossy:
            self.tally.violation(STREAM_CLAUSE, f"request {request_id}: done with events "
                                                f"{missing[:8]} of {stream.count} never returned",
                                 count=len(missing))

    def _chunk_page(self, request_id: str, cursor: str | None,
                    events: list[Mapping[str, Any]]) -> None:
        state = self.chunks.setdefault(request_id, _Chunks())
        if state.total is None:
            state.total = _total_chunks(events[0])
        for event in events:
            sha = str(event.get("payload_sha256"))
            if sha in state.by_sha and state.by_sha[sha] != cursor:
                self.tally.violation(CURSOR_CLAUSE, f"request {request_id}: a result chunk came "
                                                    f"again under cursor {cursor!r}")
            state.by_sha.setdefault(sha, cursor)

    def _chunks_end(self, request_id: str) -> None:
        state = self.chunks.pop(request_id, None)
        if state is None or state.total is None:
            return
        if len(state.by_sha) < state.total:
            self.tally.violation(CURSOR_CLAUSE, f"request {request_id}: the cursor pages ended "
                                                f"with {len(state.by_sha)} of {state.total} "
                                                "result chunks", count=state.total - len(state.by_sha))
