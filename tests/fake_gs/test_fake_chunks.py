"""Chunk groups (spec §9.3): every rule, over real HTTP."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import requests
from fake_gs_api import OCTET, Api, batch, sampling_config, training_config

from contract import wire

MAX = 16_384  # small chunks: range of 8 KiB each


def chunks_of(obj: Any, *, group: str | None = None, max_bytes: int = MAX, operation: str = "forward-backward") -> list[bytes]:
    frame = wire.dumps(obj, metadata=wire.standard_request_metadata())
    return wire.encode_byte_chunks(frame, "request", operation=operation, max_bytes=max_bytes,
                                   chunk_group_id=group or str(uuid.uuid4()), force_chunk=True)


def post(api: Api, job_id: str, chunk: bytes, route: str = "forward-backward") -> requests.Response:
    return api.post(f"/{job_id}/{route}", data=chunk, headers=OCTET)


def group_state(api: Api, group: str) -> dict[str, Any]:
    return next(g for g in api.state()["chunk_groups"] if g["chunk_group_id"] == group)


def test_nonfinal_chunks_carry_no_request_id_final_does(api: Api, running: str) -> None:
    group = str(uuid.uuid4())
    chunks = chunks_of(batch(2, 600), group=group)
    assert len(chunks) >= 3
    for i, chunk in enumerate(chunks[:-1]):
        r = post(api, running, chunk)
        assert r.status_code == 202
        body = r.json()
        assert "request_id" not in body
        assert body == {"chunk_group_id": group, "chunk_idx": i, "received_chunks": i + 1, "total_chunks": len(chunks)}
    r = post(api, running, chunks[-1])
    assert r.status_code == 200 and set(r.json()) == {"request_id", "job_id"} and r.json()["job_id"] == running
    result = api.result(running, r.json()["request_id"])
    assert result["job_id"] == running and isinstance(result["avg_loss"], float)
    g = group_state(api, group)
    assert g["status"] == "done" and g["executions"] == 1 and g["buffered_bytes"] == 0


def test_chunks_across_connections_and_out_of_order(server, running: str) -> None:
    chunks = chunks_of(batch(3, 700))
    assert len(chunks) >= 4
    order = [0, *reversed(range(1, len(chunks) - 1)), len(chunks) - 1]
    last = None
    for idx in order:
        fresh = Api(server.base_url)  # a new connection per chunk
        last = post(fresh, running, chunks[idx])
    assert last is not None and last.status_code == 200
    Api(server.base_url).result(running, last.json()["request_id"])


def test_unknown_group_must_start_at_zero(api: Api, running: str) -> None:
    group = str(uuid.uuid4())
    chunks = chunks_of(batch(2, 600), group=group)
    before = api.state()
    for idx in (1, len(chunks) - 1):
        r = post(api, running, chunks[idx])
        assert r.status_code == 409 and r.json()["code"] == "chunk_group_restart_required"
    after = api.state()
    assert all(g["chunk_group_id"] != group for g in after["chunk_groups"])
    assert after["requests"]["total"] == before["requests"]["total"]
    # The client replays the whole group from chunk 0: accepted.
    for chunk in chunks:
        r = post(api, running, chunk)
    assert r.status_code == 200


def test_group_conflicts(api: Api, running: str) -> None:
    group = str(uuid.uuid4())
    first = chunks_of(batch(2, 600), group=group)
    assert post(api, running, first[0]).status_code == 202
    # Same group id, another frame (another sha256 and size).
    other = chunks_of(batch(2, 601), group=group)
    r = post(api, running, other[1])
    assert r.status_code == 409 and r.json()["code"] == "chunk_group_conflict"
    # Same group id, another chunk count.
    fewer = chunks_of(batch(2, 600), group=group, max_bytes=MAX * 4)
    r = post(api, running, fewer[0])
    assert r.status_code == 409 and r.json()["code"] == "chunk_group_conflict"
    # Same index, same descriptor, another payload.
    forged = bytearray(first[0])
    forged[-1] ^= 0xFF
    r = post(api, running, bytes(forged))
    assert r.status_code == 409 and r.json()["code"] == "chunk_group_conflict"
    # Same group on another route.
    r = post(api, running, first[0], route="forward-no-grad")
    assert r.status_code == 409 and r.json()["code"] == "chunk_group_conflict"
    # A repeated identical chunk is accepted without effect.
    r = post(api, running, first[0])
    assert r.status_code == 202 and r.json()["received_chunks"] == 1
    for chunk in first[1:]:
        r = post(api, running, chunk)
    assert r.status_code == 200


def test_missing_chunks_named_on_final(api: Api, running: str) -> None:
    group = str(uuid.uuid4())
    chunks = chunks_of(batch(2, 1500), group=group)
    assert len(chunks) >= 5
    post(api, running, chunks[0])
    post(api, running, chunks[2])
    r = post(api, running, chunks[-1])
    assert r.status_code == 409 and r.json()["code"] == "chunk_group_missing_chunks"
    missing = [1, *range(3, len(chunks) - 1)]
    assert str(missing) in r.json()["message"]
    assert [d["loc"][-1] for d in r.json()["detail"]] == missing
    assert group_state(api, group)["executions"] == 0
    for idx in missing:
        assert post(api, running, chunks[idx]).status_code == 202
    r = post(api, running, chunks[-1])
    assert r.status_code == 200


def test_replayed_final_chunk_resolves_to_one_execution(api: Api, running: str) -> None:
    group = str(uuid.uuid4())
    chunks = chunks_of(batch(2, 600), group=group)
    for chunk in chunks:
        r = post(api, running, chunk)
    rid = r.json()["request_id"]
    first = api.result(running, rid)
    fb_before = api.state()["jobs"][running]["forward_backward_executions"]
    # The final chunk again (lost answer), and the whole group again.
    again = post(api, running, chunks[-1])
    assert again.status_code == 200 and again.json()["request_id"] == rid
    for chunk in chunks:
        r = post(api, running, chunk)
    assert r.json()["request_id"] == rid
    assert api.result(running, r.json()["request_id"]) == first
    g = group_state(api, group)
    assert g["executions"] == 1 and g["replays"] == 2
    assert api.state()["jobs"][running]["forward_backward_executions"] == fb_before


def test_concurrent_final_chunks_execute_once(api: Api, running: str, server) -> None:
    group = str(uuid.uuid4())
    chunks = chunks_of(batch(4, 3000), group=group, max_bytes=60_000)
    for chunk in chunks[:-1]:
        post(api, running, chunk)
    answers: list[str] = []

    def final() -> None:
        answers.append(post(Api(server.base_url), running, chunks[-1]).json()["request_id"])

    threads = [threading.Thread(target=final) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(answers)) == 1
    api.result(running, answers[0])
    assert group_state(api, group)["executions"] == 1


def test_bad_sha_is_refused_and_group_dropped(api: Api, running: str) -> None:
    frame = wire.dumps(batch(2, 600))
    corrupt = bytearray(frame)
    corrupt[-5] ^= 0x01  # tensor bytes: still decodable, but not the announced frame
    group = str(uuid.uuid4())
    real = wire.encode_byte_chunks(frame, "request", max_bytes=MAX, chunk_group_id=group, force_chunk=True)
    fake = wire.encode_byte_chunks(bytes(corrupt), "request", max_bytes=MAX, chunk_group_id=group, force_chunk=True)
    # Keep the real descriptors (sha of the real frame) but carry the corrupt bytes in the last chunk.
    desc = wire.chunk_descriptor(real[-1])[1]  # type: ignore[index]
    payload = bytes(wire.chunk_payload(fake[-1]))
    import torch

    last = wire.dumps({"payload": torch.frombuffer(bytearray(payload), dtype=torch.uint8)}, metadata={"request_chunk": desc})
    for chunk in real[:-1]:
        post(api, running, chunk)
    r = post(api, running, last)
    assert r.status_code == 400 and r.json()["code"] == "malformed_frame" and "sha256" in r.json()["message"]
    assert all(g["chunk_group_id"] != group for g in api.state()["chunk_groups"])


def test_bad_descriptors_are_400(api: Api, running: str) -> None:
    import torch

    good = chunks_of(batch(2, 600))
    desc = wire.chunk_descriptor(good[0])[1]  # type: ignore[index]
    payload = torch.frombuffer(bytearray(wire.chunk_payload(good[0])), dtype=torch.uint8)
    bad_descs = [
        {**desc, "chunk_idx": desc["total_chunks"]},
        {**desc, "chunk_idx": -1},
        {**desc, "total_chunks": 0},
        {**desc, "frame_sha256": "xyz"},
        {**desc, "frame_size_bytes": 10},
        {**desc, "frame_size_bytes": 10**15},
        {k: v for k, v in desc.items() if k != "chunk_group_id"},
        {**desc, "chunk_group_id": ""},
        {**desc, "chunk_group_id": 5},
    ]
    for bad in bad_descs:
        r = post(api, running, wire.dumps({"payload": payload}, metadata={"request_chunk": bad}))
        assert r.status_code == 400 and r.json()["code"] == "malformed_frame", (bad, r.text)
    result_chunk = wire.encode_byte_chunks(wire.dumps(batch()), "result", max_bytes=MAX, force_chunk=True)[0]
    r = post(api, running, result_chunk)
    assert r.status_code == 400 and r.json()["code"] == "malformed_frame"
    not_a_chunk_tree = wire.dumps({"payload": payload, "x": 1}, metadata={"request_chunk": desc})
    assert post(api, running, not_a_chunk_tree).status_code == 400


def test_plain_frame_is_accepted_without_idempotency(api: Api, running: str) -> None:
    frame = wire.dumps(batch())
    r1, r2 = post(api, running, frame), post(api, running, frame)
    assert r1.status_code == r2.status_code == 200
    assert r1.json()["request_id"] != r2.json()["request_id"]


def test_single_chunk_envelope(api: Api, running: str) -> None:
    chunks = chunks_of(batch(), max_bytes=0)
    assert len(chunks) == 1 and wire.chunk_descriptor(chunks[0]) is not None
    r = post(api, running, chunks[0])
    assert r.status_code == 200 and "request_id" in r.json()


def test_group_limits(make_api) -> None:
    api = make_api(max_open_groups_per_job=2, max_buffered_bytes_per_job=100_000)
    job_id = api.running_job()
    for _ in range(2):
        assert post(api, job_id, chunks_of(batch(2, 600))[0]).status_code == 202
    r = post(api, job_id, chunks_of(batch(2, 600))[0])
    assert r.status_code == 429 and r.json()["code"] == "chunk_group_limit" and "retry-after" in r.headers
    api.post("/_fake/reset")
    job_id = api.running_job()
    r = post(api, job_id, chunks_of(batch(4, 4000), max_bytes=60_000)[0])
    assert r.status_code == 413 and r.json()["code"] == "buffer_limit"


def test_abandoned_groups_expire(make_api) -> None:
    api = make_api(chunk_group_idle_s=0.0)
    job_id = api.running_job()
    first = chunks_of(batch(2, 600))
    assert post(api, job_id, first[0]).status_code == 202
    # The next call sweeps idle groups: the abandoned one is gone, its bytes released.
    r = post(api, job_id, first[1])
    assert r.status_code == 409 and r.json()["code"] == "chunk_group_restart_required"
    assert api.state()["buffered_bytes"] == 0


def test_generate_and_forward_no_grad_accept_chunks(api: Api) -> None:
    running = api.running_job(training_config(), sampling_config(max_seq_len=8192))  # room for the long prompt
    rid = api.submit_frame(running, "generate", {"prompts": ["x " * 4000, [1, 2]]}, max_bytes=MAX)
    assert len(api.result(running, rid)["results"]) == 2
    rid = api.submit_frame(running, "forward-no-grad", batch(3, 900), max_bytes=MAX)
    assert tuple(api.result(running, rid)["model_outputs"]["logprobs"].shape) == (3, 900)
