"""WIRE: DSSST1 frames both ways: the server's result frames follow the layout, and it takes
any well-formed frame while refusing pickle, zip, wrong versions and garbage."""

from __future__ import annotations

import io
import pickle
import struct
import time
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from conformance.drivers.kit_client import ClientDriver, ClientOps
from conformance.drivers.ops import RawOps
from conformance.drivers.raw import Answer, RawDriver, encode, request_chunks
from conformance.inputs.strategies import (
    ALL_DTYPES,
    generate_requests,
    malformed_frames,
    model_kwargs,
    tensor,
)
from conformance.jobs import SharedJob
from conformance.judging import frames
from conformance.judging.checks import refused, refused_or_failed
from conformance.reporting.violations import Soft, expect
from conformance.runtime import prop
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.states import RequestState
from contract.wire import CHUNK_HEADER_ALLOWANCE, MAX_HEADER_BYTES

FRAME_ROUTES = ["generate", "forward_backward"]


def _judge_frame(data: bytes | None, soft: Soft) -> None:
    if data is None:
        soft.expect("WIRE-FORMAT-1", False, "a tensor result came back as plain JSON")
        return
    view = frames.inspect_frame(data)
    if view is None:
        soft.expect("WIRE-FORMAT-1", False, "result is not a safetensors frame")
        return
    for problem in view.problems:
        cid = "WIRE-TREE-1" if "node" in problem or "key" in problem else "WIRE-FORMAT-1"
        if "scalar" in problem:
            cid = "WIRE-SCALAR-1"
        if "__dss_empty__" in problem:
            cid = "WIRE-EMPTY-1"
        soft.expect(cid, False, problem)
    bad = frames.tensor_dtypes(view) - set(frames.DTYPE_SIZES)
    soft.expect("WIRE-DTYPE-1", not bad, f"result dtypes outside DSSST1: {bad}")


@checks("WIRE-FORMAT-1", "WIRE-TREE-1", "WIRE-DTYPE-1")
@prop(scale=0.5)
@given(kwargs=model_kwargs(extras=False), entropy=st.booleans())
def test_forward_result_frames(gs_ops: RawOps, kwargs: dict[str, Any], entropy: bool) -> None:
    """Forward results, whatever the batch, are well-formed DSSST1 frames."""
    gs_ops.forward_op({"args": [], "kwargs": kwargs, "meta": {"calculate_entropy": entropy}})
    soft = Soft()
    _judge_frame(gs_ops.settled.frame_bytes(), soft)
    soft.check()


@checks("WIRE-FORMAT-1", "WIRE-TREE-1", "WIRE-EMPTY-1")
@prop(scale=0.3)
@given(req=generate_requests())
def test_generate_result_frames(gs_ops: RawOps, req: dict[str, Any]) -> None:
    """Generate results are DSSST1 frames too; frames without tensors carry __dss_empty__."""
    gs_ops.generate(req)
    soft = Soft()
    _judge_frame(gs_ops.settled.frame_bytes(), soft)
    soft.check()


@checks("WIRE-SCALAR-1", "WIRE-DTYPE-1")
@prop(scale=0.4)
@given(
    dtype=st.sampled_from(ALL_DTYPES),
    scalar=st.booleans(),
    dims=st.tuples(st.integers(1, 3), st.integers(1, 6)),
)
def test_every_dtype_and_scalars_accepted(
    gs_ops: RawOps, dtype: str, scalar: bool, dims: tuple[int, int]
) -> None:
    """Frames holding any DSSST1 dtype, 0-d tensors included, are taken and decoded."""
    import torch

    extra = tensor(dims, dtype, 5)
    kwargs = {
        "input_ids": tensor(dims, "int64", 4),
        "extra": extra[0, 0] if scalar else extra,
        "scalar_temperature": torch.tensor(0.5, dtype=torch.float32),
    }
    result = gs_ops.fwd_bwd({"args": [], "kwargs": kwargs})
    expect("WIRE-DTYPE-1", "avg_loss" in result, f"frame with {dtype} refused or odd: {result!r}")


