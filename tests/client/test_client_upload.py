"""Chunked octet upload and the chunk-group protocol, over real loopback HTTP."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from client_loopback import FAST, Reply, Seen, loopback

from client.config import ClientConfig
from client.errors import ChunkGroupConflict, ChunkGroupRestartRequired, ProtocolError
from client.rest import CortexRestClient
from contract import wire
from contract.errors import error_body

SUBMITTED = {"request_id": "req-1", "job_id": "j"}
BATCH: dict[str, Any] = {"args": [], "kwargs": {"input_ids": torch.arange(6000).reshape(2, 3000)}}


def _rest(url: str, **cfg: Any) -> CortexRestClient:
    return CortexRestClient(ClientConfig(base_url=url, **{**FAST, "retries": 3, **cfg}))


def _descriptor(seen: Seen) -> dict[str, Any] | None:
    meta = wire.read_metadata(seen.body)
    desc = meta.get("request_chunk") if isinstance(meta, dict) else None
    return desc if isinstance(desc, dict) else None


def _answer_final(seen: Seen) -> Reply:
    desc = _descriptor(seen)
    if desc is None or desc["chunk_idx"] == desc["total_chunks"] - 1:
        return Reply(200, SUBMITTED)
    return Reply(200, {"chunk_group_id": desc["chunk_group_id"], "chunk_idx": desc["chunk_idx"]})


def test_forward_backward_sends_the_chunk_envelope_even_for_one_chunk() -> None:
    with loopback(_answer_final) as srv:
        assert _rest(srv.url).forward_backward("j", {"args": [], "kwargs": {"x": 1}}) == SUBMITTED
        (only,) = srv.seen
    desc = _descriptor(only)
    assert desc is not None
    assert (desc["chunk_idx"], desc["total_chunks"], desc["operation"]) == (0, 1, "forward-backward")
    assert only.path.endswith("/j/forward-backward")
    assert only.headers["content-type"] == "application/octet-stream"
    frame = wire.decode_byte_chunks([only.body], "request")
    assert wire.loads(frame) == {"args": [], "kwargs": {"x": 1}}
    assert wire.read_metadata(frame) == wire.standard_request_metadata()


def test_many_chunks_one_group_in_order() -> None:
    with loopback(_answer_final) as srv:
        _rest(srv.url, max_chunk_bytes=16384).forward_backward("j", BATCH)
        descs = [_descriptor(s) for s in srv.seen]
        bodies = [s.body for s in srv.seen]
    assert len(descs) > 3
    assert [d["chunk_idx"] for d in descs if d] == list(range(len(descs)))
    assert len({d["chunk_group_id"] for d in descs if d}) == 1
    assert all(len(b) <= 16384 for b in bodies)
    out = wire.loads(wire.decode_byte_chunks(bodies, "request"))
    assert torch.equal(out["kwargs"]["input_ids"], BATCH["kwargs"]["input_ids"])


def test_restart_required_replays_the_whole_group_once_from_chunk_zero() -> None:
    forgot = {"done": False}

    def script(seen: Seen) -> Reply:
        desc = _descriptor(seen)
        assert desc is not None
        if desc["chunk_idx"] == 2 and not forgot["done"]:
            forgot["done"] = True
            return Reply(409, error_body("chunk_group_restart_required", "start again"))
        return _answer_final(seen)

    with loopback(script) as srv:
        assert _rest(srv.url, max_chunk_bytes=16384).forward_backward("j", BATCH) == SUBMITTED
        descs = [_descriptor(s) for s in srv.seen]
        bodies = [s.body for s in srv.seen]
    total = descs[0]["total_chunks"] if descs[0] else 0
    assert [d["chunk_idx"] for d in descs if d] == [0, 1, 2] + list(range(total))
    assert bodies[:3] == bodies[3:6]  # the very same chunks again
    assert len({d["chunk_group_id"] for d in descs if d}) == 1


def test_restart_required_twice_surfaces() -> None:
    def script(seen: Seen) -> Reply:
        desc = _descriptor(seen)
        if desc and desc["chunk_idx"] == 1:
            return Reply(409, error_body("chunk_group_restart_required", "again"))
        return _answer_final(seen)

    with loopback(script) as srv:
        with pytest.raises(ChunkGroupRestartRequired, match="route=forward_backward"):
            _rest(srv.url, max_chunk_bytes=16384).forward_backward("j", BATCH)
        assert len(srv.seen) == 4  # 0, 1, then 0, 1 once more


def test_conflict_is_typed_and_not_retried() -> None:
    with loopback(lambda s: Reply(409, error_body("chunk_group_conflict", "other frame"))) as srv:
        with pytest.raises(ChunkGroupConflict):
            _rest(srv.url).forward_backward("j", {"kwargs": {}})
        assert len(srv.seen) == 1


def test_transient_error_on_a_middle_chunk_retries_that_chunk() -> None:
    failed = {"done": False}

    def script(seen: Seen) -> Reply:
        desc = _descriptor(seen)
        if desc and desc["chunk_idx"] == 1 and not failed["done"]:
            failed["done"] = True
            return Reply(503, error_body("unavailable", "blip"))
        return _answer_final(seen)

    with loopback(script) as srv:
        _rest(srv.url, max_chunk_bytes=16384).forward_backward("j", BATCH)
        idx = [d["chunk_idx"] for d in map(_descriptor, srv.seen) if d]
    assert idx[:3] == [0, 1, 1]


def test_request_id_on_a_non_final_chunk_is_a_protocol_error() -> None:
    with loopback(lambda s: Reply(200, SUBMITTED)) as srv, pytest.raises(
            ProtocolError, match="non-final chunk 0"):
        _rest(srv.url, max_chunk_bytes=16384).forward_backward("j", BATCH)


def test_final_chunk_without_request_id_is_a_protocol_error() -> None:
    with loopback(lambda s: Reply(200, {})) as srv, pytest.raises(ProtocolError, match="without a request_id"):
        _rest(srv.url).forward_backward("j", {"kwargs": {}})


def test_generate_sends_a_plain_frame_when_it_fits_and_chunks_otherwise() -> None:
    small = {"prompts": [[1, 2, 3]], "sampling_params": {"max_tokens": 4}}
    big = {"prompts": [list(range(5000))] * 4}
    with loopback(_answer_final) as srv:
        rest = _rest(srv.url, max_chunk_bytes=16384)
        rest.generate("j", small)
        plain = srv.seen[-1]
        rest.generate("j", big)
        chunked = srv.seen[1:]
    assert _descriptor(plain) is None
    assert wire.loads(plain.body) == small
    assert len(chunked) > 1 and all(_descriptor(s) for s in chunked)
    assert {_descriptor(s)["operation"] for s in chunked} == {"generate"}  # type: ignore[index]


def test_forward_operation_envelope_and_size_cap() -> None:
    import base64

    with loopback(lambda s: Reply(200, SUBMITTED)) as srv:
        _rest(srv.url).forward_operation("j", {"args": [], "kwargs": {"x": 1}})
        body = srv.seen[0].json()
    assert body["operation_type"] == "forward"
    assert body["payload"]["content_type"] == "application/octet-stream"
    assert wire.loads(base64.b64decode(body["payload"]["payload_b64"]))["kwargs"] == {"x": 1}


def test_big_chunks_go_as_pieces_of_the_frame_with_a_content_length() -> None:
    """A chunk over the join size is the chunk header plus views of the frame (no joined
    copy), sent with a Content-Length; the next chunk's header is made once this chunk's
    pieces are handed over, while it is still being answered."""
    from client.calls.upload import JOIN_BELOW, ChunkBody, split_frame

    frame = wire.dumps({"args": [], "kwargs": {"input_ids": torch.arange(200_000)}})
    bodies = split_frame(frame, max_bytes=2 * JOIN_BELOW, operation="forward-backward", force_chunk=True)
    assert len(bodies) == 4 and all(isinstance(b, ChunkBody) for b in bodies)
    first = bodies[0]
    assert isinstance(first, ChunkBody)
    header, *views = list(first)
    assert all(v.obj is frame for v in views) and len(first) == len(header) + sum(len(v) for v in views)
    assert set(first.plan._prefixes) == {0, 1}, "chunk 1's header is ready once chunk 0 is handed over"
    with loopback(_answer_final) as srv:
        _rest(srv.url, max_chunk_bytes=2 * JOIN_BELOW).forward_backward("j", frame)
        seen = list(srv.seen)
    assert all("content-length" in s.headers and "transfer-encoding" not in s.headers for s in seen)
    assert wire.decode_byte_chunks([s.body for s in seen], "request") == frame
