"""LIMIT: the 60 MiB body limit (and exactly-at-limit acceptance), frame limits, chunk-group
caps with Retry-After, and expiry of abandoned groups."""

from __future__ import annotations

import json
import struct
import time
import uuid

import pytest

from conformance.drivers.raw import Answer, RawDriver
from conformance.fixtures import Variant
from conformance.jobs import SharedJob
from conformance.judging import frames
from conformance.judging.checks import refused
from conformance.judging.variants import variant_job
from conformance.reporting.violations import Soft, expect
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.limits import MAX_BODY_BYTES
from contract.states import RequestState
from fake_gs.testing.admin_api import AdminApi

REFUSE_WITHIN_S = 15.0


@checks("LIMIT-BODY-1", "LIMIT-BODY-3")
@pytest.mark.parametrize("route", ["generate_stream", "forward_backward", "generate", "step"])
def test_oversize_body(gs_raw: RawDriver, gs_job: SharedJob, route: str) -> None:
    """A generate-stream body over 60 MiB is refused (spec §6.7); the kit answers any body
    over 60 MiB 413 payload_too_large."""
    if not gs_raw.target.embedded and route not in ("generate_stream", "forward_backward"):
        pytest.skip("against a real URL two 60 MiB uploads (generate-stream, forward-backward) are enough")
    data = b"\x00" * (MAX_BODY_BYTES + 1)
    if route == "generate_stream":  # a valid request, too big: refused for its size alone
        data = json.dumps({"prompts": ["a" * MAX_BODY_BYTES]}).encode()
    ctype = "application/json" if route == "step" else "application/octet-stream"
    ans = gs_raw.call(route, data=data, content_type=ctype, job_id=gs_job.job_id)
    soft = Soft()
    if route == "generate_stream":
        refused(ans, soft, "LIMIT-BODY-1", codes=[ErrorCode.PAYLOAD_TOO_LARGE], statuses=[413])
    refused(ans, soft, "LIMIT-BODY-3", codes=[ErrorCode.PAYLOAD_TOO_LARGE], statuses=[413])
    soft.check()


def exact_limit_chunk(total: int = MAX_BODY_BYTES) -> bytes:
    """One request chunk of exactly ``total`` bytes carrying a valid forward-backward frame."""
    ids = struct.pack("<4q", 1, 2, 3, 4)

    def frame_of(blob_len: int, header_len: int | None = None) -> bytes:
        tree = [
            "d",
            [
                ["args", ["j", []]],
                [
                    "kwargs",
                    [
                        "d",
                        [["input_ids", ["t", "kwargs.input_ids"]], ["blob", ["t", "kwargs.blob"]]],
                    ],
                ],
            ],
        ]
        tensors = [
            frames.RawTensor("kwargs.input_ids", "I64", (1, 4), ids),
            frames.RawTensor("kwargs.blob", "U8", (blob_len,), b"\x07" * blob_len),
        ]
        return frames.build_frame(tree, tensors, header_len=header_len)

    gid = str(uuid.uuid4())
    desc = {
        "chunk_idx": 0,
        "total_chunks": 1,
        "frame_sha256": "0" * 64,
        "frame_size_bytes": 10**7 * 6,
        "operation": "forward-backward",
        "chunk_group_id": gid,
    }
    chunk_header = frames.chunk_header_len("request", desc, 10**7 * 6) + 16
    frame_size = total - 8 - chunk_header
    probe = frame_of(10**7 * 6)
    frame_header = struct.unpack_from("<Q", probe, 0)[0] + 16
    blob = frame_size - 8 - frame_header - len(ids)
    frame = frame_of(blob, header_len=frame_header)
    assert len(frame) == frame_size, (len(frame), frame_size)
    chunk = frames.build_chunk(
        "request", frames.descriptor(frame, 0, 1, gid), frame, header_len=chunk_header
    )
    assert len(chunk) == total, (len(chunk), total)
    return chunk


