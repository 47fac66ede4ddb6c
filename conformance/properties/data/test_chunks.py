"""CHUNK: request chunks of any size are taken and verified; the server's result chunks
follow the chunk format."""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from conformance.drivers.raw import RawDriver, chunk_bytes_for, encode, request_chunks
from conformance.fixtures import Source
from conformance.inputs.strategies import chunk_counts, fb_payloads
from conformance.jobs import SharedJob
from conformance.judging import frames
from conformance.judging.checks import refused
from conformance.judging.large import LargeResult, chunked
from conformance.judging.variants import CHUNK_BYTES, forward_body
from conformance.reporting.violations import Soft, expect
from conformance.runtime import prop
from conformance.target import Target
from contract.clauses import checks
from contract.shapes import check_loss
from contract.states import RequestState
from contract.wire import CHUNK_HEADER_ALLOWANCE


def _fb_frame(seed: int = 1, seq: int = 40) -> bytes:
    from conformance.inputs.strategies import tensor

    return encode(
        {
            "args": [],
            "kwargs": {
                "input_ids": tensor((2, seq), "int64", seed),
                "labels": tensor((2, seq), "int64", seed + 1),
            },
        }
    )


def _judge_chunk(i: int, raw: bytes, soft: Soft) -> dict | None:
    """CHUNK-FORMAT-1 and the fields of CHUNK-DESC-1 on one result chunk; its descriptor,
    or None when it is not a DSSST1 frame at all."""
    view = frames.inspect_frame(raw)
    if not soft.expect(
        "CHUNK-FORMAT-1",
        view is not None and not view.problems,
        f"chunk {i} is not a DSSST1 frame: {view.problems if view else 'unparseable'}",
    ):
        return None
    assert view is not None
    tree_ok = view.tree == ["d", [["payload", ["t", "payload"]]]]
    entry = view.entries.get("payload", {})
    soft.expect(
        "CHUNK-FORMAT-1",
        tree_ok and entry.get("dtype") == "U8" and len(entry.get("shape", [])) == 1,
        f"chunk {i} tree {view.tree!r} / payload {entry!r}",
    )
    op = view.op if isinstance(view.op, dict) else {}
    soft.expect(
        "CHUNK-FORMAT-1", list(op) == ["result_chunk"], f"chunk {i} op metadata keys {list(op)}"
    )
    desc = op.get("result_chunk") or {}
    for name in ("chunk_idx", "total_chunks", "frame_sha256", "frame_size_bytes"):
        soft.expect("CHUNK-DESC-1", name in desc, f"chunk {i} descriptor lacks {name}")
    return desc


def _judge_descriptors(descs: list[dict], frame: bytes, soft: Soft) -> None:
    """CHUNK-DESC-1: indexes count from 0 and every descriptor agrees with the whole."""
    soft.expect(
        "CHUNK-DESC-1",
        [d.get("chunk_idx") for d in descs] == list(range(len(descs))),
        f"chunk_idx sequence {[d.get('chunk_idx') for d in descs]}",
    )
    whole = {
        "total_chunks": len(descs),
        "frame_sha256": hashlib.sha256(frame).hexdigest(),
        "frame_size_bytes": len(frame),
    }
    for name, want in whole.items():
        soft.expect(
            "CHUNK-DESC-1",
            all(d.get(name) == want for d in descs),
            f"{name} does not match the reassembled frame ({len(descs)} chunks)",
        )


@checks("CHUNK-FORMAT-1", "CHUNK-DESC-1", "CHUNK-SIZE-1")
@prop(scale=0.2)
@given(seq=st.integers(8, 400))
def test_result_chunks_are_chunk_frames(
    gs_target: Target, gs_source: Source, gs_large: LargeResult | None, seq: int
) -> None:
    """Result chunks: {payload: U8[n]} frames, one result_chunk descriptor, consistent sizes."""
    _, ops = chunked(gs_source, gs_large, forward_body(2, seq))
    events = ops.last.chunk_events
    expect("CHUNK-FORMAT-1", events, "no result chunks to judge")
    soft = Soft()
    descs, payloads, sizes = [], [], []
    for i, ev in enumerate(events):
        raw = base64.b64decode(ev["payload_b64"])
        sizes.append(len(raw))
        desc = _judge_chunk(i, raw, soft)
        if desc is not None:
            descs.append(desc)
            payloads.append(frames.chunk_parts(raw)[1])
    soft.check()
    _judge_descriptors(descs, b"".join(payloads), soft)
    ranges = [len(p) for p in payloads]
    soft.expect(
        "CHUNK-SIZE-1",
        len(set(ranges[:-1])) <= 1 and ranges[-1] <= ranges[0],
        f"payload ranges are not equal cuts: {ranges[:8]}...",
    )
    bound = CHUNK_BYTES if gs_target.embedded else ranges[0] + CHUNK_HEADER_ALLOWANCE
    soft.expect(
        "CHUNK-SIZE-1",
        ranges[0] <= bound - CHUNK_HEADER_ALLOWANCE and max(sizes) <= bound,
        f"chunks exceed max_bytes={CHUNK_BYTES}: ranges {ranges[0]}, largest chunk {max(sizes)}",
    )
    soft.check()


