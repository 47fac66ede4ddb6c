"""Attacks of the hardening issue (12), each returning what it measured, shared by the
stress tests (small sizes, bounds asserted with margin) and ``benchmarks/bench_hardening.py``
(the full sizes of the issue's "Done when" list, figures printed).

Every attack runs against a fake in a subprocess (``stress_helpers.fake_process``) so the
fake's RSS is its own; a sampler thread records the peak while a healthy request is timed.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import requests
from stress_helpers import PeakSampler, job_body, service_prefix

from conformance.drivers.rawhttp import read_answer, request_head
from conformance.judging.frames import RawTensor, build_frame
from contract import wire

MiB = 1024 * 1024
OCTET = "application/octet-stream"


@dataclass
class Measured:
    """What one attack left behind: RSS before, peak during, and healthy-call latencies."""

    rss_before: int = 0
    rss_peak: int = 0
    rss_after: int = 0
    latencies: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def growth_mib(self) -> float:
        return (self.rss_peak - self.rss_before) / MiB

    @property
    def worst_latency_s(self) -> float:
        return max(self.latencies, default=0.0)


def create_job(base_url: str, headers: dict[str, str] | None = None) -> str:
    r = requests.post(service_prefix(base_url) + "/", json=job_body(seed=1), headers=headers or {}, timeout=30)
    assert r.status_code == 200, r.text
    return str(r.json()["job_id"])


class Prober(threading.Thread):
    """Times a healthy call every ``every_s`` until stopped."""

    def __init__(self, call: Any, every_s: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.call, self.every_s = call, every_s
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            start = time.monotonic()
            try:
                self.call()
            except Exception as exc:  # recorded: a failed healthy call fails the attack's check
                self.failures.append(repr(exc))
            self.latencies.append(time.monotonic() - start)
            self.stop_event.wait(self.every_s)

    def stop(self) -> list[float]:
        self.stop_event.set()
        self.join(60)
        return self.latencies


def slow_bodies(fake: Any, *, connections: int = 40, declared: int = 60 * MiB, hold_s: float = 10.0,
                answer_within_s: float = 30.0) -> Measured:
    """``connections`` forward-backward calls that declare ``declared`` bytes and send one."""
    base = fake.base_url
    job = create_job(base)
    host, port = base.split("//", 1)[1].rsplit(":", 1)
    path = service_prefix(base).split(port, 1)[1] + f"/{job}/forward-backward"
    out = Measured(rss_before=fake.rss())
    socks = []
    with PeakSampler(fake.pid) as sampler:
        prober = Prober(lambda: requests.get(base + "/_fake/health", timeout=30).raise_for_status())
        prober.start()
        for _ in range(connections):
            s = socket.create_connection((host, int(port)))
            s.sendall(request_head(f"{host}:{port}", path, declared, OCTET) + b"\x00")
            socks.append(s)
        time.sleep(hold_s)
        out.latencies = prober.stop()
        out.extra["probe_failures"] = prober.failures
        out.statuses = [read_answer(s, answer_within_s)[0] for s in socks]
    for s in socks:
        s.close()
    out.rss_peak, out.rss_after = sampler.peak, fake.rss()
    return out


def _chunk0(frame_size: int, payload: bytes) -> bytes:
    """A request chunk 0 of a group that declares ``frame_size`` bytes cut in ranges of
    ``len(payload)`` bytes (so the descriptor's sizes add up)."""
    import uuid

    desc = {"chunk_idx": 0, "total_chunks": -(-frame_size // len(payload)), "frame_sha256": "0" * 64, "frame_size_bytes": frame_size,
            "operation": "forward_backward", "chunk_group_id": str(uuid.uuid4())}
    frame = build_frame(["d", [["payload", ["t", "payload"]]]],
                        [RawTensor("payload", "U8", (len(payload),), payload)],
                        op={"request_chunk": desc})
    return frame


def chunk0_amplification(fake: Any, *, requests_n: int = 50, frame_size: int = 40 * MiB) -> Measured:
    """``requests_n`` chunk-0 requests with a 1-byte payload that each declare a
    ``frame_size``-byte frame, while a healthy poll of another request is timed."""
    base = fake.base_url
    job = create_job(base)
    url = service_prefix(base) + f"/{job}/forward-backward"
    step = requests.post(service_prefix(base) + f"/{job}/step", json={}, timeout=30).json()["request_id"]
    poll = service_prefix(base) + f"/{job}/requests/{step}"
    out = Measured(rss_before=fake.rss())
    with PeakSampler(fake.pid) as sampler:
        prober = Prober(lambda: requests.get(poll, timeout=30).raise_for_status(), every_s=0.02)
        prober.start()
        for _ in range(requests_n):
            body = _chunk0(frame_size, b"\x01")
            r = requests.post(url, data=body, headers={"Content-Type": OCTET}, timeout=60)
            out.statuses.append(r.status_code)
        time.sleep(0.5)
        out.latencies = prober.stop()
        out.extra["probe_failures"] = prober.failures
    out.rss_peak, out.rss_after = sampler.peak, fake.rss()
    out.extra["bytes_sent"] = requests_n * len(_chunk0(frame_size, b"\x01"))
    return out


def frame_bytes(rows: int, cols: int) -> bytes:
    """A forward-no-grad frame of ``rows x cols`` input ids (the fake answers [rows, cols]
    float32 log-probs: ``rows * cols * 4`` result bytes)."""
    import torch

    return wire.dumps({"args": [], "kwargs": {"input_ids": torch.ones(rows, cols, dtype=torch.int64)}})


def results_loop(fake: Any, *, calls: int = 2000, rows: int = 64, cols: int = 4096,
                 sample_every: int = 10) -> Measured:
    """``calls`` forward-no-grad calls through the kit's client, each result ([rows, cols]
    float32 log-probs: 1 MiB by default) read to the end, on one running job. RSS is sampled
    while the job runs; ``rss_before`` is taken after one warm-up call (torch loaded)."""
    from stress_helpers import rest_client

    client = rest_client(fake.base_url, max_events=512)
    job = client.create_job(job_body(seed=5))["job_id"]
    frame = frame_bytes(rows, cols)
    client.wait(job, client.forward_no_grad(job, frame)["request_id"])
    out = Measured(rss_before=fake.rss())
    out.extra["rss_cold"] = out.rss_before
    started = time.monotonic()
    samples: list[int] = []
    with PeakSampler(fake.pid, every_s=0.05) as sampler:
        for i in range(calls):
            result = client.wait(job, client.forward_no_grad(job, frame)["request_id"])
            if i == 0:
                out.extra["result_shape"] = tuple(result["model_outputs"]["logprobs"].shape)
            del result
            if i % sample_every == 0:
                samples.append(fake.rss() - out.rss_before)
    out.extra["seconds"] = time.monotonic() - started
    out.extra["growth_samples_mib"] = [round(x / MiB, 1) for x in samples]
    out.rss_peak, out.rss_after = sampler.peak, fake.rss()
    out.extra["job_status"] = client.get_job(job)["status"]
    client.close()
    return out
