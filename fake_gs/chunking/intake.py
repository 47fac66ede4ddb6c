"""Frame intake: one octet body in, an acknowledgement or a submitted request out.

A route's handler makes one call, :func:`take`, with the body and a :class:`Frames` (what
the route builds from a decoded frame). A plain frame is read whole and decoded in place;
a request chunk (spec §9.3) is placed before its payload arrives (a refusal its header
alone rules out, else where its bytes go: :mod:`fake_gs.chunking.stream`), received, judged
by the chunk machine (:mod:`fake_gs.chunking.machine`, through :mod:`fake_gs.chunking.hooks`),
and the decision carried out on the group registry: a non-final chunk is acknowledged
(:class:`Acknowledged`), the final one reassembles, verifies and decodes the frame and
builds the request exactly once, and a replayed final chunk resolves to the original
request (CG-IDEM-1).
"""

from __future__ import annotations

import functools
import operator
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from starlette.concurrency import run_in_threadpool

from contract import wire
from contract.errors import ErrorCode
from contract.models import ChunkAccepted
from fake_gs.answers import check as answers
from fake_gs.answers.refusals import ApiError
from fake_gs.chunking import hooks, stream
from fake_gs.chunking import machine as cm
from fake_gs.chunking.groups import DONE, FAILED, FINALIZING, ChunkGroup, malformed, new_group
from fake_gs.chunking.registry import GroupRegistry
from fake_gs.chunking.stream import Sink
from fake_gs.ops.seams import Bend, Rule, Seams
from fake_gs.settings import FakeSettings


class Submitted(Protocol):
    """A request a route built (the store's request record)."""

    @property
    def request_id(self) -> str: ...


R = TypeVar("R", bound=Submitted)

#: Decoder limits for request frames with the default settings (LIMIT-FRAME-1).
REQUEST_LIMITS = wire.REQUEST_FRAME_LIMITS
#: What a fake whose chunk rules skip the frame limits decodes reassembled frames with.
_LAX_LIMITS = wire.WireLimits(max_depth=10_000, max_tensors=10**9, max_json_bytes=2**40)


@dataclass(frozen=True)
class Acknowledged:
    """A non-final chunk kept (or a repeat of one): its progress answer (202, CG-NONFINAL-1)."""

    answer: dict[str, Any]


@dataclass
class Frames(Generic[R]):
    """What one octet call of a route brings to the intake."""

    #: The chunk groups (with the store's lock and clock) and the running fake's rules.
    groups: GroupRegistry
    rules: Seams
    #: The call: its route, its job (key, id as the caller names it, owner), its body.
    route: str
    job_key: str
    job_id: str
    owner: str
    body: stream.BodyReader
    body_limit: int
    #: Refuses a body of the wrong media type (ApiError).
    check_media_type: Callable[[], None]
    #: Builds and submits the route's request from a decoded frame (and its group).
    build: Callable[[Any, ChunkGroup | None], R]
    #: What a fake that waives the payload rules submits instead of a frame it cannot run.
    build_unread: Callable[[ChunkGroup | None], R]
    #: The request a finished group ran, by its id.
    original: Callable[[str], R]

    @property
    def settings(self) -> FakeSettings:
        return self.groups.settings


