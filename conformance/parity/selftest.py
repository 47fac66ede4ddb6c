"""Parity self-test: replay the corpus against each mutant of the fake and print the kill
score (``python -m conformance.parity.selftest``).

A mutant is killed when some exchange of some tape diverges; the first divergence (the
exchange and the field) is printed as the evidence. Each replay stops at its first
divergence, so killed mutants cost little; survivors replay every tape in full. A mutant
that lives in another engine than a tape's servers does not run against that tape.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from conformance.parity.accepted_rules import accepter, load_rules
from conformance.parity.replay import Replayer
from conformance.parity.targets import EmbeddedTargets
from contract.tape import read_tape

CORPUS = Path(__file__).resolve().parents[2] / "parity"


@dataclass
class Kill:
    mutant: str
    killed: bool
    evidence: str
    seconds: float


def corpus_tapes(directory: Path = CORPUS) -> list[Path]:
    return sorted(directory.glob("*.gsrec.gz")) + sorted(directory.glob("*.gsrec"))


def _engines(lines: list[dict]) -> set[str]:
    return {str((x.get("settings") or {}).get("engine", "shape")) for x in lines if x["kind"] == "server"}


def hunt(mutant: str, tapes: list[Path], rules_path: str | None, floats: str = "sign") -> Kill:
    """Replay tapes against the fake with ``mutant`` until one diverges."""
    from fake_gs.controls.mutants import MUTANTS

    started = time.monotonic()
    wanted_engine = MUTANTS[mutant].engine
    accept = accepter(load_rules(rules_path))
    for tape in tapes:
        lines = read_tape(str(tape))
        if wanted_engine is not None and wanted_engine not in _engines(lines):
            continue
        targets = EmbeddedTargets({"mutant": mutant})
        try:
            rep = Replayer(targets, poll_timeout_s=10.0, timeout_s=60.0, accept=accept,
                           stop_at_divergence=True, floats=floats).run(str(tape), lines)
        finally:
            targets.close()
        if rep.divergent:
            r = rep.divergent[0]
            d = next(d for d in r.divergences if d.accepted is None)
            evidence = f"{tape.name} #{r.seq} {r.method} {r.route} [{r.group}]: {d.describe()}"
            return Kill(mutant, True, evidence, time.monotonic() - started)
    return Kill(mutant, False, "no tape diverges", time.monotonic() - started)


def main(argv: list[str] | None = None) -> int:
    from fake_gs.controls.mutants import MUTANTS

    p = argparse.ArgumentParser(prog="python -m conformance.parity.selftest", description=__doc__)
    p.add_argument("tapes", nargs="*", help="Tapes (default: every tape in parity/).")
    p.add_argument("--mutants", default="", help="Comma-separated mutants (default: all).")
    p.add_argument("--rules", default=str(CORPUS / "accepted.yaml"))
    p.add_argument("--floats", choices=("sign", "close"), default="sign",
                   help="close: also compare float values (same fake, same seed): the semantic "
                   "mutants of the tiny engine change only numbers")
    ns = p.parse_args(argv)
    tapes = [Path(t) for t in ns.tapes] or corpus_tapes()
    names = [m for m in ns.mutants.split(",") if m] or sorted(MUTANTS)
    kills = []
    for name in names:
        kill = hunt(name, tapes, ns.rules, ns.floats)
        kills.append(kill)
        mark = "KILLED " if kill.killed else "SURVIVED"
        print(f"{mark} {name:<30} {kill.seconds:5.1f}s  {kill.evidence}", flush=True)
    killed = sum(k.killed for k in kills)
    print(f"kill score: {killed}/{len(kills)} mutants killed by replaying {len(tapes)} tapes "
          f"(floats compared by {ns.floats})")
    return 0 if killed == len(kills) else 1


if __name__ == "__main__":
    sys.exit(main())
