"""DSSST1 bodies: plain frames and request chunk groups, shared by every octet route.

A route supplies a *builder* that validates the decoded frame object and submits the
request; this module owns decoding, the legacy-payload refusal and every chunk-group rule
(spec §9.3): restart, conflict, missing chunks, at-most-once on replay.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from contract import wire
from contract.errors import ErrorCode
from contract.models import ChunkAccepted, ForwardBackwardResult
from contract.routes import OCTET
from fake_gs.answers import check as answers
from fake_gs.answers.refusals import ApiError
from fake_gs.chunking import hooks
from fake_gs.chunking import machine as cm
from fake_gs.chunking.groups import DONE, FAILED, FINALIZING, ChunkGroup, malformed, new_group
from fake_gs.http import frame_body
from fake_gs.http.frame_body import Sink
from fake_gs.http.handlers.context import Ctx, json_containers, json_response
from fake_gs.ops.seams import Bend, Rule
from fake_gs.settings import FakeSettings
from fake_gs.state.records import JobRec, RequestRec

#: (ctx, job, decoded frame object, chunk group or None) -> submitted request.
Builder = Callable[[Ctx, JobRec, Any, ChunkGroup | None], RequestRec]

#: Decoder limits for request frames with the default settings (LIMIT-FRAME-1).
REQUEST_LIMITS = wire.REQUEST_FRAME_LIMITS
#: What the ``chunked-limits-skipped`` mutant decodes reassembled frames with.
_LAX_LIMITS = wire.WireLimits(max_depth=10_000, max_tensors=10**9, max_json_bytes=2**40)


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
            raise RuntimeError(f"deep-tree-500 mutant: {exc}") from None
        raise malformed(f"malformed DSSST1 frame: {exc}") from None
    except RecursionError:
        if deep_500:
            raise RuntimeError("deep-tree-500 mutant: recursion") from None
        raise malformed("malformed DSSST1 frame: nests too deeply") from None


async def decode_frame(ctx: Ctx, data: Any, *, frame_limits: bool = True) -> Any:
    """Decode off the event loop; ``data`` is handed over (its tensors become views of it).

    ``frame_limits`` False (a chunk-protocol mutant) decodes with next to no limits."""
    limits = request_limits(ctx.settings)
    if not frame_limits:
        limits = _LAX_LIMITS
    else:
        refuse_legacy(data)
        check_header(data, ctx.settings)
    return await run_in_threadpool(_decode, data, limits, ctx.settings.seams.bends(Bend.DEEP_FRAME_500))


def dummy_submit(ctx: Ctx, job: JobRec, op: str, group: ChunkGroup | None = None) -> RequestRec:
    """What the payload-accepting mutants run instead of a real frame."""

    def work() -> dict[str, Any]:
        ctx.store.note_execution(job, group, forward_backward=op == "forward_backward")
        return answers.render(ForwardBackwardResult(job_id=job.public_id, avg_loss=0.0, metrics={},
                                                    post_process_outputs={}))

    return ctx.store.submit(job, op, work)


def chunk_ack(group: ChunkGroup, idx: int, ack: cm.Ack) -> Response:
    """A non-final chunk's answer: progress, never a request id (CG-NONFINAL-1)."""
    body = answers.render(ChunkAccepted(chunk_group_id=group.group_id, chunk_idx=idx,
                                        received_chunks=len(group.received), total_chunks=group.total))
    if ack.leak_request_id:
        import uuid

        body["request_id"] = str(uuid.uuid4())
        body["job_id"] = group.job_id
    return json_response(body, status=202)


def chunk_head(data: bytearray) -> wire.ChunkHead | None:
    """The request or result chunk ``data`` starts with; None for a plain frame, or for a
    body that ended before its header did (the codec then says what is wrong with it)."""
    size = wire.frame_head_size(data)
    if size is None or len(data) < size:
        return None
    try:
        return wire.read_chunk_head(data)
    except wire.WireError as exc:
        raise malformed(f"malformed DSSST1 frame: {exc}") from None


async def submit_frame(ctx: Ctx, job: JobRec, builder: Builder) -> Response:
    """Handle an octet body: a plain frame, or one request chunk of a group (streamed into
    its group's buffer as it arrives)."""
    head = await frame_body.read_head(ctx.body, ctx.body_limit(), ctx.settings.max_frame_header_bytes)
    try:
        ctx.require_media_type(OCTET)
        if not head.data:
            raise ApiError(ErrorCode.MALFORMED_FRAME, "empty body: expected a DSSST1 frame")
        if wire.sniff_refused_payload(head.data) is not None and not ctx.settings.seams.enforces(Rule.PAYLOAD_REFUSED):
            await frame_body.discard_rest(head)
            return ctx.submitted(job, dummy_submit(ctx, job, ctx.route.name))
        refuse_legacy(head.data)
        check_header(head.data, ctx.settings)
        found = chunk_head(head.data)
        if found is not None and found.kind != "request":
            raise malformed("expected a request chunk, got a result chunk")
    except ApiError:
        await frame_body.discard_rest(head)
        raise
    if found is None:  # a plain frame (or one too short to say): read it whole, decode in place
        body = await frame_body.read_rest(ctx.body, head)
        check_header(body, ctx.settings)
        obj = await decode_frame(ctx, body)
        del body
        return ctx.submitted(job, builder(ctx, job, obj, None))
    return await accept_chunk(ctx, job, found, head, builder)


