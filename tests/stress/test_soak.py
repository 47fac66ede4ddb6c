"""Soak: 32 concurrent clients, each its own job, mixed ops against one fake subprocess.

Every client runs chunked forward-backward uploads (with a logprobs post-processor so the
result is a frame), forward-no-grad, generate, step, save/list checkpoints and job reads,
with results delivered as result chunks over cursor pages (two events a page). Checked:

* every result is right for its own job (job ids, shapes of that client's batch, one
  generate result per prompt, global_steps going up by exactly one per step);
* no request is lost or duplicated (request ids unique; the fake's per-op request counts
  and per-job forward-backward executions equal what the clients submitted);
* no cross-job or cross-token leakage (another token's job and request are 404; clients
  sharing a token see each other's jobs, never their requests under their own job);
* the fake's RSS (a subprocess, measured with psutil) is back within 10% of where it
  started (after a warm-up job) once the jobs are cancelled.

``--soak-size small`` (CI, default) runs a few hundred ops in well under a minute;
``--soak-size large`` (or SOAK_SIZE=large) thousands. The numbers are printed (use -s).
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
import torch
from stress_helpers import MODEL, Admin, PeakSampler, fake_process, rest_client, service_prefix

from client.errors import CortexHTTPError
from client.rest import CortexRestClient

CLIENTS = 32
TOKENS = [f"soak-token-{i}" for i in range(4)]
ADMIN_TOKEN = "soak-admin"
OPS_PER_CLIENT = {"small": 14, "large": 160}
CHUNK_BYTES = 8192 + 8192
RSS_SLACK = 0.10
WEIGHTS = {"fwd_bwd": 4, "fwd_no_grad": 2, "generate": 2, "step": 2, "save": 1, "get_job": 1, "peek": 1}


def job_body(seed: int) -> dict[str, Any]:
    return {"sub_job_configs": [
        {"job_type": "training", "model_name": MODEL, "seed": seed,
         "training_config": {"optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 4096,
                             "train_batch_size": 8, "n_gpus": 1}},
        {"job_type": "sampling", "model_name": MODEL, "seed": seed,
         "inference_config": {"max_seq_len": 4096, "n_gpus": 1}},
    ]}


@dataclass
class Client:
    index: int
    token: str
    rest: CortexRestClient
    job_id: str = ""
    ops: Counter[str] = field(default_factory=Counter)
    submitted: Counter[str] = field(default_factory=Counter)
    request_ids: list[str] = field(default_factory=list)
    steps: int = 0
    checkpoints: list[str] = field(default_factory=list)

    @property
    def shape(self) -> tuple[int, int]:
        return 1 + self.index % 4, 256 + 16 * (self.index % CLIENTS)


def _batch(c: Client, post: bool) -> dict[str, Any]:
    b, s = c.shape
    ids = (torch.arange(b * s, dtype=torch.int64).reshape(b, s) + c.index) % 1000
    body: dict[str, Any] = {"args": [], "kwargs": {"input_ids": ids, "labels": ids}}
    if post:
        body["processing"] = {"post": ["logprobs"]}
    return body


def _wait(c: Client, answer: dict[str, Any], route: str) -> Any:
    rid = str(answer["request_id"])
    assert answer.get("job_id") == c.job_id, f"submit answered another job: {answer}"
    c.request_ids.append(rid)
    return c.rest.wait(c.job_id, rid, route_name=route)


def run_op(c: Client, op: str, others: list[Client], base_url: str) -> None:
    rest, job = c.rest, c.job_id
    if op == "fwd_bwd":
        out = _wait(c, rest.forward_backward(job, _batch(c, post=True), max_chunk_bytes=CHUNK_BYTES),
                    "forward_backward")
        c.submitted["forward_backward"] += 1
        assert out["job_id"] == job and math.isfinite(out["avg_loss"])
        assert tuple(out["post_process_outputs"]["logprobs"].shape) == c.shape
    elif op == "fwd_no_grad":
        out = _wait(c, rest.forward_no_grad(job, _batch(c, post=False), max_chunk_bytes=CHUNK_BYTES),
                    "forward_no_grad")
        c.submitted["forward_no_grad"] += 1
        assert tuple(out["model_outputs"]["logprobs"].shape) == c.shape
    elif op == "generate":
        prompts = [f"client {c.index} prompt {k}" for k in range(1 + c.ops[op] % 3)]
        out = _wait(c, rest.generate(job, {"prompts": prompts, "sampling_params": {"max_tokens": 4}}),
                    "generate")
        c.submitted["generate"] += 1
        assert out["job_id"] == job and len(out["results"]) == len(prompts)
    elif op == "step":
        out = _wait(c, rest.step(job, learning_rate=1e-4), "step")
        c.submitted["step"] += 1
        c.steps += 1
        assert out["global_steps"] == c.steps, f"client {c.index}: {out} after {c.steps} steps"
    elif op == "save":
        cid = f"c{c.index}-{c.ops[op]}"
        out = _wait(c, rest.save(job, checkpoint_id=cid), "save")
        c.submitted["save"] += 1
        c.checkpoints.append(cid)
        assert out["checkpoint_id"] == cid and out["global_steps"] == c.steps
        listed = {x["checkpoint_id"] for x in rest.list_checkpoints(job)["checkpoints"]}
        assert listed == set(c.checkpoints), f"client {c.index} sees {listed}"
    elif op == "get_job":
        got = rest.get_job(job)
        assert got["job_id"] == job and got["status"] == "running"
    elif op == "peek":
        other = others[(c.index + 1 + c.ops[op]) % len(others)]
        if other is c or not other.job_id:
            return
        r = requests.get(f"{service_prefix(base_url)}/{other.job_id}", timeout=30,
                         headers=rest.http.session.headers)
        want = 200 if other.token == c.token else 404
        assert r.status_code == want, f"{c.token} read {other.token}'s job: {r.status_code}"
        if other.request_ids:  # another job's request id under my job: never found
            try:
                rest.get_request(job, other.request_ids[-1])
                raise AssertionError("a request of another job was visible under mine")
            except CortexHTTPError as exc:
                assert exc.status == 404 and exc.code == "request_not_found", exc
    c.ops[op] += 1


def drive(c: Client, n_ops: int, others: list[Client], base_url: str, start: threading.Barrier) -> None:
    c.job_id = str(c.rest.create_job(job_body(seed=c.index))["job_id"])
    c.rest.wait_running(c.job_id)
    start.wait(60)
    rng = random.Random(c.index)
    names, weights = zip(*WEIGHTS.items(), strict=True)
    for _ in range(n_ops):
        run_op(c, rng.choices(names, weights)[0], others, base_url)


def warm_up(base_url: str) -> None:
    """Every op once on one job, then the full concurrency briefly, so imports, caches and
    the fake's thread pools (each thread has its stack and malloc arena) are at their steady
    size before the starting RSS is read: growth after that would be a leak."""
    c = Client(999, TOKENS[0], rest_client(base_url, token=TOKENS[0], max_events=2))
    c.job_id = str(c.rest.create_job(job_body(seed=999))["job_id"])
    c.rest.wait_running(c.job_id)
    for op in WEIGHTS:
        run_op(c, op, [c], base_url)
    c.rest.cancel_job(c.job_id)
    c.rest.close()
    crowd = [Client(1000 + i, TOKENS[i % len(TOKENS)], rest_client(base_url, token=TOKENS[i % len(TOKENS)],
                                                                     max_events=2)) for i in range(CLIENTS)]
    start = threading.Barrier(CLIENTS)
    with ThreadPoolExecutor(CLIENTS) as pool:
        for f in [pool.submit(drive, w, 3, crowd, base_url, start) for w in crowd]:
            f.result()
    for w in crowd:
        w.rest.cancel_job(w.job_id)
        w.rest.close()


def settle_rss(proc: Any, admin: Admin, rounds: int = 6) -> int:
    """RSS once the fake is idle: the lowest of a few reads, each after a state dump."""
    lows = []
    for _ in range(rounds):
        admin.settle()
        lows.append(proc.rss())
        time.sleep(0.05)
    return min(lows)


@pytest.mark.long  # a soak: minutes by nature
@pytest.mark.heavy
def test_soak(soak_size: str) -> None:
    n_ops = OPS_PER_CLIENT[soak_size]
    args = [a for t in TOKENS for a in ("--token", t)] + ["--admin-token", ADMIN_TOKEN]
    args += ["--result-delivery", "chunks", "--result-chunk-bytes", str(8192 + 4096),
             "--max-total-gpus", str(4 * CLIENTS + 8), "--seed", "5"]
    with fake_process(*args) as proc:
        admin = Admin(proc.base_url, ADMIN_TOKEN)
        warm_up(proc.base_url)
        before = admin.settle()
        rss_start = settle_rss(proc, admin)
        clients = [Client(i, TOKENS[i % len(TOKENS)],
                          rest_client(proc.base_url, token=TOKENS[i % len(TOKENS)], max_events=2))
                   for i in range(CLIENTS)]
        start = threading.Barrier(CLIENTS + 1)
        with PeakSampler(proc.pid, every_s=0.02) as peak, ThreadPoolExecutor(CLIENTS) as pool:
            futures = [pool.submit(drive, c, n_ops, clients, proc.base_url, start) for c in clients]
            start.wait(120)
            started = time.monotonic()
            for f in futures:
                f.result()
            elapsed = time.monotonic() - started
        after = admin.settle()
        # No request lost or duplicated: ids unique, the fake counted exactly what was sent.
        ids = [rid for c in clients for rid in c.request_ids]
        assert len(ids) == len(set(ids)), "a request id was handed out twice"
        sent: Counter[str] = Counter()
        for c in clients:
            sent.update(c.submitted)
            job = after["jobs"][c.job_id]
            assert job["forward_backward_executions"] == c.submitted["forward_backward"], (c.index, job)
            assert job["global_steps"] == c.steps and job["checkpoints"] == c.checkpoints
            assert job["owner"] == f"token#{TOKENS.index(c.token)}"
        by_op = Counter(after["requests"]["by_op"])
        by_op.subtract(before["requests"]["by_op"])
        assert +by_op == +sent, f"fake counted {dict(by_op)}, clients sent {dict(sent)}"
        assert after["internal_errors"] == 0 and after["requests"]["in_flight"] == 0
        # Cancel every job: the fake must hand its memory back.
        for c in clients:
            c.rest.cancel_job(c.job_id)
            c.rest.close()
        final = admin.settle()
        assert final["buffered_bytes"] == 0 and final["open_chunk_groups"] == 0
        rss_end = settle_rss(proc, admin)
    total_ops = sum(sum(c.ops.values()) for c in clients)
    mib = 1024 * 1024
    print(f"\nsoak[{soak_size}]: {CLIENTS} clients, {total_ops} ops ({dict(sum((c.ops for c in clients), Counter()))}), "
          f"{len(ids)} async requests, {after['http_requests'] - before['http_requests']} HTTP requests "
          f"in {elapsed:.1f} s = {total_ops / elapsed:.0f} ops/s; fake RSS start {rss_start / mib:.0f} MiB, "
          f"peak {peak.peak / mib:.0f} MiB, end {rss_end / mib:.0f} MiB ({100 * (rss_end / rss_start - 1):+.1f}%)")
    assert rss_end <= rss_start * (1 + RSS_SLACK), (rss_start, rss_end)

