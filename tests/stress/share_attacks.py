"""The fair-share attacks of the red-team pass, each returning what it measured, shared by
``tests/stress/test_fair_shares.py`` (small sizes) and ``benchmarks/bench_hardening.py``
(the red team's sizes).

1. Reservations: several accounts each send one tiny chunk 0 declaring a huge frame, until
   the server-wide chunk budget is full; another account's chunked upload must still run.
2. Bodies in flight: one account holds the in-flight body budget with bodies it trickles;
   another account's upload must still run, and a refusal whose body has arrived is
   answered at once.
"""

from __future__ import annotations

import mmap
import socket
import time
import uuid
from typing import Any

import requests
from hostile_attacks import OCTET, Measured, _chunk0, create_job
from stress_helpers import PeakSampler, rest_client, service_prefix

from conformance.drivers.rawhttp import read_answer, request_head
from contract import wire

PAT = "PROGRAMMATIC_ACCESS_TOKEN"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-Snowflake-Authorization-Token-Type": PAT}


def _uploads_through_the_kit(base_url: str, token: str, frame_bytes: int, chunk_bytes: int) -> dict[str, Any]:
    """Account ``token``'s chunked forward-backward through the kit's client, to its result."""
    import torch

    client = rest_client(base_url, token=token, max_chunk_bytes=chunk_bytes)
    job = client.create_job({"sub_job_configs": [{
        "job_type": "training", "model_name": "Qwen/Qwen3-0.6B", "seed": 1,
        "training_config": {"optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 65536,
                            "train_batch_size": 8, "n_gpus": 1}}]})["job_id"]
    client.wait_running(job)
    ids = torch.ones(max(1, frame_bytes // (4096 * 8)), 4096, dtype=torch.int64)
    result = client.wait(job, client.forward_backward(job, {"args": [], "kwargs": {"input_ids": ids}})["request_id"])
    client.close()
    return dict(result)


def reservations(fake: Any, *, accounts: list[str], frame_size: int, victim: str,
                 upload_bytes: int = 4 << 20, chunk_bytes: int = 1 << 20) -> Measured:
    """Each of ``accounts`` sends one tiny chunk 0 declaring ``frame_size`` bytes; then
    ``victim``'s chunked upload runs; then the first account sends its chunk 1."""
    out = Measured(rss_before=fake.rss())
    groups: list[tuple[str, str, bytes]] = []
    with PeakSampler(fake.pid) as sampler:
        for token in accounts:
            job = create_job(fake.base_url, auth(token))
            url = service_prefix(fake.base_url) + f"/{job}/forward-backward"
            chunk = _chunk0(frame_size, b"\x01")
            answer = requests.post(url, data=chunk, headers={**auth(token), "Content-Type": OCTET}, timeout=60)
            out.statuses.append(answer.status_code)
            groups.append((token, url, chunk))
        out.extra["sent_bytes"] = sum(len(c) for _, _, c in groups)
        out.extra["result"] = _uploads_through_the_kit(fake.base_url, victim, upload_bytes, chunk_bytes)
    out.rss_peak, out.rss_after = sampler.peak, fake.rss()
    out.extra["next_chunk_codes"] = [_next_chunk_code(token, url, chunk) for token, url, chunk in groups]
    return out


def _next_chunk_code(token: str, url: str, chunk0: bytes) -> str:
    """The answer code to the group's chunk 1 (a reclaimed group must be restarted)."""
    desc = dict(wire.chunk_descriptor(chunk0)[1])  # type: ignore[index]
    desc["chunk_idx"] = 1
    from conformance.judging.frames import RawTensor, build_frame

    chunk1 = build_frame(["d", [["payload", ["t", "payload"]]]], [RawTensor("payload", "U8", (1,), b"\x01")],
                         op={"request_chunk": desc})
    answer = requests.post(url, data=chunk1, headers={**auth(token), "Content-Type": OCTET}, timeout=60)
    return str(answer.json().get("code") or answer.status_code)


def _chunk_head(frame_size: int) -> tuple[bytes, int]:
    """Chunk 0's header of a ``frame_size`` frame cut at the body limit, and its payload size
    (the frame is zero pages of a fresh map: hashing it costs no memory)."""
    zeros = mmap.mmap(-1, frame_size)
    plan = wire.plan_chunks(memoryview(zeros), "request", "forward-backward", 60 << 20, str(uuid.uuid4()), True)
    return bytes(plan.pieces(0)[0]), plan.range_size


def trickled_bodies(fake: Any, admin: Any, *, holder: str, other: str, bodies: int, body_bytes: int,
                    sent_bytes: int, late_bytes: int = 128 * 1024) -> Measured:
    """``holder`` opens ``bodies`` chunk uploads of ``body_bytes`` payload each, sends
    ``sent_bytes`` of each and stalls (the in-flight budget is then all but full); one more
    small body of ``holder``'s, all of it sent, is over the budget; then ``other`` uploads
    through the kit's client."""
    base = fake.base_url
    host, port = base.split("//", 1)[1].rsplit(":", 1)
    job = create_job(base, auth(holder))
    path = service_prefix(base).split(port, 1)[1] + f"/{job}/forward-backward"
    head, payload = _chunk_head(body_bytes)
    out = Measured(rss_before=fake.rss())
    socks = []
    with PeakSampler(fake.pid) as sampler:
        for _ in range(bodies):
            sock = socket.create_connection((host, int(port)))
            sock.sendall(request_head(f"{host}:{port}", path, len(head) + payload, OCTET, auth(holder)) + head)
            sock.sendall(b"\x00" * sent_bytes)
            socks.append(sock)
        _until(lambda: admin.budgets()["inflight"]["held"] >= bodies * sent_bytes)
        out.extra["rss_held"] = fake.rss()
        started = time.monotonic()
        late = requests.post(service_prefix(base) + f"/{job}/generate", data=b"\x00" * late_bytes,
                             headers={**auth(holder), "Content-Type": OCTET}, timeout=60)
        out.extra["late_refusal"] = (late.status_code, late.json().get("code"), time.monotonic() - started)
        out.extra["result"] = _uploads_through_the_kit(base, other, 4 << 20, 1 << 20)
        out.extra["evicted"] = admin.budgets()["inflight"]["evicted"]
    out.statuses = _answers_after_one_more_byte(socks)
    out.rss_peak, out.rss_after = sampler.peak, fake.rss()
    return out


def _until(done: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)


def _answers_after_one_more_byte(socks: list[socket.socket], wait_s: float = 1.0) -> list[int]:
    """Each trickling connection sends one more byte: a body dropped for another account is
    answered (503) at once; the others keep waiting (0 here: not answered within ``wait_s``)."""
    import selectors

    for sock in socks:
        sock.sendall(b"\x00")
    statuses = {id(s): 0 for s in socks}
    with selectors.DefaultSelector() as sel:
        for sock in socks:
            sel.register(sock, selectors.EVENT_READ)
        deadline = time.monotonic() + wait_s
        while sel.get_map() and (left := deadline - time.monotonic()) > 0:
            for key, _ in sel.select(left):
                statuses[id(key.fileobj)] = read_answer(key.fileobj, 5.0)[0]  # type: ignore[arg-type]
                sel.unregister(key.fileobj)
    for sock in socks:
        sock.close()
    return [statuses[id(s)] for s in socks]
