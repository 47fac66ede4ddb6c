"""The proposed ``Idempotency-Key`` on data-plane POSTs (profile ``proposed`` only).

The first call with a key reserves it and runs; its successful answer is stored with a
fingerprint of the method, path and body (for an octet body, hashed from its pieces as the
handler streams them, so the body is never held whole for it; for a request chunk, its
header: the chunk-group rules judge its payload). A repeat in the same account with the same
fingerprint gets that answer again (same ``request_id``, same inline result) and executes
nothing; a repeat with another fingerprint is ``409 idempotency_conflict``; a repeat that
arrives while the first call still runs waits for it. Refusals (4xx, 5xx) store nothing:
nothing ran, so the key is free again. Keys live ``idempotency_window_s`` and at most
``max_idempotency_keys`` per account (oldest first out); answers over
:data:`MAX_STORED_BYTES` (only reads are that large) are not kept. In the current profile
the header is ignored, as today's service does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.responses import Response

from contract.errors import ErrorCode
from contract.idempotency import (
    IDEMPOTENCY_KEY_HEADER,
    MAX_KEY_CHARS,
    REPLAYED_HEADER,
    fingerprint,
    fingerprint_hasher,
)
from contract.routes import Route
from fake_gs.answers.refusals import ApiError
from fake_gs.chunking import stream as frame_body
from fake_gs.digest import OrderedDigest
from fake_gs.state.idempotency_keys import Entry

if TYPE_CHECKING:
    from starlette.requests import Request

    from fake_gs.http.app_state import AppState
    from fake_gs.http.body import BodyReader

#: How long a repeat waits for the first call with its key to finish.
PENDING_WAIT_S = 30.0


def _key_of(request: Request) -> str | None:
    key = request.headers.get(IDEMPOTENCY_KEY_HEADER)
    if key is None:
        return None
    # Visible ASCII only (no blanks), as the OpenAPI document states: HTTP trims blanks at
    # a header's ends, so a key with them could not be repeated byte for byte.
    if not key or len(key) > MAX_KEY_CHARS or not all("!" <= ch <= "~" for ch in key):
        raise ApiError(ErrorCode.INVALID_ARGUMENT,
                       f"{IDEMPOTENCY_KEY_HEADER} must be 1-{MAX_KEY_CHARS} visible ASCII characters")
    return key


def _replay(state: AppState, owner: str, key: str, entry: Entry) -> Response:
    keys = state.store.idempotency
    keys.replays += 1
    if state.store.rules.key_answers_crossed:
        entry = keys.latest.get(owner, entry)
    return Response(entry.body, status_code=entry.status or 200, media_type=entry.media_type,
                    headers={IDEMPOTENCY_KEY_HEADER: key, REPLAYED_HEADER: "true"})


async def _settled_entry(state: AppState, owner: str, key: str, fp: str) -> Entry | None:
    """The key's entry once its first call ended (None: the key is free)."""
    keys = state.store.idempotency
    entry = keys.lookup(owner, key, state.store.clock.time())
    if entry is not None and entry.status is None:
        try:
            await asyncio.wait_for(entry.done.wait(), PENDING_WAIT_S)
        except TimeoutError:
            raise ApiError(ErrorCode.UNAVAILABLE, f"the first call with this {IDEMPOTENCY_KEY_HEADER} "
                           "is still running; repeat it later", headers={"retry-after": "1"}) from None
        entry = keys.lookup(owner, key, state.store.clock.time())
    if entry is not None and await entry.settled_fingerprint() != fp:
        keys.conflicts += 1
        raise ApiError(ErrorCode.IDEMPOTENCY_CONFLICT,
                       f"{IDEMPOTENCY_KEY_HEADER} {key!r} was used with another method, path or body")
    return entry


async def keyed(state: AppState, route: Route, request: Request, owner: str, body: BodyReader,
                run: Callable[[], Awaitable[Response]]) -> Response:
    """Run ``run`` at most once per (account, key); repeats answer the stored answer."""
    if state.settings.profile != "proposed" or not route.keyed:
        return await run()
    key = _key_of(request)
    if key is None:
        return await run()
    keys = state.store.idempotency
    limit = state.store.rules.body_limit
    if route.body == "octet":
        head = await frame_body.read_head(body, limit, state.settings.max_frame_header_bytes)
        body.unread(head.data)
        chunk = frame_body.request_chunk_head(head.data)
        if chunk is not None:
            fp = fingerprint(route.method, request.url.path, memoryview(head.data)[: chunk.payload_start])
            return await _keyed_chunk(state, owner, key, fp, run)
        if keys.lookup(owner, key, state.store.clock.time()) is None:
            return await _first_use_streamed(state, route, request, owner, body, key, run)
    data = await body.peek(limit)
    fp = fingerprint(route.method, request.url.path, data)
    entry = await _settled_entry(state, owner, key, fp)
    if entry is not None and state.store.rules.key_replays:
        return _replay(state, owner, key, entry)
    return await _reserved_run(state, owner, key, fp, run)


async def _reserved_run(state: AppState, owner: str, key: str, fp: str,
                        run: Callable[[], Awaitable[Response]]) -> Response:
    """The first call with a key: reserve it, run, keep a successful answer."""
    keys = state.store.idempotency
    entry = keys.reserve(owner, key, fp, state.store.clock.time())
    response: Response | None = None
    try:
        response = await run()
        keys.executed += 1
    finally:
        keys.settle(owner, key, entry, response)
    response.headers[IDEMPOTENCY_KEY_HEADER] = key
    return response


async def _keyed_chunk(state: AppState, owner: str, key: str, fp: str,
                       run: Callable[[], Awaitable[Response]]) -> Response:
    """A request chunk: its identity is its chunk group (spec: the group id is the
    idempotency identity of an upload, bound to one frame by ``frame_sha256``), so the
    key's fingerprint is the chunk's header (group, index, sizes, frame hash) and a repeat
    with that same header is answered by the chunk-group rules, which never run a frame
    twice: the original request for a final chunk, progress for another, 409 for other
    bytes of a chunk the group holds. Another chunk under the key is 409
    ``idempotency_conflict``. Nothing hashes the payload a second time for the key."""
    entry = await _settled_entry(state, owner, key, fp)
    if entry is None:
        return await _reserved_run(state, owner, key, fp, run)
    state.store.idempotency.replays += 1
    response = await run()
    response.headers[IDEMPOTENCY_KEY_HEADER] = key
    return response


async def _first_use_streamed(state: AppState, route: Route, request: Request, owner: str, body: BodyReader,
                              key: str, run: Callable[[], Awaitable[Response]]) -> Response:
    """A key's first call with an octet body: the handler reads the body as it streams (a
    chunk goes straight into its group's buffer), and the fingerprint is hashed from the
    same pieces on the way, instead of the whole body being read first to hash it."""
    keys = state.store.idempotency
    digest = OrderedDigest(fingerprint_hasher(route.method, request.url.path))
    body.tap = digest.feed
    entry = keys.reserve(owner, key, "", state.store.clock.time())
    response: Response | None = None
    try:
        response = await run()
        keys.executed += 1
    finally:
        body.tap = None
        if body.done and response is not None and digest.ready():
            entry.fingerprint = str(digest.hasher.hexdigest())
        elif body.done and response is not None:  # a repeat waits for it; this answer does not
            entry.pending = asyncio.ensure_future(digest.hexdigest())
        keys.settle(owner, key, entry, response)
    response.headers[IDEMPOTENCY_KEY_HEADER] = key
    return response
