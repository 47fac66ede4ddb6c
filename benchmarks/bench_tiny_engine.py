"""What the fake adds on top of the tiny engine's compute: fwd_bwd through the server vs bare torch.

Why: the tiny engine is meant for RL loops in CI, so the server (HTTP, DSSST1 frames,
request chunks, polling) must not dominate the model's own work. Measured side by side in
one run, interleaved round-robin so machine noise hits every variant alike, medians
reported; the printed ratios are the result, never an absolute pass/fail time.

Variants, one ``forward_backward`` of B=8, S=256 (SFT cross-entropy) each:

- ``bare``: ``TinyLM`` forward + cross-entropy + backward in this process;
- ``engine``: ``TinyEngine.forward_backward`` in this process (request parsing, metrics);
- ``server, encode excluded``: the frame is encoded once up front; each call is the REST
  client's chunked upload of those bytes plus polling until the result is decoded;
- ``server, encode included``: the RL client's ``fwd_bwd(payload)`` from tensors, i.e.
  what an integration pays (verl envelope -> DSSST1 -> chunks -> poll -> shaped result).

The server runs in its own process (``python -m fake_gs --engine tiny``), as a user runs
it, with one torch thread like this process. Ratios > 1 are overhead: 1.30 means the
server adds 30 %.

    python benchmarks/bench_tiny_engine.py [--iters 30] [--batch 8] [--seq 256]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
# The GRPO example's fake start: ``fake-gs --engine tiny`` in this process on a free port
# (``serve_in_background``), yielding its base URL.
from grpo_toy import fake_server  # noqa: E402

MODEL = "Qwen/Qwen3-0.6B"


def make_batch(batch: int, seq: int) -> dict[str, Any]:
    ids = torch.randint(0, 256, (batch, seq), generator=torch.Generator().manual_seed(0))
    return {"args": [], "kwargs": {"input_ids": ids, "labels": ids.clone()}}


def bare_variant(payload: dict[str, Any]) -> Callable[[], None]:
    from fake_gs.engines.tiny import TinyEngine
    from fake_gs.engines.tiny.model import TinyLM

    model = TinyLM(seed=TinyEngine(0).initial_seed(MODEL))
    ids = payload["kwargs"]["input_ids"]

    def run() -> None:
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()

    return run


def engine_variant(payload: dict[str, Any]) -> Callable[[], None]:
    from contract.models import SubJobConfig
    from fake_gs.engines.tiny import TinyEngine

    engine = TinyEngine(0)
    cfg = {
        "job_type": "training",
        "model_name": MODEL,
        "training_config": {
            "optimizer": {"lr": 1e-3},
            "max_seq_len": 512,
            "train_batch_size": 8,
            "n_gpus": 1,
        },
    }
    engine.create_job("bench", [SubJobConfig.model_validate(cfg)], 0)

    def run() -> None:
        engine.forward_backward("bench", payload)

    return run


def server_variants(
    base_url: str, payload: dict[str, Any]
) -> tuple[Any, dict[str, Callable[[], None]]]:
    from client import ClientConfig, create_client
    from client.rest import encode_frame

    config = ClientConfig(
        base_url=base_url,
        model=MODEL,
        lr=1e-3,
        max_seq_len=512,
        train_batch_size=8,
        sampling_gpus=0,
        poll_first_s=0.001,
        poll_factor=1.5,
        poll_cap_s=0.02,
        job_start_timeout_s=60,
    )
    client = create_client(config)
    client.start()
    rest = client.transport.rest  # type: ignore[attr-defined]  # the Cortex transport's REST client
    job_id = client.job_id
    frame = encode_frame(payload)

    def excluded() -> None:
        answer = rest.forward_backward(job_id, frame)
        rest.result(job_id, answer, route_name="forward_backward")

    def included() -> None:
        client.fwd_bwd({"batch": payload["kwargs"]})

    return client, {"server, encode excluded": excluded, "server, encode included": included}


def measure(
    variants: dict[str, Callable[[], None]], iters: int, warmup: int
) -> dict[str, list[float]]:
    for run in variants.values():
        for _ in range(warmup):
            run()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(iters):
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="tiny engine: server overhead vs bare torch")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--base-url", help="a running fake-gs --engine tiny (else one is started)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: few iterations")
    args = ap.parse_args(argv)
    if args.quick:
        args.iters, args.warmup = 4, 1
    torch.set_num_threads(1)  # the same budget the server's engine gives itself
    payload = make_batch(args.batch, args.seq)
    with contextlib.ExitStack() as stack:
        base_url = args.base_url or stack.enter_context(fake_server())
        variants = {"bare": bare_variant(payload), "engine": engine_variant(payload)}
        client, remote = server_variants(base_url, payload)
        stack.callback(client.shutdown)
        variants.update(remote)
        times = measure(variants, args.iters, args.warmup)
    base = statistics.median(times["bare"])
    print(f"fwd_bwd B={args.batch} S={args.seq}, {args.iters} interleaved rounds, medians:")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:<26} {med * 1e3:8.1f} ms   ratio {med / base:5.2f}")
    served = statistics.median(times["server, encode included"])
    print(f"server adds {(served - base) * 1e3:.1f} ms per call over bare compute")
    print(f"server / bare (client encode included): {served / base:.2f}  (target <= 1.30)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
