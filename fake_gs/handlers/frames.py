"""DSSST1 bodies: plain frames and request chunk groups, shared by every octet route.

A route supplies a *builder* that validates the decoded frame object and submits the
request; this module owns decoding, the legacy-payload refusal and every chunk-group rule
(facts, section 7): restart, conflict, missing chunks, at-most-once on replay.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Callable
from typing import Any, cast

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from contract import wire
from contract.errors import ErrorCode
from contract.models import ChunkAccepted, ForwardBackwardResult
from fake_gs import answers, chunk_hooks
from fake_gs import chunk_machine as cm
from fake_gs.chunks import DONE, FAILED, FINALIZING, ChunkGroup, malformed, new_group
from fake_gs.errors import ApiError
from fake_gs.handlers.common import Ctx, json_containers, json_response
from fake_gs.records import JobRec, RequestRec
from fake_gs.settings import FakeSettings

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
        return wire.loads(data, limits=limits)
    except wire.WireError as exc:
        if deep_500 and "deep" in str(exc):
            raise RuntimeError(f"deep-tree-500 mutant: {exc}") from None
        raise malformed(f"malformed DSSST1 frame: {exc}") from None
    except RecursionError:
        if deep_500:
            raise RuntimeError("deep-tree-500 mutant: recursion") from None
        raise malformed("malformed DSSST1 frame: nests too deeply") from None


async def decode_frame(ctx: Ctx, data: Any, *, frame_limits: bool = True) -> Any:
    """Decode off the event loop (large frames take a while; torch loads on first use).

    ``frame_limits`` False (a chunk-protocol mutant) decodes with next to no limits."""
    limits = request_limits(ctx.settings)
    if not frame_limits:
        limits = _LAX_LIMITS
    else:
        refuse_legacy(data)
        check_header(data, ctx.settings)
    return await run_in_threadpool(_decode, data, limits, ctx.state.mutant("deep-tree-500"))


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


async def submit_frame(ctx: Ctx, job: JobRec, builder: Builder) -> Response:
    """Handle an octet body: a plain frame, or one request chunk of a group."""
    body = await ctx.octet_body()
    if wire.sniff_refused_payload(body) is not None and ctx.state.mutant("pickle-accepted"):
        return ctx.submitted(job, dummy_submit(ctx, job, ctx.route.name))
    refuse_legacy(body)
    check_header(body, ctx.settings)
    try:
        found = wire.split_chunk(cast(bytes, body))  # any byte buffer works; no copy
    except wire.WireError as exc:
        raise malformed(f"malformed DSSST1 frame: {exc}") from None
    if found is None:
        obj = await decode_frame(ctx, body)
        del body
        return ctx.submitted(job, builder(ctx, job, obj, None))
    kind, desc, payload = found
    if kind != "request":
        raise malformed("expected a request chunk, got a result chunk")
    del body, found  # the payload view is now the only owner: freed before the frame is decoded
    return await accept_chunk(ctx, job, desc, payload, builder)


def usage_before_open(ctx: Ctx, job: JobRec, groups: dict[str, ChunkGroup]) -> cm.Usage:
    """Open groups and reserved bytes (each open group's declared frame size) of the job,
    its account and the server, for the caps on a new group (under the store lock)."""
    account_open, account_bytes, total = ctx.store.group_usage(job.owner)
    job_load = cm.Load(sum(1 for g in groups.values() if g.status != DONE), sum(g.reserved_bytes for g in groups.values()))
    return cm.Usage(job_load, cm.Load(account_open, account_bytes), total)


async def resend_differs(group: ChunkGroup | None, idx: int, payload: memoryview) -> bool:
    """Whether the group already holds chunk ``idx`` with other bytes (compared in a worker thread)."""
    stored = group.parts.get(idx) if group is not None and group.parts is not None else None
    if stored is None:
        return False
    return len(stored) != len(payload) or not await run_in_threadpool(operator.eq, stored, payload)


def refuse(refusal: cm.Refuse) -> ApiError:
    return ApiError(refusal.code, refusal.message, list(refusal.detail) if refusal.detail else None)


def carry_out(job: JobRec, groups: dict[str, ChunkGroup], group: ChunkGroup | None, chunk: cm.Chunk,
              decision: cm.Decision, payload: memoryview, now: float) -> ChunkGroup:
    """Apply the machine's decision to the group registry (under the store lock); ``now``
    is the store clock's monotonic time, so group expiry follows an injected clock."""
    if isinstance(decision, cm.Refuse):
        if decision.touches_group and group is not None:
            group.touched_at = now
        raise refuse(decision)
    if group is None:
        assert not isinstance(decision, cm.Replay) and decision.new_range_size is not None
        group = new_group(job.job_id, chunk.route, chunk.desc, decision.new_range_size, now, job.owner)
    gid, idx, _ = chunk.position
    group.touched_at = now
    if isinstance(decision, cm.Replay):
        group.replays += 1
        return group
    if decision.keep and group.parts is not None:
        group.keep(idx, payload)
        group.advance_hash()
    if decision.new_range_size is not None:
        groups[gid] = group
    if isinstance(decision, cm.Execute):
        group.status = FINALIZING
    return group


async def accept_chunk(ctx: Ctx, job: JobRec, desc: dict[str, Any], payload: memoryview,
                       builder: Builder) -> Response:
    """One request chunk: gather the facts, let the chunk machine decide, carry it out."""
    store = ctx.store
    refusal = cm.descriptor_refusal(desc, len(payload), ctx.settings.max_body_bytes)
    if refusal is not None:
        raise refuse(refusal)
    store.expire_groups(job.job_id)
    groups = store.job_groups(job.job_id)
    differs = await resend_differs(groups.get(desc["chunk_group_id"]), desc["chunk_idx"], payload)
    chunk = cm.Chunk(job.public_id, ctx.route.name, desc, len(payload), differs)
    with store.lock:
        group = groups.get(desc["chunk_group_id"])
        usage = usage_before_open(ctx, job, groups) if group is None else cm.NO_USAGE
        decision = chunk_hooks.decide(ctx.settings.mutant, chunk, group, ctx.settings, usage)
        group = carry_out(job, groups, group, chunk, decision, payload, store.clock.monotonic())
    del payload
    if isinstance(decision, cm.Ack):
        return chunk_ack(group, desc["chunk_idx"], decision)
    if isinstance(decision, cm.Replay):
        return await replay_final(ctx, job, group, builder, decision)
    assert isinstance(decision, cm.Execute)  # carry_out raised every refusal
    return await finalize(ctx, job, group, builder, decision)


async def run_group(ctx: Ctx, job: JobRec, group: ChunkGroup, builder: Builder, run: cm.Execute) -> RequestRec:
    """Verify the whole frame, decode it, release the buffer, submit (as ``run`` says)."""
    if run.missing:  # only when the machine's missing-chunks rule is waived
        if group.hash_task is not None:
            await group.hash_task
        return dummy_submit(ctx, job, ctx.route.name, group)
    if not run.verify_sha:
        if group.hash_task is not None:
            await group.hash_task
    elif await group.digest() != group.frame_sha256:
        raise malformed(f"chunk group {group.group_id}: reassembled frame does not match frame_sha256")
    frame = await group.frame()
    if run.release_bytes:
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
        return ctx.submitted(job, builder(ctx, job, group.decoded, group))
    assert group.request_id is not None
    return ctx.submitted(job, ctx.store.request_for(job, group.request_id))
