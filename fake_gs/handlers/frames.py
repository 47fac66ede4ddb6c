"""DSSST1 bodies: plain frames and request chunk groups, shared by every octet route.

A route supplies a *builder* that validates the decoded frame object and submits the
request; this module owns decoding, the legacy-payload refusal and every chunk-group rule
(facts, section 7): restart, conflict, missing chunks, at-most-once on replay.
"""

from __future__ import annotations

import functools
import operator
import struct
import time
from collections.abc import Callable
from typing import Any, cast

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from contract import wire
from contract.errors import ErrorCode, detail_entry
from contract.models import ChunkAccepted, ForwardBackwardResult
from fake_gs import answers
from fake_gs.chunks import (
    DONE,
    FINALIZING,
    ChunkGroup,
    check_descriptor,
    conflict_field,
    first_range_size,
    malformed,
    new_group,
)
from fake_gs.errors import ApiError
from fake_gs.handlers.common import Ctx, json_containers, json_response
from fake_gs.records import JobRec, RequestRec
from fake_gs.settings import FakeSettings

#: (ctx, job, decoded frame object, chunk group or None) -> submitted request.
Builder = Callable[[Ctx, JobRec, Any, ChunkGroup | None], RequestRec]

#: Decoder limits for request frames with the default settings (LIMIT-FRAME-1).
REQUEST_LIMITS = wire.WireLimits(max_header_bytes=16 * 1024 * 1024, max_depth=64, max_tensors=10_000,
                                 max_json_bytes=16 * 1024 * 1024)
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


async def decode_frame(ctx: Ctx, data: Any, *, chunked: bool = False) -> Any:
    """Decode off the event loop (large frames take a while; torch loads on first use)."""
    limits = request_limits(ctx.settings)
    if chunked and ctx.state.mutant("chunked-limits-skipped"):
        limits = _LAX_LIMITS
    else:
        refuse_legacy(data)
        check_header(data, ctx.settings)
    return await run_in_threadpool(_decode, data, limits, ctx.state.mutant("deep-tree-500"))


def dummy_submit(ctx: Ctx, job: JobRec, op: str, group: ChunkGroup | None = None) -> RequestRec:
    """What the payload-accepting mutants run instead of a real frame."""

    def work() -> dict[str, Any]:
        ctx.store.note_execution(job, group, forward_backward=op == "forward_backward")
        return answers.render(ForwardBackwardResult(job_id=job.job_id, avg_loss=0.0, metrics={},
                                                    post_process_outputs={}))

    return ctx.store.submit(job, op, work)


def chunk_ack(ctx: Ctx, group: ChunkGroup, idx: int) -> Response:
    """A non-final chunk's answer: progress, never a request id (CG-NONFINAL-1)."""
    body = answers.render(ChunkAccepted(chunk_group_id=group.group_id, chunk_idx=idx,
                                        received_chunks=len(group.received), total_chunks=group.total))
    if ctx.state.mutant("nonfinal-chunk-request-id"):
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


def check_group_caps(ctx: Ctx, job: JobRec, groups: dict[str, ChunkGroup], size: int) -> None:
    """LIMIT-GROUPS-1 and LIMIT-ACCOUNT-1: open groups and reserved bytes (each open group's
    declared frame size) per job, per account and for the whole server.

    Called under the store lock before a new group is recorded; nothing is allocated."""
    settings = ctx.settings
    open_groups = sum(1 for g in groups.values() if g.status != DONE)
    if open_groups >= settings.max_open_groups_per_job:
        raise ApiError(ErrorCode.CHUNK_GROUP_LIMIT,
                       f"job {job.job_id} already has {open_groups} open chunk groups (the cap is "
                       f"{settings.max_open_groups_per_job}); finish or abandon one first")
    buffered = sum(g.reserved_bytes for g in groups.values())
    if buffered + size > settings.max_buffered_bytes_per_job:
        raise ApiError(ErrorCode.BUFFER_LIMIT,
                       f"job {job.job_id} cannot buffer {size} more bytes: {buffered} are buffered and "
                       f"the cap is {settings.max_buffered_bytes_per_job}")
    account_open, account_bytes, total = ctx.store.group_usage(job.owner)
    if ctx.state.mutant("account-caps-ignored"):
        account_open = account_bytes = 0
    if account_open >= settings.max_open_groups_per_account:
        raise ApiError(ErrorCode.CHUNK_GROUP_LIMIT,
                       f"this account already has {account_open} open chunk groups (the cap is "
                       f"{settings.max_open_groups_per_account}); finish or abandon one first")
    if account_bytes + size > settings.max_buffered_bytes_per_account:
        raise ApiError(ErrorCode.BUFFER_LIMIT,
                       f"this account cannot buffer {size} more bytes: {account_bytes} are buffered and "
                       f"the cap is {settings.max_buffered_bytes_per_account}")
    if total + size > settings.max_buffered_bytes_total:
        raise ApiError(ErrorCode.CHUNK_GROUP_LIMIT,
                       f"the server is buffering {total} chunk bytes (the cap is "
                       f"{settings.max_buffered_bytes_total}); retry later")


async def check_resent(group: ChunkGroup | None, idx: int, payload: memoryview) -> None:
    """A chunk sent again must carry the same bytes (compared in a worker thread)."""
    stored = group.parts.get(idx) if group is not None and group.parts is not None else None
    if stored is None or group is None:
        return
    if len(stored) != len(payload) or not await run_in_threadpool(operator.eq, stored, payload):
        raise ApiError(ErrorCode.CHUNK_GROUP_CONFLICT,
                       f"chunk {idx} of group {group.group_id} was sent before with another payload")


