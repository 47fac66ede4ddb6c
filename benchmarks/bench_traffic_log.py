"""What the per-account traffic log (``--traffic N``, the pytest plugin's gate) costs the
fake: poll round trips per second with the log on vs off, side by side, as a ratio.

Two fakes run as subprocesses, identical but for ``--traffic``; rounds alternate between
them so load from elsewhere hits both alike. Target: >= 0.9x (the log is one dict and two
deque appends per exchange, under a lock).

Run: ``python benchmarks/bench_traffic_log.py [--quick]``. Only the ratio means anything.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_fake_server import Proc, fake_poll_path, round_trips  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--traffic", type=int, default=2000, help="exchanges kept per account")
    args = parser.parse_args()
    seconds, rounds = (1.0, 3) if args.quick else (2.0, 7)
    base = [sys.executable, "-m", "fake_gs", "--port", "0", "--log-level", "warning"]
    off = Proc(base)
    on = Proc([*base, "--traffic", str(args.traffic)])
    try:
        paths = fake_poll_path(off.base_url), fake_poll_path(on.base_url)
        pairs = []
        for _ in range(rounds):
            a = round_trips(on.base_url, paths[1], args.threads, seconds)
            b = round_trips(off.base_url, paths[0], args.threads, seconds)
            pairs.append((a, b))
        ratios = sorted(a / b for a, b in pairs)
        print(f"poll round trips/s   traffic log on {statistics.median(a for a, _ in pairs):8.0f}   "
              f"off {statistics.median(b for _, b in pairs):8.0f}   ratio {statistics.median(ratios):.2f}x "
              f"median of {rounds} paired rounds (range {ratios[0]:.2f}-{ratios[-1]:.2f}; target >= 0.9x)")
    finally:
        on.stop()
        off.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