def json_containers(data: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
    """An upper bound of the arrays and objects a JSON text holds (brackets in strings
    count too), found without parsing it."""
    end = len(data) if end is None else end
    return data.count(b"[", start, end) + data.count(b"{", start, end)


@functools.lru_cache(maxsize=32)
def request_limits(settings: FakeSettings) -> wire.WireLimits:
    """The decoder limits a fake with these settings applies to request frames."""
    return wire.WireLimits(
        max_header_bytes=settings.max_frame_header_bytes,
        max_depth=settings.max_tree_depth,
        max_tensors=settings.max_tensors,
        max_json_bytes=settings.max_frame_json_bytes,
    )


def refuse_legacy(data: Any) -> None:
    kind = wire.sniff_refused_payload(data)
    if kind is not None:
        raise ApiError(ErrorCode.LEGACY_PAYLOAD_REFUSED,
                       f"legacy pickle/torch.save payloads are refused ({kind}); send a DSSST1 frame")


def check_header(data: Any, settings: FakeSettings) -> None:
    """Refuse a frame whose header is over the length cap, or holds more JSON arrays and
    objects than allowed, before anything parses it (bounded time and memory)."""
    if len(data) < 8:
        return
    (size,) = struct.unpack_from("<Q", data, 0)
    if size > settings.max_frame_header_bytes:
        raise malformed(f"malformed DSSST1 frame: header length {size} exceeds the "
                        f"{settings.max_frame_header_bytes} byte cap")
    if size > len(data) - 8:
        return  # the codec refuses it with the precise reason
    buf = data if isinstance(data, (bytes, bytearray)) else bytes(memoryview(data)[: 8 + size])
    if json_containers(buf, 8, 8 + size) > settings.max_json_containers:
        raise malformed(f"malformed DSSST1 frame: the header holds more than {settings.max_json_containers} "
                        "JSON arrays/objects")


def _decode(data: Any, limits: wire.WireLimits, deep_500: bool = False) -> Any:
    refuse_legacy(data)
    try:
        return wire.loads(data, limits=limits, share=True)  # the buffer is the request's now
    except wire.WireError as exc:
        if deep_500 and "deep" in str(exc):
            raise RuntimeError(f"deep frame crashed the decoder: {exc}") from None
        raise malformed(f"malformed DSSST1 frame: {exc}") from None
    except RecursionError:
        if deep_500:
            raise RuntimeError("deep frame crashed the decoder: recursion") from None
        raise malformed("malformed DSSST1 frame: nests too deeply") from None


async def decode_frame(settings: FakeSettings, rules: Seams, data: Any, *, frame_limits: bool = True) -> Any:
    """Decode off the event loop; ``data`` is handed over (its tensors become views of it).

    ``frame_limits`` False (a chunk rule transformed) decodes with next to no limits."""
    limits = request_limits(settings)
    if not frame_limits:
        limits = _LAX_LIMITS
    else:
        refuse_legacy(data)
        check_header(data, settings)
    return await run_in_threadpool(_decode, data, limits, rules.bends(Bend.DEEP_FRAME_500))


def _chunk_head(data: bytearray) -> wire.ChunkHead | None:
    """The request or result chunk ``data`` starts with; None for a plain frame, or for a
    body that ended before its header did (the codec then says what is wrong with it)."""
    size = wire.frame_head_size(data)
    if size is None or len(data) < size:
        return None
    try:
        return wire.read_chunk_head(data)
    except wire.WireError as exc:
        raise malformed(f"malformed DSSST1 frame: {exc}") from None


async def take(call: Frames[R]) -> Acknowledged | R:
    """One octet body: a plain frame, or one request chunk of a group (streamed into its
    group's buffer as it arrives)."""
    settings = call.settings
    head = await stream.read_head(call.body, call.body_limit, settings.max_frame_header_bytes)
    try:
        call.check_media_type()
        if not head.data:
            raise ApiError(ErrorCode.MALFORMED_FRAME, "empty body: expected a DSSST1 frame")
        if wire.sniff_refused_payload(head.data) is not None and not call.rules.enforces(Rule.PAYLOAD_REFUSED):
            await stream.discard_rest(head)
            return call.build_unread(None)
        refuse_legacy(head.data)
        check_header(head.data, settings)
        found = _chunk_head(head.data)
        if found is not None and found.kind != "request":
            raise malformed("expected a request chunk, got a result chunk")
    except ApiError:
        await stream.discard_rest(head)
        raise
    if found is None:  # a plain frame (or one too short to say): read it whole, decode in place
        body = await stream.read_rest(call.body, head)
        check_header(body, settings)
        obj = await decode_frame(settings, call.rules, body)
        del body
        return call.build(obj, None)
    return await _ChunkIntake(call, found, head).take()


def _refuse(refusal: cm.Refuse) -> ApiError:
    return ApiError(refusal.code, refusal.message, list(refusal.detail) if refusal.detail else None)


class _ChunkIntake(Generic[R]):
    """One request chunk through the group protocol, step by step."""

    def __init__(self, call: Frames[R], head: wire.ChunkHead, body: stream.Head) -> None:
        self.call, self.head, self.body = call, head, body
        self.registry = call.groups
        self.lock = call.groups.lock
        self.gid, self.idx = head.desc["chunk_group_id"], head.desc["chunk_idx"]
        self.chunk = cm.Chunk(call.job_id, call.route, head.desc, head.payload_len)
        self.groups: dict[str, ChunkGroup] = {}

    async def take(self) -> Acknowledged | R:
        """Refuse what the header alone rules out, stream the payload to where it stays,
        let the machine decide and carry the decision out."""
        self.registry.expire(self.call.job_key)
        self.groups = self.registry.job_groups(self.call.job_key)
        placed = self._place()
        if isinstance(placed, cm.Refuse):  # answered as soon as the body is in; none of it is kept
            await stream.discard_rest(self.body)
            raise _refuse(placed)
        decision, group = await self._judge(placed)
        del placed
        if isinstance(decision, cm.Ack):
            return self._acknowledge(group, decision)
        if isinstance(decision, cm.Replay):
            return await self._replay(group, decision)
        assert isinstance(decision, cm.Execute)  # carrying out raised every refusal
        return await self._finalize(group, decision)

    def _decide(self) -> cm.Decision:
        """The machine's decision (under the lock); room the server's budgets need is first
        reclaimed from accounts over their fair share, once."""
        call = self.call
        for attempt in range(2):
            group = self.groups.get(self.gid)
            usage = self.registry.usage(call.owner, call.job_key) if group is None else cm.NO_USAGE
            decision = hooks.decide(call.rules.named("chunk"), self.chunk, group, call.settings, usage)
            if not isinstance(decision, cm.Reclaim):
                return decision
            if attempt == 0:
                self.registry.reclaim(call.owner, decision)
        return cm.Refuse(ErrorCode.CHUNK_GROUP_LIMIT, "the server's chunk budgets are full and nothing could be "
                         "reclaimed from other accounts; retry later")

    def _place(self) -> Sink | cm.Refuse:
        """Before the payload: the refusal its header alone rules out (a new group over the
        caps, reclaiming room first if it is within its share), or where its bytes go."""
        head, body, desc = self.head, self.body, self.head.desc
        arrived = len(body.data) >= head.payload_start + head.payload_len  # nothing left to stream
        with self.lock:
            early: cm.Decision | None = cm.descriptor_refusal(desc, head.payload_len, self.call.settings.max_body_bytes)
            if early is None and self.gid not in self.groups and not arrived:
                early = self._decide()
            if isinstance(early, cm.Refuse):
                return early
            whole = memoryview(body.data)[head.payload_start :] if arrived else None
            return stream.choose_sink(self.groups.get(self.gid), self.call.route, desc, head.payload_len, whole)

    async def _differs(self, payload: memoryview) -> bool:
        """Whether the group already holds this chunk with other bytes (compared in a worker thread)."""
        group = self.groups.get(self.gid)
        stored = group.stored(self.idx) if group is not None else None
        if stored is None:
            return False
        return len(stored) != len(payload) or not await run_in_threadpool(operator.eq, stored, payload)

    async def _judge(self, sink: Sink) -> tuple[cm.Decision, ChunkGroup]:
        """Receive the payload into ``sink``, then decide and carry it out; the slot and
        the hash the chunk held are settled whatever happens."""
        kept = False
        try:
            payload = await stream.receive_payload(self.call.body, self.body, self.head.payload_start, sink)
            if sink.group is None:  # a copy of its own: wait for a copy writing in place to be judged
                await stream.settled(self.groups.get(self.gid), self.idx)
            self.chunk = self.chunk._replace(differs_from_stored=await self._differs(payload))
            del payload
            with self.lock:
                decision = self._decide()
                group = self._carry_out(decision, sink)
                kept = isinstance(decision, (cm.Ack, cm.Execute)) and decision.keep and group.buffer is sink.buffer
        finally:
            with self.lock:
                sink.finish(kept)
                if kept:
                    group.advance_hash()
        return decision, group

    def _carry_out(self, decision: cm.Decision, payload: Sink) -> ChunkGroup:
        """Apply the machine's decision to the group registry (under the lock), stamped with
        the registry clock's monotonic time, so group expiry follows an injected clock."""
        now, group = self.registry.clock.monotonic(), self.groups.get(self.gid)
        if isinstance(decision, cm.Refuse):
            if decision.touches_group and group is not None:
                group.touched_at = now
            raise _refuse(decision)
        assert not isinstance(decision, cm.Reclaim)
        if group is None:
            assert not isinstance(decision, cm.Replay) and decision.new_range_size is not None
            group = new_group(self.call.job_key, self.call.route, self.chunk.desc, decision.new_range_size, now,
                              self.call.owner, payload.buffer if payload.fresh else None)
        group.touched_at = now
        if isinstance(decision, cm.Replay):
            group.replays += 1
            return group
        if decision.keep and group.buffer is not None:
            group.keep(self.idx, payload.view(), payload.buffer)
            if group.buffer is not payload.buffer:  # copied in: hashed from the buffer
                group.advance_hash()
        if decision.new_range_size is not None:
            self.groups[self.gid] = group
        if isinstance(decision, cm.Execute):
            group.status = FINALIZING
        return group

    def _acknowledge(self, group: ChunkGroup, ack: cm.Ack) -> Acknowledged:
        """A non-final chunk's answer: progress, never a request id (CG-NONFINAL-1)."""
        body = answers.render(ChunkAccepted(chunk_group_id=group.group_id, chunk_idx=self.idx,
                                            received_chunks=len(group.received), total_chunks=group.total))
        if ack.leak_request_id:
            body["request_id"] = str(uuid.uuid4())
            body["job_id"] = group.job_id
        return Acknowledged(body)

    async def _run(self, group: ChunkGroup, run: cm.Execute) -> R:
        """Verify the whole frame, decode it, release the buffer, build (as ``run`` says)."""
        call = self.call
        if run.missing:  # only when the machine's missing-chunks rule is waived
            return call.build_unread(group)
        if run.verify_sha and await group.digest() != group.frame_sha256:
            raise malformed(f"chunk group {group.group_id}: reassembled frame does not match frame_sha256")
        frame = group.frame()
        if run.release_bytes:  # the frame view keeps the bytes until the decoded batch lets go
            group.release()
        obj = await decode_frame(call.settings, call.rules, frame, frame_limits=run.frame_limits)
        del frame
        req = call.build(obj, group)
        if run.keep_decoded:
            group.decoded = obj
        return req

    async def _finalize(self, group: ChunkGroup, run: cm.Execute) -> R:
        """Run the group's frame exactly once; a failure drops the group and is what replays meet."""
        try:
            req = await self._run(group, run)
        except BaseException as exc:
            with self.lock:
                if self.groups.get(group.group_id) is group:
                    del self.groups[group.group_id]
                group.release()
                group.status = FAILED
                group.failure = exc if isinstance(exc, ApiError) else ApiError(ErrorCode.INTERNAL, "chunk group failed")
            group.finished.set()
            raise
        with self.lock:
            if run.release_bytes:
                group.release()
            group.request_id = req.request_id
            group.status = DONE
        group.finished.set()
        return req

    async def _replay(self, group: ChunkGroup, replay: cm.Replay) -> R:
        """A repeated final chunk: the original execution's request (CG-IDEM-1)."""
        await group.finished.wait()
        if group.failure is not None:
            raise group.failure
        if replay.execute_again and group.decoded is not None:
            again = self.call.build(group.decoded, None if replay.quietly else group)
            if not replay.quietly:
                return again
        assert group.request_id is not None
        return self.call.original(group.request_id)