@checks("CHUNK-ANY-1")
@prop(scale=0.6)
@given(payload=fb_payloads(), n=chunk_counts)
def test_any_chunking_is_taken(
    gs_raw: RawDriver, gs_job: SharedJob, payload: dict[str, Any], n: int
) -> None:
    """forward-backward takes a frame cut into any number of chunks of any valid size."""
    frame = encode(payload)
    chunks = request_chunks(frame, "forward_backward", chunk_bytes=chunk_bytes_for(len(frame), n))
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)
    expect(
        "CHUNK-ANY-1",
        len(answers) == len(chunks) and answers[-1].ok,
        f"{len(chunks)} chunks: {answers[-1]}",
    )
    settled = gs_raw.settle(gs_job.job_id, answers[-1].field("request_id"))
    expect(
        "CHUNK-ANY-1", settled.status == RequestState.DONE, f"ended {settled.raw_status}: {settled.error!r}"
    )
    expect("CHUNK-ANY-1", not check_loss(settled.decoded().get("avg_loss")), "no finite loss")


@checks("CHUNK-VERIFY-1")
@prop(scale=0.4)
@given(n=st.integers(1, 5), data=st.data())
def test_sha_mismatch_refused(
    gs_raw: RawDriver, gs_job: SharedJob, n: int, data: st.DataObject
) -> None:
    """A payload byte changed under an unchanged frame_sha256 is refused with a 4xx."""
    frame = _fb_frame(seed=data.draw(st.integers(0, 1000)))
    view = frames.inspect_frame(frame)
    assert view is not None, "the property's own frame is a safetensors blob"
    start = 8 + view.header_len
    pos = data.draw(st.integers(start, len(frame) - 1), label="flipped byte")
    bad = frame[:pos] + bytes([frame[pos] ^ 0x01]) + frame[pos + 1 :]
    gid = str(uuid.uuid4())
    good_chunks = frames.split(frame, n, gid)
    bad_chunks = frames.split(bad, n, gid)
    chunks = [
        frames.with_payload(g, frames.chunk_parts(b)[1])
        for g, b in zip(good_chunks, bad_chunks, strict=True)
    ]
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)
    soft = Soft()
    refused(answers[-1], soft, "CHUNK-VERIFY-1")
    soft.check()


@checks("CHUNK-VERIFY-1")
def test_size_mismatch_refused(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """A frame_size_bytes that lies (consistently) is refused with a 4xx."""
    frame = _fb_frame()
    gid = str(uuid.uuid4())
    chunks = [
        frames.with_descriptor(c, frame_size_bytes=len(frame) + 8)
        for c in frames.split(frame, 2, gid)
    ]
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)
    soft = Soft()
    refused(answers[-1], soft, "CHUNK-VERIFY-1")
    soft.check()


@checks("CHUNK-DESC-2")
@prop(scale=0.4)
@given(
    field=st.sampled_from(
        ["total_chunks", "frame_sha256", "frame_size_bytes", "operation", "chunk_idx"]
    )
)
def test_disagreeing_descriptors_refused(gs_raw: RawDriver, gs_job: SharedJob, field: str) -> None:
    """Chunks disagreeing on a descriptor field, or an index out of range, get a 4xx."""
    frame = _fb_frame(seed=7)
    gid = str(uuid.uuid4())
    chunks = frames.split(frame, 3, gid)
    change = {
        "total_chunks": 4,
        "frame_sha256": "0" * 64,
        "frame_size_bytes": len(frame) + 1,
        "operation": "generate",
        "chunk_idx": 3,
    }[field]
    original = list(chunks)
    chunks[1] = frames.with_descriptor(chunks[1], **{field: change})
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)
    bad = next((a for a in answers if not a.ok), answers[-1])
    soft = Soft()
    refused(bad, soft, "CHUNK-DESC-2")
    gs_raw.finish_group("forward_backward", gs_job.job_id, original[1:])
    soft.check()


@checks("CHUNK-KIND-1")
def test_result_chunk_as_request_refused(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """A result_chunk sent as a request chunk is refused with a 4xx."""
    frame = _fb_frame()
    chunks = [frames.as_kind(c, "result_chunk") for c in frames.split(frame, 2, str(uuid.uuid4()))]
    ans = gs_raw.call("forward_backward", data=chunks[0], job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "CHUNK-KIND-1")
    soft.check()


@checks("CHUNK-PLAIN-1")
@prop(scale=0.3)
@given(prompts=st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=3))
def test_generate_takes_plain_frames(
    gs_raw: RawDriver, gs_job: SharedJob, prompts: list[str]
) -> None:
    """generate takes a plain frame that fits, without a chunk envelope."""
    answers, settled = gs_raw.run_frame(
        "generate", gs_job.job_id, {"prompts": prompts}, force_chunk=False
    )
    expect("CHUNK-PLAIN-1", settled is not None and settled.status == RequestState.DONE, f"{answers[-1]}")