def open_group(ctx: Ctx, job: JobRec, groups: dict[str, ChunkGroup], desc: dict[str, Any],
               payload: memoryview) -> tuple[ChunkGroup, bool]:
    """The chunk's group (under the store lock): the known one if its descriptor agrees, or
    a new one when this is chunk 0 and the caps allow it; ``(group, created)``."""
    gid, idx = desc["chunk_group_id"], desc["chunk_idx"]
    group = groups.get(gid)
    if group is not None:
        field = conflict_field(group, ctx.route.name, desc)
        if field is not None:
            raise ApiError(ErrorCode.CHUNK_GROUP_CONFLICT,
                           f"chunk group {gid} was started with another {field}",
                           [detail_entry(("request_chunk", field), "differs from the group", "conflict")])
        return group, False
    if idx != 0 and not ctx.state.mutant("restart-not-required"):
        raise ApiError(ErrorCode.CHUNK_GROUP_RESTART_REQUIRED,
                       f"chunk group {gid} is not known here; resend the whole group from chunk 0")
    if not ctx.state.mutant("groups-uncapped"):
        check_group_caps(ctx, job, groups, desc["frame_size_bytes"])
    return new_group(job.job_id, ctx.route.name, desc, first_range_size(desc, len(payload)), job.owner), True


def place_chunk(ctx: Ctx, group: ChunkGroup, idx: int, payload: memoryview, final: bool) -> list[int]:
    """Keep a chunk of an open group (under the store lock); returns the chunks still missing
    at the final one (only non-empty under the missing-chunks-accepted mutant)."""
    start, end = group.chunk_span(idx)
    if len(payload) != end - start:
        raise malformed(f"chunk {idx} carries {len(payload)} bytes; this group's chunk {idx} "
                        f"spans {end - start} bytes")
    missing = [i for i in group.missing() if i != idx] if final else []
    if missing and not ctx.state.mutant("missing-chunks-accepted"):
        raise ApiError(ErrorCode.CHUNK_GROUP_MISSING_CHUNKS,
                       f"chunk group {group.group_id} is missing chunk_idx {missing}; send them, then the final chunk",
                       [detail_entry(("request_chunk", "chunk_idx", i), "missing", "missing") for i in missing])
    if idx not in group.received and group.parts is not None:
        group.keep(idx, payload)
        group.advance_hash()
    return missing


async def accept_chunk(ctx: Ctx, job: JobRec, desc: dict[str, Any], payload: memoryview,
                       builder: Builder) -> Response:
    store, settings = ctx.store, ctx.settings
    check_descriptor(desc, len(payload), settings.max_body_bytes)
    gid, idx, total = desc["chunk_group_id"], desc["chunk_idx"], desc["total_chunks"]
    final = idx == total - 1
    store.expire_groups(job.job_id)
    groups = store.job_groups(job.job_id)
    await check_resent(groups.get(gid), idx, payload)
    with store.lock:
        group, created = open_group(ctx, job, groups, desc, payload)
        group.touched_at = time.monotonic()
        if group.status in (FINALIZING, DONE):
            if not final:
                return chunk_ack(ctx, group, idx)
            group.replays += 1
            replay = True
        else:
            replay = False
            if idx in group.received and not final:
                return chunk_ack(ctx, group, idx)
            missing = place_chunk(ctx, group, idx, payload, final)
            if created:
                groups[gid] = group
            if not final:
                return chunk_ack(ctx, group, idx)
            group.status = FINALIZING
    del payload
    if replay:
        return await replay_final(ctx, job, group, builder)
    return await finalize(ctx, job, group, builder, bool(missing))


async def finalize(ctx: Ctx, job: JobRec, group: ChunkGroup, builder: Builder, incomplete: bool) -> Response:
    """Verify the whole frame, decode it, release the buffer, submit: exactly once."""
    store = ctx.store
    try:
        if incomplete:  # only under the missing-chunks-accepted mutant
            if group.hash_task is not None:
                await group.hash_task
            req = dummy_submit(ctx, job, ctx.route.name, group)
        else:
            if ctx.state.mutant("chunk-sha-unchecked"):
                if group.hash_task is not None:
                    await group.hash_task
            elif await group.digest() != group.frame_sha256:
                raise malformed(f"chunk group {group.group_id}: reassembled frame does not match frame_sha256")
            frame = await group.frame()
            if not ctx.state.mutant("group-bytes-kept"):
                group.release()
            obj = await decode_frame(ctx, frame, chunked=True)
            del frame
            req = builder(ctx, job, obj, group)
            if ctx.state.mutant("replay-double-exec"):
                group.decoded = obj
            del obj
    except BaseException as exc:
        with store.lock:
            groups = store.groups.get(job.job_id, {})
            if groups.get(group.group_id) is group:
                del groups[group.group_id]
            group.release()
            group.status = "failed"
            group.failure = exc if isinstance(exc, ApiError) else ApiError(ErrorCode.INTERNAL, "chunk group failed")
        group.finished.set()
        raise
    with store.lock:
        if not ctx.state.mutant("group-bytes-kept"):
            group.release()
        group.request_id = req.request_id
        group.status = DONE
    group.finished.set()
    return ctx.submitted(job, req)


async def replay_final(ctx: Ctx, job: JobRec, group: ChunkGroup, builder: Builder) -> Response:
    """A repeated final chunk: the original execution's request (CG-IDEM-1)."""
    await group.finished.wait()
    if group.failure is not None:
        raise group.failure
    if ctx.state.mutant("replay-double-exec") and group.decoded is not None:
        return ctx.submitted(job, builder(ctx, job, group.decoded, group))
    assert group.request_id is not None
    return ctx.submitted(job, ctx.store.request_for(job, group.request_id))
