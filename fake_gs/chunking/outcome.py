"""What a judged request chunk answers: a non-final chunk its progress (:class:`Acknowledged`,
never a request id); the final chunk the request its frame built, verified, decoded and run
exactly once; a replayed final chunk the original execution's request (CG-IDEM-1).

A failed run drops the group and is what replays meet; done, the group keeps only its
request id (its bytes are released unless the rules in force keep them).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from contract.errors import ErrorCode
from contract.models import ChunkAccepted
from fake_gs.answers.refusals import ApiError
from fake_gs.answers.render import render
from fake_gs.chunking import machine as cm
from fake_gs.chunking.decode import decode
from fake_gs.chunking.groups import DONE, FAILED, ChunkGroup
from fake_gs.chunking.stream import malformed
from fake_gs.settings import FakeSettings


@dataclass(frozen=True)
class Acknowledged:
    """A non-final chunk kept (or a repeat of one): its progress answer (202, CG-NONFINAL-1)."""

    answer: dict[str, Any]


class Submitted(Protocol):
    """A request a route built (the store's request record)."""

    @property
    def request_id(self) -> str: ...


R = TypeVar("R", bound=Submitted)


def acknowledge(group: ChunkGroup, idx: int, ack: cm.Ack) -> Acknowledged:
    """A non-final chunk's answer: progress, never a request id (CG-NONFINAL-1)."""
    body = render(ChunkAccepted(chunk_group_id=group.group_id, chunk_idx=idx,
                                        received_chunks=len(group.received), total_chunks=group.total))
    if ack.leak_request_id:
        body["request_id"] = str(uuid.uuid4())
        body["job_id"] = group.job_id
    return Acknowledged(body)


async def run_once(group: ChunkGroup, run: cm.Execute, groups: dict[str, ChunkGroup], lock: threading.RLock,
                   settings: FakeSettings, deep_crashes: bool, build: Callable[[Any, ChunkGroup | None], R],
                   build_unread: Callable[[ChunkGroup | None], R]) -> R:
    """Verify the whole frame, decode it, release the buffer, build (as ``run`` says), once;
    a failure drops the group and is what replays meet."""
    try:
        if run.missing:  # only when the machine's missing-chunks rule is waived
            req = build_unread(group)
        else:
            if run.verify_sha:  # the frame's sha256, hashed in frame order as its chunks came
                hashed = group.buffer.hash if group.buffer is not None else None
                if hashed is None or hashed.next != group.total:
                    raise ApiError(ErrorCode.CHUNK_GROUP_MISSING_CHUNKS, f"chunk group {group.group_id} is incomplete")
                if await hashed.digest.hexdigest() != group.frame_sha256:
                    raise malformed(f"chunk group {group.group_id}: reassembled frame does not match frame_sha256")
            if group.buffer is None:
                raise ApiError(ErrorCode.CHUNK_GROUP_RESTART_REQUIRED, f"chunk group {group.group_id} was released")
            frame = group.buffer.view  # the whole frame, in place: nothing is joined
            if run.release_bytes:  # the frame view keeps the bytes until the decoded batch lets go
                group.release()
            obj = await decode(settings, frame, deep_crashes=deep_crashes, frame_limits=run.frame_limits)
            del frame
            req = build(obj, group)
            if run.keep_decoded:
                group.decoded = obj
    except BaseException as exc:
        with lock:
            if groups.get(group.group_id) is group:
                del groups[group.group_id]
            group.release()
            group.status = FAILED
            group.failure = exc if isinstance(exc, ApiError) else ApiError(ErrorCode.INTERNAL, "chunk group failed")
        group.finished.set()
        raise
    with lock:
        if run.release_bytes:
            group.release()
        group.request_id = req.request_id
        group.status = DONE
    group.finished.set()
    return req


async def replay(group: ChunkGroup, again: cm.Replay, build: Callable[[Any, ChunkGroup | None], R],
                 original: Callable[[str], R]) -> R:
    """A repeated final chunk: the original execution's request (CG-IDEM-1)."""
    await group.finished.wait()
    if group.failure is not None:
        raise group.failure
    if again.execute_again and group.decoded is not None:
        rerun = build(group.decoded, None if again.quietly else group)
        if not again.quietly:
            return rerun
    assert group.request_id is not None
    return original(group.request_id)
