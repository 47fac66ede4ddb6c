"""Frame intake: one octet body in, an acknowledgement or a submitted request out.

A route's handler makes one call, :func:`take`, with the body and a :class:`Frames` (what
the route builds from a decoded frame). :func:`take` reads top to bottom, one stage per
module, each stage called once and in order:

1. :mod:`~fake_gs.chunking.stream`: the body's head, and what it alone rules out. A plain
   frame is then read whole and decoded in place (:mod:`~fake_gs.chunking.decode`).
2. A request chunk (spec §9.3): its job's groups, idle ones expired
   (:mod:`~fake_gs.chunking.registry`); the descriptor facts the codec does not check
   (:mod:`~fake_gs.chunking.machine`); where its bytes go, and its payload received there
   (:mod:`~fake_gs.chunking.payload`, into :mod:`~fake_gs.chunking.buffer`, hashed as it
   arrives).
3. Judged by the chunk machine through the rules in force and carried out on the group
   (:mod:`~fake_gs.chunking.judge`).
4. Its answer (:mod:`~fake_gs.chunking.outcome`): a non-final chunk is acknowledged
   (:class:`Acknowledged`); the final chunk verifies, decodes and builds the request
   exactly once, and a replayed final chunk resolves to the original request (CG-IDEM-1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol

from fake_gs.answers.refusals import ApiError
from fake_gs.chunking import judge, payload, stream
from fake_gs.chunking import machine as cm
from fake_gs.chunking.decode import REQUEST_LIMITS, decode, request_limits
from fake_gs.chunking.groups import ChunkGroup
from fake_gs.chunking.outcome import Acknowledged, R, Submitted, acknowledge, replay, run_once
from fake_gs.chunking.registry import GroupRegistry
from fake_gs.chunking.stream import check_header, json_containers, refuse_legacy

__all__ = ["REQUEST_LIMITS", "Acknowledged", "ChunkGroup", "Frames", "IntakeRules", "Submitted", "check_header",
           "json_containers", "refuse_legacy", "request_limits", "take"]


class IntakeRules(Protocol):
    """The rules the intake reads, decided once for the running fake (the store's
    ``fake_gs.state.rules.Rules``)."""

    @property
    def body_limit(self) -> int: ...

    @property
    def legacy_payloads_refused(self) -> bool: ...

    @property
    def deep_frame_crashes(self) -> bool: ...

    @property
    def chunk_points(self) -> frozenset[str]: ...


@dataclass
class Frames(Generic[R]):
    """What one octet call of a route brings to the intake."""

    #: The chunk groups (with the store's lock, clock and settings) and the rules in force.
    groups: GroupRegistry
    rules: IntakeRules
    #: The call: its route, its job (key, id as the caller names it, owner), its body.
    route: str
    job_key: str
    job_id: str
    owner: str
    body: stream.BodyReader
    #: The refusal of the body's content type, answered once its head is in (None: it is right).
    media_refusal: ApiError | None
    #: Builds and submits the route's request from a decoded frame (and its group).
    build: Callable[[Any, ChunkGroup | None], R]
    #: What a fake that waives the payload rules submits instead of a frame it cannot run.
    build_unread: Callable[[ChunkGroup | None], R]
    #: The request a finished group ran, by its id.
    original: Callable[[str], R]


async def take(call: Frames[R]) -> Acknowledged | R:
    """One octet body: a plain frame, or one request chunk of a group (streamed into its
    group's buffer as it arrives), through the stages the module docstring lists."""
    rules, registry = call.rules, call.groups
    settings = registry.settings
    head = await stream.read_head(call.body, rules.body_limit, settings.max_frame_header_bytes)
    try:
        found = stream.opening(head.data, call.media_refusal, rules.legacy_payloads_refused, settings)
    except ApiError:
        await stream.discard_rest(head)
        raise
    if found == stream.UNREAD:
        await stream.discard_rest(head)
        return call.build_unread(None)
    if found is None:  # a plain frame (or one too short to say): read it whole, decode in place
        body = await stream.read_rest(call.body, head)
        stream.check_header(body, settings)
        obj = await decode(settings, body, deep_crashes=rules.deep_frame_crashes)
        del body
        return call.build(obj, None)
    assert not isinstance(found, str)
    # A request chunk. Before its payload: the refusal its header alone rules out (a new
    # group over the caps, reclaiming room first if it is within its share).
    registry.expire(call.job_key)
    groups = registry.job_groups(call.job_key)
    chunk = cm.Chunk(call.job_id, call.route, found.desc, found.payload_len)
    gid = found.desc["chunk_group_id"]
    arrived = len(head.data) >= found.payload_start + found.payload_len  # nothing left to stream
    early: cm.Decision | None = None
    if gid not in groups and not arrived:
        with registry.lock:
            early = judge.decide(registry, rules.chunk_points, chunk, None, call.owner, call.job_key)
    if isinstance(early, cm.Refuse):  # answered as soon as the body is in; none of it is kept
        await stream.discard_rest(head)
        raise judge.refusal(early)
    # The payload, received where it stays, then judged and carried out.
    sink = await payload.receive(call.body, head, found, groups.get(gid), call.route, registry.lock)
    decision, group = await judge.judge(registry, rules.chunk_points, chunk, sink, groups, call.owner, call.job_key)
    if isinstance(decision, cm.Ack):
        return acknowledge(group, found.desc["chunk_idx"], decision)
    if isinstance(decision, cm.Replay):
        return await replay(group, decision, call.build, call.original)
    assert isinstance(decision, cm.Execute)  # carrying out raised every refusal
    return await run_once(group, decision, groups, registry.lock, settings, rules.deep_frame_crashes,
                          call.build, call.build_unread)