@checks("WIRE-EMPTY-1")
def test_tensorless_frames_accepted(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """A frame with no tensors (the __dss_empty__ form) is a valid generate request."""
    frame = encode({"prompts": ["hello", [1, 2, 3]]})
    view = frames.inspect_frame(frame)
    assert view is not None and "__dss_empty__" in view.entries
    answers, settled = gs_raw.run_frame("generate", gs_job.job_id, frame, force_chunk=False)
    expect(
        "WIRE-EMPTY-1",
        settled is not None and settled.status == RequestState.DONE,
        f"tensor-less frame: {answers[-1]}",
    )


PICKLES = [pickle.dumps({"input_ids": [[1, 2, 3]]}, protocol=p) for p in (2, 3, 4, 5)]


def _zip_payload() -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save({"input_ids": torch.ones(1, 3, dtype=torch.int64)}, buf)
    return buf.getvalue()


def _refused_naming(gs_raw: RawDriver, job_id: str, ans: Answer, clause: str, word: str) -> None:
    """A refusal (the kit's 400; spec §9.1 and §14 name no form, so a request that ends
    failed is one too) whose message names the legacy format (``word``) it refused (the
    kit's wording: WIRE-LEGACY-1)."""
    soft = Soft()
    seen: list[Any] = []

    def settle(rid: str) -> Any:
        seen.append(gs_raw.settle(job_id, rid))
        return seen[-1]

    refused_or_failed(ans, soft, clause, settle, statuses=[400])
    message = str(seen[-1].final_body.get("error") if seen else ans.field("message", "")).lower()
    soft.expect("WIRE-LEGACY-1", word in message, f"refusal message does not mention {word}: {message!r}")
    soft.check()


@checks("WIRE-PICKLE-1", "WIRE-LEGACY-1")
@pytest.mark.parametrize("route", FRAME_ROUTES)
@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickle_refused(gs_raw: RawDriver, gs_job: SharedJob, route: str, protocol: int) -> None:
    """Pickles are refused with a message naming legacy pickle payloads."""
    ans = gs_raw.call(route, data=PICKLES[protocol - 2], job_id=gs_job.job_id)
    _refused_naming(gs_raw, gs_job.job_id, ans, "WIRE-PICKLE-1", "pickle")


@checks("WIRE-ZIP-1", "WIRE-LEGACY-1")
@pytest.mark.parametrize("route", FRAME_ROUTES)
def test_torch_save_refused(gs_raw: RawDriver, gs_job: SharedJob, route: str) -> None:
    """torch.save zips are refused with a message naming torch.save payloads."""
    ans = gs_raw.call(route, data=_zip_payload(), job_id=gs_job.job_id)
    _refused_naming(gs_raw, gs_job.job_id, ans, "WIRE-ZIP-1", "torch.save")


@checks("WIRE-VERSION-1")
@pytest.mark.parametrize("version", ["DSSST2", "DSSST0", "dssst1", ""])
@pytest.mark.parametrize("route", FRAME_ROUTES)
def test_other_versions_refused(
    gs_raw: RawDriver, gs_job: SharedJob, route: str, version: str
) -> None:
    """A dss version other than DSSST1 is refused: a 4xx (the kit: 400), or a request that
    ends failed (spec §9.2 names no form)."""
    frame = frames.build_frame(
        [
            "d",
            [
                ["prompts", ["j", ["x"]]],
                ["kwargs", ["d", [["input_ids", ["t", "kwargs.input_ids"]]]]],
            ],
        ],
        [frames.RawTensor("kwargs.input_ids", "I64", (1, 2), struct.pack("<qq", 1, 2))],
        version=version,
    )
    ans = gs_raw.call(route, data=frame, job_id=gs_job.job_id)
    soft = Soft()
    refused_or_failed(ans, soft, "WIRE-VERSION-1", lambda rid: gs_raw.settle(gs_job.job_id, rid), statuses=[400])
    soft.check()


@checks("WIRE-HEADER-1")
@pytest.mark.parametrize("length", [MAX_HEADER_BYTES + 1, 2**40, 2**63, 10_000])
@pytest.mark.parametrize("route", FRAME_ROUTES)
def test_lying_header_lengths(
    gs_raw: RawDriver, gs_job: SharedJob, route: str, length: int
) -> None:
    """Header lengths over 64 MiB or past the body are refused quickly, nothing allocated."""
    body = struct.pack("<Q", length) + b'{"__metadata__":{}}' + b" " * 64
    started = time.monotonic()
    ans = gs_raw.call(route, data=body, job_id=gs_job.job_id)
    elapsed = time.monotonic() - started
    soft = Soft()
    refused(ans, soft, "WIRE-HEADER-1", statuses=[400])
    soft.expect("WIRE-HEADER-1", elapsed < 5.0, f"took {elapsed:.1f}s to refuse")
    soft.check()


_GOOD = encode({"args": [], "kwargs": {"input_ids": [[1, 2, 3]]}})


@checks("WIRE-MALFORMED-1")
@prop(scale=1.0)
@given(data=malformed_frames(_GOOD), route=st.sampled_from(FRAME_ROUTES))
def test_malformed_frames_refused(
    gs_raw: RawDriver, gs_job: SharedJob, data: bytes, route: str
) -> None:
    """Anything the codec refuses is a 400 malformed_frame (legacy-looking bytes excepted)."""
    from contract import wire

    try:
        wire.loads(data)
        assume(False)
    except wire.WireError:
        pass
    assume(data)  # an empty body is its own family (a frame is required), judged elsewhere
    codes = (
        [ErrorCode.LEGACY_PAYLOAD_REFUSED]
        if wire.sniff_refused_payload(data)
        else [ErrorCode.MALFORMED_FRAME, ErrorCode.FRAME_LIMIT]
    )
    ans = gs_raw.call(route, data=data, job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "WIRE-MALFORMED-1", codes=codes, statuses=[400])
    soft.check()


@checks("WIRE-MALFORMED-1")
@prop(scale=0.3)
@given(data=malformed_frames(_GOOD))
def test_malformed_frames_in_chunks(gs_raw: RawDriver, gs_job: SharedJob, data: bytes) -> None:
    """Garbage carried inside valid request chunks is refused at the final chunk (4xx or a
    failed request), never a 5xx."""
    from contract import wire

    try:
        wire.loads(data)
        assume(False)
    except wire.WireError:
        pass
    assume(len(data) > 0)
    chunks = request_chunks(data, "forward_backward", chunk_bytes=CHUNK_HEADER_ALLOWANCE + max(1, len(data) // 2))
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)
    final = answers[-1]
    soft = Soft()
    if final.ok and isinstance(final.field("request_id"), str):
        settled = gs_raw.settle(gs_job.job_id, final.field("request_id"))
        soft.expect(
            "WIRE-MALFORMED-1",
            settled.status == RequestState.FAILED,
            f"garbage frame in chunks executed: {settled.raw_status}",
        )
    else:
        refused(final, soft, "WIRE-MALFORMED-1", statuses=[400])
    soft.check()


@checks("WIRE-META-1")
def test_request_metadata(
    gs_raw: RawDriver, gs_job: SharedJob, gs_client_ops: ClientOps, gs_client: ClientDriver
) -> None:
    """Frames carrying {response_options: {format: dssst1, delivery: chunked}} are taken, and
    the client puts that metadata on its frames."""
    answers, settled = gs_raw.run_frame(
        "forward_backward", gs_job.job_id, {"args": [], "kwargs": {"input_ids": [[5, 6]]}}
    )
    expect("WIRE-META-1", settled is not None and settled.status == RequestState.DONE, f"{answers[-1]}")
    before = len(gs_client.sent)
    gs_client_ops.fwd_bwd({"input_ids": tensor((1, 4), "int64", 1)})
    from contract import wire

    frames_sent = [
        s.body
        for s in gs_client.sent[before:]
        if s.body[:8] and s.content_type.startswith("application/octet")
    ]
    expect("WIRE-META-1", frames_sent, "the client sent no frame")
    whole = wire.decode_byte_chunks(frames_sent)
    meta = wire.read_metadata(whole)
    expect(
        "WIRE-META-1",
        meta.get("response_options") == {"format": "dssst1", "delivery": "chunked"},
        f"client frame metadata {meta!r}",
    )
