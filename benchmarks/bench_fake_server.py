"""Fake server vs bare Starlette, side by side on loopback, as ratios.

1. Poll round trips per second of the fake's request-status route vs a bare Starlette JSON
   route (same load generator: N threads, each an http.client keep-alive connection).
   Target: >= 0.6x.
2. Ingest throughput of one big forward-backward frame sent as pre-encoded 60 MiB request
   chunks, until the final chunk's answer (the frame reassembled, verified and decoded into
   a submitted request), vs bare POSTs of the same bytes to a route that only reads the
   body. Target: >= 0.5x.
3. The fake's peak RSS during that upload above its idle RSS (sampled with psutil from
   this process; both servers run as subprocesses). Target: <= 2.5x the frame size.

Run: ``python benchmarks/bench_fake_server.py [--quick]``. Absolute numbers depend on the
machine; only the ratios mean anything.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from urllib.parse import urlsplit

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from contract import wire  # noqa: E402
from contract.limits import MAX_BODY_BYTES, MiB  # noqa: E402
from contract.routes import prefix  # noqa: E402

BARE_APP = textwrap.dedent('''
    import socket, sys
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    BODY = {"request_id": "r" * 36, "status": "done", "created_at": "2025-01-01T00:00:00.000Z",
            "updated_at": "2025-01-01T00:00:00.000Z", "result": {"global_steps": 1, "last_lr": 0.0001},
            "error": None, "events": [], "next_cursor": None}

    async def poll(request: Request) -> JSONResponse:
        return JSONResponse(BODY)

    async def sink(request: Request) -> JSONResponse:
        body = await request.body()
        return JSONResponse({"bytes": len(body)})

    app = Starlette(routes=[Route("/poll", poll), Route("/sink", sink, methods=["POST"])])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0)); sock.listen(2048)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=30)
    uvicorn.Server(config).run(sockets=[sock])
''')


class Proc:
    """A server subprocess whose first stdout line names its base URL."""

    def __init__(self, argv: list[str], cwd: str = ROOT, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=cwd,
                                     env={**os.environ, **(env or {})})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        if not match:
            self.stop()
            raise RuntimeError(f"server did not start: {line!r}")
        self.base_url = match.group(0)
        self.ps = psutil.Process(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def connection(base_url: str) -> http.client.HTTPConnection:
    parts = urlsplit(base_url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)


def call(conn: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None,
         ctype: str = "application/json") -> tuple[int, bytes]:
    headers = {"Content-Type": ctype} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    return resp.status, resp.read()


# --- 1. poll round trips ------------------------------------------------------------------


def round_trips(base_url: str, path: str, threads: int, seconds: float) -> float:
    """Round trips per second over ``threads`` keep-alive connections for ``seconds``."""
    counts = [0] * threads
    stop = threading.Event()
    start_gate = threading.Barrier(threads + 1)

    def worker(i: int) -> None:
        conn = connection(base_url)
        call(conn, "GET", path)  # connect and warm up
        start_gate.wait()
        n = 0
        while not stop.is_set():
            status, _ = call(conn, "GET", path)
            assert status == 200, status
            n += 1
        counts[i] = n
        conn.close()

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    start_gate.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def fake_poll_path(fake: str) -> str:
    conn = connection(fake)
    base = prefix("BENCH", "PUBLIC")
    body = {"sub_job_configs": [{"job_type": "training", "model_name": "Qwen/Qwen3-0.6B", "training_config": {
        "optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 128, "train_batch_size": 1, "n_gpus": 1}}]}
    status, data = call(conn, "POST", base + "/", json.dumps(body).encode())
    assert status == 200, data
    job_id = json.loads(data)["job_id"]
    status, data = call(conn, "POST", f"{base}/{job_id}/step", b"{}")
    request_id = json.loads(data)["request_id"]
    path = f"{base}/{job_id}/requests/{request_id}"
    for _ in range(100):
        status, data = call(conn, "GET", path)
        if json.loads(data)["status"] == "done":
            return path
    raise RuntimeError("step never finished")


# --- 2/3. ingest --------------------------------------------------------------------------


def build_chunks(frame_mib: int) -> tuple[list[bytes], int]:
    import torch

    n = frame_mib * MiB // 8
    seq = 1 << 16
    ids = torch.zeros(n // seq, seq, dtype=torch.int64)
    frame = wire.dumps({"args": [], "kwargs": {"input_ids": ids}}, metadata=wire.standard_request_metadata())
    del ids
    chunks = wire.encode_byte_chunks(frame, "request", operation="forward-backward", max_bytes=MAX_BODY_BYTES,
                                     chunk_group_id=str(uuid.uuid4()), force_chunk=True)
    return chunks, len(frame)


class RssSampler:
    def __init__(self, ps: psutil.Process, interval: float = 0.005) -> None:
        self.ps, self.interval, self.peak = ps, interval, ps.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.ps.memory_info().rss)
            time.sleep(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.ps.memory_info().rss)


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def fake_job(fake: str) -> tuple[str, str]:
    conn = connection(fake)
    base = prefix("BENCH", "PUBLIC")
    # max_seq_len covers build_chunks' 65536-token rows (the fake refuses longer frames).
    body = {"sub_job_configs": [{"job_type": "training", "model_name": "Qwen/Qwen3-0.6B", "training_config": {
        "optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 1 << 16, "train_batch_size": 1, "n_gpus": 1}}]}
    _, data = call(conn, "POST", base + "/", json.dumps(body).encode())
    job_id = json.loads(data)["job_id"]
    # Warm up: load torch and the decoder in the server before measuring idle RSS.
    small = wire.encode_byte_chunks(wire.dumps({"args": [], "kwargs": {"input_ids": __import__("torch").ones(1, 4)}}),
                                    "request", max_bytes=MAX_BODY_BYTES, force_chunk=True)
    status, data = call(conn, "POST", f"{base}/{job_id}/forward-backward", small[0], "application/octet-stream")
    assert status == 200, data
    return base, job_id


def upload_fake(fake: str, base: str, job_id: str, chunks: list[bytes]) -> None:
    conn = connection(fake)
    for i, chunk in enumerate(chunks):
        status, data = call(conn, "POST", f"{base}/{job_id}/forward-backward", chunk, "application/octet-stream")
        assert status == (200 if i == len(chunks) - 1 else 202), (status, data[:300])
    assert "request_id" in json.loads(data)
    conn.close()


def upload_bare(bare: str, chunks: list[bytes]) -> None:
    conn = connection(bare)
    for chunk in chunks:
        status, data = call(conn, "POST", "/sink", chunk, "application/octet-stream")
        assert status == 200 and json.loads(data)["bytes"] == len(chunk)
    conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller frame, shorter runs")
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    seconds = 1.0 if args.quick else 2.0
    frame_mib = 128 if args.quick else 512
    rounds = 2 if args.quick else 3
    poll_rounds = 3 if args.quick else 7

    fake = Proc([sys.executable, "-m", "fake_gs", "--port", "0", "--log-level", "warning"])
    bare = Proc([sys.executable, "-c", BARE_APP])
    try:
        print(f"fake: {fake.base_url}  bare: {bare.base_url}  threads: {args.threads}")
        path = fake_poll_path(fake.base_url)
        pairs = []
        for _ in range(poll_rounds):  # interleaved pairs, so load from elsewhere hits both alike
            f = round_trips(fake.base_url, path, args.threads, seconds)
            b = round_trips(bare.base_url, "/poll", args.threads, seconds)
            pairs.append((f, b))
        ratios = sorted(f / b for f, b in pairs)
        f_rps, b_rps = statistics.median(f for f, _ in pairs), statistics.median(b for _, b in pairs)
        print(f"\n1. poll round trips/s   fake {f_rps:8.0f}   bare starlette {b_rps:8.0f}   "
              f"ratio {statistics.median(ratios):.2f}x median of {len(pairs)} paired rounds "
              f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}; target >= 0.6x)")

        chunks, frame_size = build_chunks(frame_mib)
        print(f"\n2. ingest of a {frame_size / MiB:.0f} MiB frame as {len(chunks)} pre-encoded chunks (<= 60 MiB each)")
        base, job_id = fake_job(fake.base_url)
        fake_times, bare_times, growth = [], [], []
        for _ in range(rounds):
            idle = fake.ps.memory_info().rss
            with RssSampler(fake.ps) as sampler:
                fake_times.append(timed(lambda: upload_fake(fake.base_url, base, job_id, chunks)))
            growth.append(sampler.peak - idle)
            bare_times.append(timed(lambda: upload_bare(bare.base_url, chunks)))
            time.sleep(0.5)  # let the fake run the request and free the decoded frame
        total = sum(len(c) for c in chunks) / MiB
        f_tp, b_tp = total / min(fake_times), total / min(bare_times)
        print(f"   throughput MiB/s     fake {f_tp:8.0f}   bare starlette {b_tp:8.0f}   "
              f"ratio {f_tp / b_tp:.2f}x (target >= 0.5x)")
        worst = max(growth)
        print(f"\n3. fake peak RSS above idle during upload: {worst / MiB:.0f} MiB = {worst / frame_size:.2f}x the "
              f"frame (target <= 2.5x); per round: {', '.join(f'{g / frame_size:.2f}x' for g in growth)}")
    finally:
        fake.stop()
        bare.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
