"""The red-team pass's attacks (work on the fake bounded by a limit), each returning what
it measured: the stress tests run them small, ``benchmarks/bench_hardening.py`` at the
issue's sizes. The fake runs as a subprocess; ``/_fake/health`` is timed meanwhile.
"""

from __future__ import annotations

import threading
from typing import Any

import requests
from deadline_attacks import PROBE_TIMEOUT_S, health_prober
from hostile_attacks import Measured, create_job
from stress_helpers import PeakSampler, service_prefix

from contract import wire

JSON = {"Content-Type": "application/json"}
OCTET = {"Content-Type": "application/octet-stream"}


def _answer(r: requests.Response) -> tuple[int, str, str]:
    try:
        body = r.json()
    except ValueError:
        return r.status_code, "", r.text[:200]
    return r.status_code, str(body.get("code", "")), str(body.get("message", ""))[:200]


def _attack(fake: Any, send: Any, settle_s: float = 0.5) -> Measured:
    """Run ``send() -> Response`` with RSS sampled and health timed, then let it settle."""
    out = Measured(rss_before=fake.rss())
    with PeakSampler(fake.pid, every_s=0.02) as sampler:
        prober = health_prober(fake.base_url, every_s=0.05)
        prober.start()
        status, code, message = _answer(send())
        threading.Event().wait(settle_s)
        out.latencies = prober.stop()
        out.extra["probe_failures"] = prober.failures
    out.statuses = [status]
    out.extra.update(code=code, message=message)
    out.rss_peak, out.rss_after = sampler.peak, fake.rss()
    return out


def float_array_on_step(fake: Any, mib: int, text: bytes = b"0.123456789,") -> Measured:
    """A JSON body on /step that is one float array of ``mib`` MiB (one container: within
    every limit but the value bound)."""
    job = create_job(fake.base_url)
    count = mib * 1024 * 1024 // len(text)
    body = b'{"learning_rate": 0.1, "x": [' + text * count + b"0.5]}"
    url = service_prefix(fake.base_url) + f"/{job}/step"
    out = _attack(fake, lambda: requests.post(url, data=body, headers=JSON, timeout=PROBE_TIMEOUT_S * 4))
    out.extra["bytes_sent"] = len(body)
    return out


def tiny_batch(fake: Any, rows: int, cols: int) -> Measured:
    """One forward-backward frame of ``rows x cols`` int64 ids on a job with
    train_batch_size 8, against a fake running the tiny engine."""
    import torch

    job = create_job(fake.base_url)
    frame = wire.dumps({"args": [], "kwargs": {"input_ids": torch.ones(rows, cols, dtype=torch.int64) * 3}})
    chunk = wire.encode_byte_chunks(frame, "request", operation="forward_backward", force_chunk=True)
    url = service_prefix(fake.base_url) + f"/{job}/forward-backward"
    out = _attack(fake, lambda: [requests.post(url, data=c, headers=OCTET, timeout=120) for c in chunk][-1])
    out.extra["bytes_sent"] = len(frame)
    return out
