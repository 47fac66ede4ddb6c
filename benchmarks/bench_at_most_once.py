"""At most once, measured: calls vs executions through a loopback fault proxy.

For each scenario a fresh fake (profile ``proposed`` or ``current``) serves one job; the
kit's client makes ``--calls`` calls of each route through a :class:`FaultProxy` that
faults ``--rate`` of the data-plane POSTs; the fake's counters say how often each call
ran. Prints, per scenario and route: calls, successes, AmbiguousOutcome, executions and
duplicates (a call that ran more than once). The docs' "Retries and at-most-once"
table comes from ``python benchmarks/bench_at_most_once.py --calls 40 --json
docs/img/at_most_once.json``: ``--json`` writes every scenario's figures, with the date and
the load average, to the file tests/docs/test_figures.py holds the table to.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance.drivers.faultproxy import FAULTS, FaultProxy  # noqa: E402
from conformance.judging.at_most_once import (  # noqa: E402
    CURRENT_ROUTES,
    PROPOSED_ROUTES,
    measure,
    open_job,
)
from fake_gs import FakeSettings, serve_in_background  # noqa: E402

#: name -> (fake profile, proxy fault kinds, client config)
SCENARIOS: dict[str, tuple[str, tuple[str, ...], dict[str, Any]]] = {
    "proposed, keys, answers lost": ("proposed", ("drop_after",), {"supports_idempotency_keys": True}),
    "proposed, keys, all faults": ("proposed", FAULTS, {"supports_idempotency_keys": True}),
    "current, default client, answers lost": ("current", ("drop_after",), {}),
    "current, default client, all faults": ("current", FAULTS, {}),
    "current, retry_ambiguous, answers lost": ("current", ("drop_after",), {"retry_ambiguous": True}),
    "current, retry_ambiguous, all faults": ("current", FAULTS, {"retry_ambiguous": True}),
}
COLUMNS = ("calls", "succeeded", "ambiguous", "other_errors", "executions", "duplicates",
           "unflagged")


def run(name: str, calls: int, rate: float, seed: int) -> dict[str, Any]:
    """One scenario: its table printed, and its figures (per route, the tally's) returned."""
    profile, faults, config = SCENARIOS[name]
    routes = PROPOSED_ROUTES if profile == "proposed" else CURRENT_ROUTES
    with serve_in_background(FakeSettings(profile=profile, poll_wait_s=0.02, log_level="warning")) as url:  # type: ignore[arg-type]
        job = open_job(url)
        started = time.monotonic()
        with FaultProxy(url, rate=rate, faults=faults, seed=seed, delay_s=1.0,  # type: ignore[arg-type]
                        match=lambda method, path: method == "POST") as proxy:
            out = measure(url, job, proxy, routes, calls, read_timeout_s=0.5, **config)
            stats = proxy.stats()
    faulted = {k: v for k, v in stats.items() if k in FAULTS}
    print(f"\n## {name}  ({time.monotonic() - started:.1f}s, proxy faults {faulted})")
    print("| route | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    routes_seen = {route: tally.public() for route, tally in out.items()}
    for route, figures in routes_seen.items():
        print(f"| {route} | " + " | ".join(str(figures[c]) for c in COLUMNS) + " |")
    return {"seconds": time.monotonic() - started, "faulted": faulted, "routes": routes_seen}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=40, help="calls per route (default 40)")
    p.add_argument("--rate", type=float, default=0.2, help="share of POSTs faulted (default 0.2)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--quick", action="store_true", help="5 calls per route (a smoke run)")
    p.add_argument("--only", default="", help="comma-separated scenario names (default all)")
    p.add_argument("--json", metavar="PATH", help="also write every scenario's figures, the date and the load "
                                                  "average to PATH")
    ns = p.parse_args(argv)
    calls = 5 if ns.quick else ns.calls
    load_before = os.getloadavg()[0]
    scenarios = {name: run(name, calls, ns.rate, ns.seed) for name in SCENARIOS
                 if not ns.only or name in ns.only.split(",")}
    if ns.json:
        measured = {"date": datetime.date.today().isoformat(), "cpus": os.cpu_count(),
                    "load_average_1min_before": load_before, "load_average_1min_after": os.getloadavg()[0]}
        document = {"command": " ".join(["python benchmarks/bench_at_most_once.py", *(argv or sys.argv[1:])]),
                    "calls": calls, "rate": ns.rate, "seed": ns.seed, "measured": measured, "scenarios": scenarios}
        Path(ns.json).write_text(json.dumps(document, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