def usage_before_open(ctx: Ctx, job: JobRec) -> cm.Usage:
    """Open groups and reserved bytes (each open group's declared frame size) of the job,
    its account, the server and every account, for the caps on a new group (under the
    store lock)."""
    return ctx.store.group_usage(job.owner, job.job_id)


async def resend_differs(group: ChunkGroup | None, idx: int, payload: memoryview) -> bool:
    """Whether the group already holds chunk ``idx`` with other bytes (compared in a worker thread)."""
    stored = group.stored(idx) if group is not None else None
    if stored is None:
        return False
    return len(stored) != len(payload) or not await run_in_threadpool(operator.eq, stored, payload)


def refuse(refusal: cm.Refuse) -> ApiError:
    return ApiError(refusal.code, refusal.message, list(refusal.detail) if refusal.detail else None)


def carry_out(job: JobRec, groups: dict[str, ChunkGroup], group: ChunkGroup | None, chunk: cm.Chunk,
              decision: cm.Decision, payload: Sink, now: float) -> ChunkGroup:
    """Apply the machine's decision to the group registry (under the store lock); ``now``
    is the store clock's monotonic time, so group expiry follows an injected clock."""
    if isinstance(decision, cm.Refuse):
        if decision.touches_group and group is not None:
            group.touched_at = now
        raise refuse(decision)
    assert not isinstance(decision, cm.Reclaim)
    if group is None:
        assert not isinstance(decision, cm.Replay) and decision.new_range_size is not None
        group = new_group(job.job_id, chunk.route, chunk.desc, decision.new_range_size, now, job.owner,
                          payload.buffer if payload.fresh else None)
    gid, idx, _ = chunk.position
    group.touched_at = now
    if isinstance(decision, cm.Replay):
        group.replays += 1
        return group
    if decision.keep and group.buffer is not None:
        group.keep(idx, payload.view(), payload.buffer)
        if group.buffer is not payload.buffer:  # copied in: hashed from the buffer
            group.advance_hash()
    if decision.new_range_size is not None:
        groups[gid] = group
    if isinstance(decision, cm.Execute):
        group.status = FINALIZING
    return group


def decide_chunk(ctx: Ctx, job: JobRec, groups: dict[str, ChunkGroup], chunk: cm.Chunk) -> cm.Decision:
    """The machine's decision for ``chunk`` (under the store lock); room the server's
    budgets need is first reclaimed from accounts over their fair share, once."""
    for attempt in range(2):
        group = groups.get(chunk.position[0])
        usage = usage_before_open(ctx, job) if group is None else cm.NO_USAGE
        decision = hooks.decide(ctx.settings.seams.named("chunk"), chunk, group, ctx.settings, usage)
        if not isinstance(decision, cm.Reclaim):
            return decision
        if attempt == 0:
            ctx.store.chunk_groups.reclaim(job.owner, decision)
    return cm.Refuse(ErrorCode.CHUNK_GROUP_LIMIT, "the server's chunk budgets are full and nothing could be "
                     "reclaimed from other accounts; retry later")


def place_chunk(ctx: Ctx, job: JobRec, groups: dict[str, ChunkGroup], chunk: cm.Chunk, head: wire.ChunkHead,
                body: frame_body.Head) -> frame_body.Sink | cm.Refuse:
    """Before the payload: the refusal its header alone rules out (a new group over the
    caps, reclaiming room first if it is within its share), or where its bytes go."""
    desc = head.desc
    arrived = len(body.data) >= head.payload_start + head.payload_len  # nothing left to stream
    with ctx.store.lock:
        max_body = ctx.settings.max_body_bytes
        early: cm.Decision | None = cm.descriptor_refusal(desc, head.payload_len, max_body)
        if early is None and desc["chunk_group_id"] not in groups and not arrived:
            early = decide_chunk(ctx, job, groups, chunk)
        if isinstance(early, cm.Refuse):
            return early
        whole = memoryview(body.data)[head.payload_start :] if arrived else None
        return frame_body.choose_sink(groups.get(desc["chunk_group_id"]), ctx.route.name, desc,
                                        head.payload_len, whole)


