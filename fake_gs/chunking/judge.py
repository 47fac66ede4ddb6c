"""A request chunk judged once its payload is in: the machine's decision (through the
rules in force, :mod:`fake_gs.chunking.hooks`), carried out on the job's groups.

Carrying a decision out opens the group a first chunk starts, keeps a chunk's bytes (the
payload was written in place as it arrived, or is copied in now) and moves the frame hash
over the chunks now in frame order, marks a group whose final chunk is in as finalizing
and counts a replay; a refusal becomes the contract error.
What the chunk then answers is :mod:`fake_gs.chunking.outcome`'s.
"""

from __future__ import annotations

import operator

from starlette.concurrency import run_in_threadpool

from contract.errors import ErrorCode
from contract.wire import chunk_span
from fake_gs.answers.refusals import ApiError
from fake_gs.chunking import hooks
from fake_gs.chunking import machine as cm
from fake_gs.chunking.groups import FINALIZING, ChunkGroup, new_group
from fake_gs.chunking.payload import Sink
from fake_gs.chunking.registry import GroupRegistry


def decide(registry: GroupRegistry, points: frozenset[str], chunk: cm.Chunk, group: ChunkGroup | None,
           owner: str, job_key: str) -> cm.Decision:
    """The machine's decision (under the lock) with the ``chunk:`` points in force; room the
    server's budgets need for a new group is first reclaimed from accounts over their fair
    share, once."""
    for attempt in range(2):
        usage = registry.usage(owner, job_key) if group is None else cm.NO_USAGE
        decision = hooks.decide(points, chunk, group, registry.settings, usage)
        if not isinstance(decision, cm.Reclaim):
            return decision
        if attempt == 0:
            registry.reclaim(owner, decision)
    return cm.Refuse(ErrorCode.CHUNK_GROUP_LIMIT, "the server's chunk budgets are full and nothing could be "
                     "reclaimed from other accounts; retry later")


def refusal(refused: cm.Refuse) -> ApiError:
    """The contract error a refusal answers."""
    return ApiError(refused.code, refused.message, list(refused.detail) if refused.detail else None)


async def judge(registry: GroupRegistry, points: frozenset[str], chunk: cm.Chunk, sink: Sink,
                groups: dict[str, ChunkGroup], owner: str, job_key: str) -> tuple[cm.Decision, ChunkGroup]:
    """The received chunk judged and the decision carried out (a refusal raised); a chunk
    not kept gives its slot back and its bytes are rolled out of the frame hash."""
    gid, idx = chunk.desc["chunk_group_id"], chunk.desc["chunk_idx"]
    kept = False
    try:
        held = groups.get(gid)
        if sink.group is None:  # a copy of its own: wait for a copy writing in place to be judged
            while held is not None and (arriving := held.arriving.get(idx)) is not None:
                await arriving.wait()
        held = groups.get(gid)
        if held is not None and held.buffer is not None and idx in held.received:
            # The group holds this chunk: the same bytes? (compared in a worker thread)
            stored = held.buffer.span(*chunk_span(idx, held.total, held.range_size, held.frame_size))
            received = sink.view()
            chunk = chunk._replace(differs_from_stored=len(stored) != len(received)
                                   or not await run_in_threadpool(operator.eq, stored, received))
            del stored, received
        with registry.lock:
            decision, group, kept = _carried_out(registry, points, chunk, sink, groups, owner, job_key)
    finally:
        if not kept:
            with registry.lock:
                sink.finish(kept=False)
    return decision, group


def _carried_out(registry: GroupRegistry, points: frozenset[str], chunk: cm.Chunk, sink: Sink,
                 groups: dict[str, ChunkGroup], owner: str, job_key: str) -> tuple[cm.Decision, ChunkGroup, bool]:
    """Decide, then apply the decision to the job's groups (under the lock), stamped with
    the registry clock's monotonic time, so group expiry follows an injected clock; whether
    the chunk was kept where it was written."""
    gid, idx = chunk.desc["chunk_group_id"], chunk.desc["chunk_idx"]
    group = groups.get(gid)
    decision = decide(registry, points, chunk, group, owner, job_key)
    now = registry.clock.monotonic()
    if isinstance(decision, cm.Refuse):
        if decision.touches_group and group is not None:
            group.touched_at = now
        raise refusal(decision)
    assert not isinstance(decision, cm.Reclaim)
    if group is None:
        assert not isinstance(decision, cm.Replay) and decision.new_range_size is not None
        group = new_group(job_key, chunk.route, chunk.desc, decision.new_range_size, now,
                          owner, sink.buffer if sink.fresh else None)
    group.touched_at = now
    if isinstance(decision, cm.Replay):
        group.replays += 1
        return decision, group, False
    buffer = group.buffer
    kept = decision.keep and buffer is not None and buffer is sink.buffer
    if decision.keep and buffer is not None:  # the chunk is in: its bytes at their offset
        start, end = chunk_span(idx, group.total, group.range_size, group.frame_size)
        if not kept:  # a copy of its own: copied in, then hashed from the buffer
            buffer.write(start, sink.view())
        buffer.written += end - start
        group.received.add(idx)
        if kept:  # written in place: its slot is free for a copy waiting, its streamed bytes stay hashed
            arriving = group.arriving.pop(idx, None)
            if arriving is not None:
                arriving.set()
            if sink.hashing:
                buffer.hash.settle(idx, kept=True)
            sink.group, sink.hashing = None, False
        buffer.hash.catch_up(buffer.view, buffer.size, group.received, group.total, group.range_size)
    if decision.new_range_size is not None:
        groups[gid] = group
    if isinstance(decision, cm.Execute):
        group.status = FINALIZING
    return decision, group, kept
