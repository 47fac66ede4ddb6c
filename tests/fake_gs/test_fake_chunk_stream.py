"""Chunks streamed into their group's buffer as they arrive: each lands at its
offset, in any order; one cut off mid-payload leaves nothing; a second copy of a chunk
still arriving waits to be judged against it; the frame is decoded from the buffer."""

from __future__ import annotations

import socket
import threading
import uuid
from typing import Any

import pytest
import requests
from fake_gs_api import OCTET, Api, batch, eventually

from conformance.drivers.rawhttp import read_answer, request_head
from contract import wire
from fake_gs.chunking import payload

MAX = 64 * 1024


def _group(server: Any, job: str, gid: str) -> Any:
    return server.state.store.groups.get(job, {}).get(gid)


def _chunks(obj: Any, gid: str) -> tuple[bytes, list[bytes]]:
    frame = wire.dumps(obj, metadata=wire.standard_request_metadata())
    return frame, wire.encode_byte_chunks(frame, "request", "forward-backward", MAX, gid, True)


def _post(api: Api, job: str, chunk: bytes) -> requests.Response:
    return api.post(f"/{job}/forward-backward", data=chunk, headers=OCTET)


def _open_half(api: Api, job: str, chunk: bytes) -> socket.socket:
    """A connection that has sent the head and half of ``chunk``'s body, and waits."""
    host, port = api.base_url.split("//", 1)[1].rsplit(":", 1)
    path = api.prefix.split(api.base_url, 1)[1] + f"/{job}/forward-backward"
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(request_head(f"{host}:{port}", path, len(chunk), OCTET["Content-Type"]) + chunk[: len(chunk) // 2])
    return sock


def test_chunks_land_at_their_offsets_in_any_order(make_api) -> None:
    api = make_api()
    job, gid = api.running_job(), str(uuid.uuid4())
    frame, chunks = _chunks(batch(4, 4000), gid)
    assert len(chunks) >= 5
    for idx in [0, 3, 1, 2, *range(4, len(chunks) - 1)]:
        assert _post(api, job, chunks[idx]).status_code == 202
    group = _group(api.server, job, gid)
    assert bytes(group.buffer.view[: len(frame) - len(wire.chunk_payload(chunks[-1]))]) == \
        frame[: len(frame) - len(wire.chunk_payload(chunks[-1]))], "every chunk at its offset, nothing joined"
    assert group.buffered_bytes == sum(len(wire.chunk_payload(c)) for c in chunks[:-1])
    final = _post(api, job, chunks[-1])
    assert final.status_code == 200, final.text
    assert "avg_loss" in api.result(job, final.json()["request_id"])
    assert group.buffer is None and group.executions == 1


def _half_of_chunk_1(api: Api) -> tuple[str, str, bytes, list[bytes], socket.socket]:
    """A group whose chunk 0 is in and whose chunk 1 is half sent (written in place)."""
    job, gid = api.running_job(), str(uuid.uuid4())
    frame, chunks = _chunks(batch(2, 9000), gid)
    assert _post(api, job, chunks[0]).status_code == 202
    sock = _open_half(api, job, chunks[1])
    assert eventually(lambda: 1 in _group(api.server, job, gid).arriving)
    return job, gid, frame, chunks, sock


def test_a_chunk_cut_off_mid_payload_leaves_nothing(make_api) -> None:
    api = make_api()
    job, gid, _, chunks, sock = _half_of_chunk_1(api)
    sock.close()
    assert eventually(lambda: 1 not in _group(api.server, job, gid).arriving)
    group = _group(api.server, job, gid)
    assert group.received == {0} and group.buffered_bytes == len(wire.chunk_payload(chunks[0]))
    for chunk in chunks[1:-1]:
        assert _post(api, job, chunk).status_code == 202
    final = _post(api, job, chunks[-1])
    assert final.status_code == 200, final.text
    assert "avg_loss" in api.result(job, final.json()["request_id"]) and group.executions == 1


def test_a_chunk_cut_off_after_spans_were_hashed_is_rolled_back_out_of_the_frame_hash(make_api, monkeypatch) -> None:
    """Half a chunk hashed as it streamed in (in spans of 4 KiB here), then cut off: its
    bytes leave the frame hash, so the group, sent again from that chunk, checks out."""
    monkeypatch.setattr(payload, "HASH_SPAN", 4096)
    api = make_api()
    job, gid, _, chunks, sock = _half_of_chunk_1(api)
    group = _group(api.server, job, gid)
    assert eventually(lambda: group.buffer.hash.digest.fed > len(wire.chunk_payload(chunks[0])))  # spans of chunk 1 in
    sock.close()
    assert eventually(lambda: 1 not in _group(api.server, job, gid).arriving)
    assert group.buffer.hash.next == 1 and group.buffer.hash.streaming is None
    for chunk in chunks[1:-1]:
        assert _post(api, job, chunk).status_code == 202
    final = _post(api, job, chunks[-1])
    assert final.status_code == 200, final.text
    assert "avg_loss" in api.result(job, final.json()["request_id"]) and group.executions == 1


def _second_copy(api: Api, job: str, chunk: bytes, out: list[requests.Response]) -> threading.Thread:
    thread = threading.Thread(target=lambda: out.append(_post(Api(api.base_url), job, chunk)), daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("same", [True, False])
def test_a_second_copy_of_a_chunk_waits_for_the_first_to_be_judged(make_api, same: bool) -> None:
    api = make_api()
    job, gid, frame, chunks, first = _half_of_chunk_1(api)
    seen: list[requests.Response] = []
    thread = _second_copy(api, job, chunks[1] if same else _other_bytes(chunks[1]), seen)
    assert not eventually(lambda: bool(seen), timeout_s=0.3), "the copy waits while the first arrives"
    first.sendall(chunks[1][len(chunks[1]) // 2 :])
    assert read_answer(first, 30.0)[0] == 202
    first.close()
    thread.join(30)
    assert seen and seen[0].status_code == (202 if same else 409), seen[0].text if seen else "no answer"
    if not same:
        assert seen[0].json()["code"] == "chunk_group_conflict"
    for chunk in chunks[2:-1]:
        assert _post(api, job, chunk).status_code == 202
    group = _group(api.server, job, gid)
    kept = group.range_size * (len(chunks) - 1)
    assert bytes(group.buffer.view[:kept]) == frame[:kept], "the first copy's bytes are the ones kept"
    final = _post(api, job, chunks[-1])
    assert final.status_code == 200, final.text
    assert "avg_loss" in api.result(job, final.json()["request_id"]) and group.executions == 1


def _other_bytes(chunk: bytes) -> bytes:
    """The same chunk header with other payload bytes."""
    head = wire.read_chunk_head(chunk)
    assert head is not None
    payload = bytes(b ^ 0xFF for b in chunk[head.payload_start :])
    return chunk[: head.payload_start] + payload


def test_a_key_on_a_chunk_names_the_chunk_and_the_group_rules_judge_its_repeats(make_api) -> None:
    """Profile proposed: a request chunk's Idempotency-Key fingerprint is the chunk's header
    (its payload is not hashed again for the key); a repeat with the same header is answered
    by the chunk-group rules (no second run, the original request id for the final chunk,
    409 for other bytes), another chunk under the key is 409 idempotency_conflict."""
    api = make_api()
    job, gid = api.running_job(), str(uuid.uuid4())
    _, chunks = _chunks(batch(2, 9000), gid)

    def keyed(chunk: bytes, key: str) -> requests.Response:
        return api.post(f"/{job}/forward-backward", data=chunk, headers={**OCTET, "Idempotency-Key": key})

    assert keyed(chunks[0], "k0").status_code == 202
    assert keyed(chunks[0], "k0").status_code == 202
    other = keyed(chunks[1], "k0")
    assert other.status_code == 409 and other.json()["code"] == "idempotency_conflict"
    forged = keyed(_other_bytes(chunks[0]), "k0")
    assert forged.status_code == 409 and forged.json()["code"] == "chunk_group_conflict"
    for i, chunk in enumerate(chunks[1:-1], 1):
        assert keyed(chunk, f"k{i}").status_code == 202
    first, again = keyed(chunks[-1], "final"), keyed(chunks[-1], "final")
    assert first.status_code == again.status_code == 200
    assert first.json()["request_id"] == again.json()["request_id"]
    assert again.headers["Idempotency-Key"] == "final"
    api.result(job, first.json()["request_id"])
    assert _group(api.server, job, gid).executions == 1