async def judge_chunk(ctx: Ctx, job: JobRec, groups: dict[str, ChunkGroup], chunk: cm.Chunk, head: wire.ChunkHead,
                      body: frame_body.Head, sink: Sink) -> tuple[cm.Decision, ChunkGroup]:
    """Receive the payload into ``sink``, then let the machine decide and carry it out; the
    slot and the hash the chunk held are settled whatever happens."""
    store, gid, idx = ctx.store, head.desc["chunk_group_id"], head.desc["chunk_idx"]
    kept = False
    try:
        payload = await frame_body.receive_payload(ctx.body, body, head.payload_start, sink)
        if sink.group is None:  # a copy of its own: wait for a copy writing in place to be judged
            await frame_body.settled(groups.get(gid), idx)
        chunk = chunk._replace(differs_from_stored=await resend_differs(groups.get(gid), idx, payload))
        del payload
        with store.lock:
            decision = decide_chunk(ctx, job, groups, chunk)
            group = carry_out(job, groups, groups.get(gid), chunk, decision, sink, store.clock.monotonic())
            kept = isinstance(decision, (cm.Ack, cm.Execute)) and decision.keep and group.buffer is sink.buffer
    finally:
        with store.lock:
            sink.finish(kept)
            if kept:
                group.advance_hash()
    return decision, group


async def accept_chunk(ctx: Ctx, job: JobRec, head: wire.ChunkHead, body: frame_body.Head,
                       builder: Builder) -> Response:
    """One request chunk: refuse what its header alone rules out, stream its payload to where
    it stays, then let the chunk machine decide and carry the decision out."""
    desc = head.desc
    ctx.store.expire_groups(job.job_id)
    groups = ctx.store.job_groups(job.job_id)
    chunk = cm.Chunk(job.public_id, ctx.route.name, desc, head.payload_len)
    placed = place_chunk(ctx, job, groups, chunk, head, body)
    if isinstance(placed, cm.Refuse):  # answered as soon as the body is in; none of it is kept
        await frame_body.discard_rest(body)
        raise refuse(placed)
    decision, group = await judge_chunk(ctx, job, groups, chunk, head, body, placed)
    del placed
    if isinstance(decision, cm.Ack):
        return chunk_ack(group, desc["chunk_idx"], decision)
    if isinstance(decision, cm.Replay):
        return await replay_final(ctx, job, group, builder, decision)
    assert isinstance(decision, cm.Execute)  # carry_out raised every refusal
    return await finalize(ctx, job, group, builder, decision)


async def run_group(ctx: Ctx, job: JobRec, group: ChunkGroup, builder: Builder, run: cm.Execute) -> RequestRec:
    """Verify the whole frame, decode it, release the buffer, submit (as ``run`` says)."""
    if run.missing:  # only when the machine's missing-chunks rule is waived
        return dummy_submit(ctx, job, ctx.route.name, group)
    if run.verify_sha and await group.digest() != group.frame_sha256:
        raise malformed(f"chunk group {group.group_id}: reassembled frame does not match frame_sha256")
    frame = group.frame()
    if run.release_bytes:  # the frame view keeps the bytes until the decoded batch lets go
        group.release()
    obj = await decode_frame(ctx, frame, frame_limits=run.frame_limits)
    del frame
    req = builder(ctx, job, obj, group)
    if run.keep_decoded:
        group.decoded = obj
    return req


async def finalize(ctx: Ctx, job: JobRec, group: ChunkGroup, builder: Builder, run: cm.Execute) -> Response:
    """Run the group's frame exactly once; a failure drops the group and is what replays meet."""
    store = ctx.store
    try:
        req = await run_group(ctx, job, group, builder, run)
    except BaseException as exc:
        with store.lock:
            groups = store.groups.get(job.job_id, {})
            if groups.get(group.group_id) is group:
                del groups[group.group_id]
            group.release()
            group.status = FAILED
            group.failure = exc if isinstance(exc, ApiError) else ApiError(ErrorCode.INTERNAL, "chunk group failed")
        group.finished.set()
        raise
    with store.lock:
        if run.release_bytes:
            group.release()
        group.request_id = req.request_id
        group.status = DONE
    group.finished.set()
    return ctx.submitted(job, req)


async def replay_final(ctx: Ctx, job: JobRec, group: ChunkGroup, builder: Builder, replay: cm.Replay) -> Response:
    """A repeated final chunk: the original execution's request (CG-IDEM-1)."""
    await group.finished.wait()
    if group.failure is not None:
        raise group.failure
    if replay.execute_again and group.decoded is not None:
        again = builder(ctx, job, group.decoded, None if replay.quietly else group)
        if not replay.quietly:
            return ctx.submitted(job, again)
    assert group.request_id is not None
    return ctx.submitted(job, ctx.store.request_for(job, group.request_id))