@checks("LIMIT-BODY-2")
def test_exactly_at_limit_accepted(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """A forward-backward body of exactly 60 MiB is taken and executes."""
    chunk = exact_limit_chunk()
    ans = gs_raw.call("forward_backward", data=chunk, job_id=gs_job.job_id)
    expect(
        "LIMIT-BODY-2",
        ans.ok and isinstance(ans.field("request_id"), str),
        f"a body of exactly {MAX_BODY_BYTES} bytes: {ans}",
    )
    settled = gs_raw.settle(gs_job.job_id, ans.field("request_id"))
    expect(
        "LIMIT-BODY-2", settled.status == RequestState.DONE, f"ended {settled.raw_status}: {settled.error!r}"
    )


def _deep(depth: int) -> bytes:
    node: list = ["t", "0" + ".0" * depth]
    for _ in range(depth):
        node = ["l", [node]]
    return frames.build_frame(node, [frames.RawTensor("0" + ".0" * depth, "U8", (1,), b"\x01")])


def _many_tensors(n: int) -> bytes:
    tree = ["l", [["t", str(i)] for i in range(n)]]
    return frames.build_frame(
        tree, [frames.RawTensor(str(i), "U8", (1,), b"\x01") for i in range(n)]
    )


def _big_json(size: int) -> bytes:
    return frames.build_frame(["d", [["prompts", ["j", ["x" * size]]]]])


@checks("LIMIT-FRAME-1")
@pytest.mark.parametrize("kind", ["depth", "tensors", "json"])
def test_frame_limits(gs_raw: RawDriver, gs_job: SharedJob, kind: str) -> None:
    """Frames over the depth, tensor-count or JSON-size limits answer 400 with a code, fast."""
    data = {
        "depth": lambda: _deep(200),
        "tensors": lambda: _many_tensors(150_000),
        "json": lambda: _big_json(20 * 1024 * 1024),
    }[kind]()
    started = time.monotonic()
    ans = gs_raw.call("generate", data=data, job_id=gs_job.job_id)
    elapsed = time.monotonic() - started
    soft = Soft()
    refused(ans, soft, "LIMIT-FRAME-1", statuses=[400])
    soft.expect("LIMIT-FRAME-1", bool(ans.any_code), "the refusal carries no code")
    soft.expect("LIMIT-FRAME-1", elapsed < REFUSE_WITHIN_S, f"took {elapsed:.1f}s to refuse")
    soft.check()


def _open_group(
    driver: RawDriver, job_id: str, size: int = 64, opened: list | None = None
) -> Answer:
    """Send chunk 0 of a two-chunk group; ``opened`` collects the second chunks to finish."""
    frame = frames.build_frame(
        [
            "d",
            [
                ["args", ["j", []]],
                [
                    "kwargs",
                    [
                        "d",
                        [["input_ids", ["t", "kwargs.input_ids"]], ["blob", ["t", "kwargs.blob"]]],
                    ],
                ],
            ],
        ],
        [
            frames.RawTensor("kwargs.input_ids", "I64", (1, 2), struct.pack("<2q", 1, 2)),
            frames.RawTensor("kwargs.blob", "U8", (size,), b"\x01" * size),
        ],
    )
    chunks = frames.split(frame, 2, str(uuid.uuid4()))
    ans = driver.call("forward_backward", data=chunks[0], job_id=job_id)
    if opened is not None and ans.ok:
        opened.append(chunks[1])
    return ans


@checks("LIMIT-GROUPS-1", "LIMIT-RETRYAFTER-1")
@pytest.mark.gs_fake_optional
def test_open_group_cap(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, gs_variant: Variant
) -> None:
    """Open chunk groups per job are capped; the excess answers 429/413 with a code (and
    429 carries Retry-After)."""
    if gs_target.embedded:
        driver, ops = variant_job(gs_variant("group-cap", max_open_groups_per_job=4))
        job_id, budget = ops.job_id, 12
    else:
        driver, job_id, budget = gs_raw, gs_job.job_id, 1024
    refusal = None
    opened: list[bytes] = []
    try:
        for _ in range(budget):
            ans = _open_group(driver, job_id, opened=opened)
            if not ans.ok:
                refusal = ans
                break
    finally:  # finish every group opened, so the job's cap is free again for other properties
        for chunk in opened:
            driver.finish_group("forward_backward", job_id, [chunk])
    if refusal is None:
        pytest.skip(f"no cap reached within {budget} open groups; the cap may be higher")
    soft = Soft()
    refused(refusal, soft, "LIMIT-GROUPS-1", statuses=[413, 429])
    soft.expect("LIMIT-GROUPS-1", bool(refusal.any_code), "the refusal carries no code")
    if refusal.status in (429, 503):
        soft.expect(
            "LIMIT-RETRYAFTER-1",
            refusal.headers.get("retry-after"),
            f"{refusal.status} without Retry-After",
        )
    soft.check()


@checks("LIMIT-GROUPS-1")
def test_buffered_bytes_cap(gs_variant: Variant) -> None:
    """Buffered bytes per job are capped: a group too big for the buffer gets 413/429 with a code."""
    driver, ops = variant_job(gs_variant("buffer-cap", max_buffered_bytes_per_job=64 * 1024))
    soft = Soft()
    ans = _open_group(driver, ops.job_id, size=200 * 1024)
    refused(ans, soft, "LIMIT-GROUPS-1", statuses=[413, 429])
    soft.expect("LIMIT-GROUPS-1", bool(ans.any_code), "the refusal carries no code")
    soft.check()


@checks("LIMIT-EXPIRE-1")
def test_abandoned_groups_expire(gs_variant: Variant, gs_admin: AdminApi) -> None:
    """Abandoned groups expire after the idle time and free their slots and bytes."""
    target = gs_variant("group-expiry", max_open_groups_per_job=2, chunk_group_idle_s=0.3)
    driver, ops = variant_job(target)
    for _ in range(2):
        expect("LIMIT-EXPIRE-1", _open_group(driver, ops.job_id).ok, "could not open a group")
    time.sleep(0.6)
    ans = _open_group(driver, ops.job_id)
    expect("LIMIT-EXPIRE-1", ans.ok, f"after the idle time a new group is still refused: {ans}")
    from conformance.fake_admin import admin_of

    state = admin_of(target).state()
    open_groups = [
        g
        for g in state.get("chunk_groups", [])
        if g.get("job_id") == ops.job_id and g.get("status") != RequestState.DONE
    ]
    expect(
        "LIMIT-EXPIRE-1",
        len(open_groups) == 1,
        f"{len(open_groups)} groups still open after expiry",
    )
