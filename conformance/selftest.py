"""Run the suite several times in one process: each mutant of the fake, and the plain fake.

``python -m conformance.selftest --out DIR --mutants a,b --plain current,proposed`` runs
``gs-conformance`` in-process once per entry (each with its own embedded fake and pytest
session) and writes ``DIR/<name>.json`` with the CLI's exit status and per-clause results.
One process for many runs pays the interpreter, torch and hypothesis start-up once; the
tests in ``tests/conformance`` start a few of these processes side by side under xdist.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

from conformance import cli


def mutant_args(name: str) -> list[str]:
    """The run that can see a mutant: its clauses, its engine, the semantic profile for
    semantic clauses (an empty list when it declares none)."""
    from contract.clauses import CLAUSES
    from fake_gs.controls.mutants import MUTANTS

    mutant = MUTANTS[name]
    if not mutant.clauses:
        return []
    semantic = all(CLAUSES[c].profile == "semantic" for c in mutant.clauses)
    # An allowed form is judged as the server team's command would: the current profile.
    profile = "semantic" if semantic else "current" if mutant.allowed else "proposed"
    engine = ["--engine", mutant.engine] if mutant.engine else []
    return ["--mutant", name, "--clauses", ",".join(mutant.clauses), *engine, "--profile", profile]


def run(name: str, argv: list[str], out: Path) -> dict[str, Any]:
    """One in-process CLI run; its console output is kept in the JSON, not printed."""
    json_path = out / f"{name}.results.json"
    buf = io.StringIO()
    # pytest collects garbage at each session's end; with everything older frozen out of
    # the collector's sight it walks only this run's objects (half a short run's time).
    gc.collect()
    gc.freeze()
    started = time.monotonic()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            code = cli.main([*argv, "--json", str(json_path), "--quiet", "-n", "0"])
        except SystemExit as exc:  # argparse and pytest.exit end runs this way
            code = exc.code if isinstance(exc.code, int) else 2
    record: dict[str, Any] = {
        "name": name,
        "argv": argv,
        "exit": code,
        "seconds": round(time.monotonic() - started, 2),
        "results": json.loads(json_path.read_text()) if json_path.exists() else None,
        "console_tail": buf.getvalue()[-4000:],
    }
    (out / f"{name}.json").write_text(json.dumps(record, indent=1))
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance.selftest")
    p.add_argument("--out", required=True, help="Directory for the JSON records.")
    p.add_argument("--mutants", default="", help="Comma-separated mutant names.")
    p.add_argument("--plain", default="", help="Comma-separated profiles to run on the plain fake.")
    p.add_argument("--plain-args", default="", help="Extra CLI arguments for the plain runs.")
    p.add_argument("--examples", type=int, default=3)
    ns = p.parse_args(argv)
    # Runs allocate many long-lived objects (frames, strategies, pytest nodes): collecting
    # the youngest generation less often saves about a seventh of a run's CPU.
    gc.set_threshold(50_000, 10, 10)
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    common = ["--examples", str(ns.examples), "--no-shrink"]
    for profile in filter(None, ns.plain.split(",")):
        extra = ns.plain_args.split()
        tag = "-".join(a.lstrip("-") for a in extra if not a.startswith("-") or True)[:40]
        run(
            f"plain-{profile}{('-' + tag) if tag else ''}",
            [*common, "--require-all", "--profile", profile, *extra],
            out,
        )
    for name in filter(None, ns.mutants.split(",")):
        args = mutant_args(name)
        if args:
            run(f"mutant-{name}", [*common, *args], out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
