"""A call late in a long job against one early in it: the fake's per-call cost must not grow
with the calls before it.

A job keeps every finished chunk group (a replayed final chunk resolves to its original
execution), so anything a new group walks over all of them makes call 4,000 slower than call
1. One client process per tree (this one, and with ``--baseline TREE`` another checkout's
fake and client), each against its own fresh fake: create a job, ``--calls`` small
forward-backward calls waited to their result. Printed: the median milliseconds of the
first and of the last ``--window`` calls, and their ratio (target: about 1.0, no growth).

Run: ``python benchmarks/bench_long_job.py [--quick] [--calls 4000] [--baseline /tmp/main-tree]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def worker(url: str, calls: int, window: int) -> dict[str, float]:
    """In the tree's own process: the per-call times of one long job."""
    import torch
    from bench_upload import JOB, kit_client

    payload = {"args": [], "kwargs": {"input_ids": torch.ones(8, 1024, dtype=torch.int64)}}
    client = kit_client(url)
    job = client.create_job(JOB)["job_id"]
    client.wait_running(job)
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        client.wait(job, client.forward_backward(job, payload)["request_id"])
        seconds.append(time.perf_counter() - started)
    return {"first_ms": statistics.median(seconds[:window]) * 1000,
            "last_ms": statistics.median(seconds[-window:]) * 1000}


def measure(tree: str, args: argparse.Namespace) -> dict[str, float]:
    from bench_fake_server import Proc

    fake = Proc([sys.executable, "-m", "fake_gs", "--port", "0", "--log-level", "warning"], cwd=tree,
                env={"PYTHONPATH": tree})
    try:
        argv = [sys.executable, os.path.abspath(__file__), "--worker", fake.base_url, "--calls", str(args.calls),
                "--window", str(args.window)]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tree, timeout=3600,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join([tree, HERE])})
        if done.returncode:
            raise RuntimeError(done.stderr[-3000:])
        result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        return result
    finally:
        fake.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=4000, help="forward-backward calls in the one job")
    p.add_argument("--window", type=int, default=300, help="calls at each end whose median is printed")
    p.add_argument("--baseline", metavar="TREE", help="another checkout measured beside")
    p.add_argument("--quick", action="store_true", help="600 calls, windows of 100 (a smoke run)")
    p.add_argument("--worker", metavar="URL", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.calls, args.window = 600, 100
    if args.worker:
        print(json.dumps(worker(args.worker, args.calls, args.window)))
        return 0
    sys.path[:0] = [ROOT, HERE]
    trees = {"this tree": ROOT} | ({"baseline tree": os.path.abspath(args.baseline)} if args.baseline else {})
    print(f"one job, {args.calls} forward-backward calls of 64 KiB: median ms of the first and the last "
          f"{args.window} calls")
    for label, tree in trees.items():
        r = measure(tree, args)
        print(f"  {label:14} first {r['first_ms']:6.2f}  last {r['last_ms']:6.2f}  last/first "
              f"{r['last_ms'] / r['first_ms']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
