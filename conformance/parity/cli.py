"""``gs-parity TAPE... [--url URL]``: replay recorded runs and show every difference.

Without ``--url`` each recorded server is replayed against an embedded fake started from
its recorded settings (``--mutant``/``--engine``/... laid over them). Exit status 0 only
when no exchange diverges (accepted differences do not count), 1 when one does, 2 for a
bad tape or rule file, 3 when nothing answers at the URL.
"""

from __future__ import annotations

import argparse
import os
import sys

from conformance.options import OPTION, add_fake_arguments, with_env
from conformance.parity import matrix
from conformance.parity import report as reports
from conformance.parity.accepted_rules import Rule, RuleError, accepter, load_rules
from conformance.parity.replay import Replay, Replayer
from conformance.parity.targets import EmbeddedTargets, UrlTargets
from conformance.reporting.formats.text import safe
from contract.redact import scrub_text

EXIT_OK, EXIT_DIVERGED, EXIT_ERROR, EXIT_NO_SERVER = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gs-parity",
        description="Replay parity tapes (gs-conformance --record, fake-gs --record) against a "
        "target and report every answer that differs from the recording.",
    )
    p.add_argument("tapes", nargs="+", metavar="TAPE", help="Tape files (.gsrec, or .gsrec.gz).")
    t = p.add_argument_group("target")
    t.add_argument("--url", help="Service base URL (absent: embedded fakes, from the recorded settings).")
    t.add_argument("--token", help=f"Token for what the tape calls token 1 (default: ${OPTION['token'].env}).")
    t.add_argument("--token2", help=f"Token for token 2 (default: ${OPTION['token2'].env}).")
    t.add_argument("--database", help="Replay under this database (default: as recorded).")
    t.add_argument("--schema", default=None, help="Replay under this schema (default: as recorded).")
    t.add_argument("--endpoint", default=None, help="Service endpoint name (default: as recorded).")
    f = p.add_argument_group("embedded fake (laid over each recorded server's settings)")
    add_fake_arguments(f, ("mutant", "engine", "status_style", "delivery"), "default: as recorded")
    p.add_argument("--judge", action="store_true",
                   help="Judge each tape's exchanges against today's contract without replaying "
                   "them (the passive judge gs-proxy runs live); exit 1 on a red MUST clause of the spec.")
    r = p.add_argument_group("replay")
    r.add_argument("--rules", help="Accepted differences (YAML or JSON), each with its reason.")
    r.add_argument("--floats", choices=("sign", "close"), default="sign",
                   help="sign: floats compared for finiteness and sign only (default; a real "
                   "service's numbers differ); close: also their value within 1e-3 and tensor contents "
                   "by digest, for a tape replayed against the same fake (same engine and seed).")
    r.add_argument("--fail-fast", action="store_true",
                   help="Stop replaying a tape at its first divergence.")
    r.add_argument("--only", metavar="N[,M...]", type=_seqs,
                   help="Report only these exchanges (by #sequence number, as the report names "
                   "them); the tape is replayed up to the last of them, since the earlier "
                   "exchanges create the jobs and ids they use.")
    r.add_argument("--poll-timeout", type=float, default=60.0,
                   help="Seconds to poll a job or request towards its recorded state (default 60).")
    r.add_argument("--timeout", type=float, default=120.0, help="Read timeout per request (default 120).")
    o = p.add_argument_group("output")
    o.add_argument("--report", help="Report path; the suffix picks the form (.html, .md, .xml, .json, else text).")
    o.add_argument("--html", help="HTML report path.")
    o.add_argument("--markdown", help="Markdown report path.")
    o.add_argument("--junit", help="JUnit XML path (one test case per exchange group).")
    o.add_argument("--json", help="The replay as JSON: divergences, counts, and the tape's size, date and bodies.")
    o.add_argument("--matrix", metavar="PATH", help="Write the parity matrix (per operation: recorded, "
                   "replayed, equal, accepted, divergent, skipped) to PATH.md and PATH.html "
                   "(default: next to the --report/--html/--markdown report, as REPORT.matrix.md/.html).")
    o.add_argument("--limit", type=int, default=50, help="Divergent exchanges printed per tape (default 50).")
    o.add_argument("-q", "--quiet", action="store_true", help="Print only the headline of each tape.")
    return p


def _seqs(raw: str) -> frozenset[int]:
    try:
        seqs = frozenset(int(part) for part in raw.replace(" ", ",").split(",") if part)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--only takes exchange numbers (1,5,12), not {raw!r}") from None
    if not seqs or min(seqs) < 1:
        raise argparse.ArgumentTypeError("--only takes exchange numbers from 1")
    return seqs


def _prefix(ns: argparse.Namespace) -> str | None:
    if not (ns.database or ns.schema or ns.endpoint):
        return None
    from contract.routes import prefix

    return prefix(*(getattr(ns, name) or OPTION[name].default for name in ("database", "schema", "endpoint")))


def targets_for(ns: argparse.Namespace) -> UrlTargets | EmbeddedTargets:
    if ns.url:
        tokens = (with_env("token", ns.token), with_env("token2", ns.token2))
        return UrlTargets(ns.url, tokens, _prefix(ns))
    overrides = {"mutant": ns.mutant, "engine": ns.engine, "status_style": ns.status_style,
                 "result_delivery": ns.delivery}
    return EmbeddedTargets(overrides, _prefix(ns))


def replay_tape(path: str, ns: argparse.Namespace, rules: list[Rule] | None = None) -> Replay:
    """Replay one tape against the target ``ns`` names (fresh fakes per tape)."""
    from contract.tape import read_tape

    lines = read_tape(path)
    targets = targets_for(ns)
    only: frozenset[int] | None = getattr(ns, "only", None)
    try:
        replayer = Replayer(targets, poll_timeout_s=ns.poll_timeout, timeout_s=ns.timeout,
                            accept=accepter(rules or []), stop_at_divergence=bool(getattr(ns, "fail_fast", False)),
                            floats=getattr(ns, "floats", "sign"), stop_after=max(only) if only else None)
        rep = replayer.run(path, lines)
    finally:
        targets.close()
    if only:
        rep.results = [r for r in rep.results if r.seq in only]
        rep.only = tuple(sorted(only))
    return rep


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if ns.judge:
        from conformance.judge.report import judge_tape

        try:
            return max(judge_tape(path, reports=[r for r in (ns.report,) if r]) for path in ns.tapes)
        except (ValueError, OSError) as exc:
            print(f"gs-parity: {exc}", file=sys.stderr)
            return EXIT_ERROR
    if ns.url and (ns.mutant or ns.engine or ns.status_style or ns.delivery):
        print("gs-parity: --mutant/--engine/--status-style/--delivery apply to the embedded fake only",
              file=sys.stderr)
        return EXIT_ERROR
    try:
        rules = load_rules(ns.rules)
    except (RuleError, OSError) as exc:
        print(f"gs-parity: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if ns.url:
        from conformance.target import ProbeError, probe

        try:
            probe(ns.url)
        except ProbeError as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_NO_SERVER
    reps: list[Replay] = []
    for path in ns.tapes:
        try:
            reps.append(replay_tape(path, ns, rules))
        except (ValueError, OSError) as exc:
            print(f"gs-parity: {exc}", file=sys.stderr)
            return EXIT_ERROR
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            # A tape is untrusted input: a line missing what the format promises is a bad
            # tape, reported as one, never a traceback.
            print(f"gs-parity: {path}: a malformed tape ({type(exc).__name__}: {str(exc)[:200]})", file=sys.stderr)
            return EXIT_ERROR
    colour = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    if ns.quiet:
        print(scrub_text(safe("\n".join(reports.headline(rep) for rep in reps))))
    else:
        print(reports.text(reps, colour=colour, limit=ns.limit))
    for out in (ns.report, ns.html and _suffix(ns.html, ".html"), ns.markdown and _suffix(ns.markdown, ".md"),
                ns.junit and _suffix(ns.junit, ".xml"), ns.json and _suffix(ns.json, ".json")):
        if out:
            reports.write(reps, out)
            print(f"report: {out}")
    beside = next((p for p in (ns.report, ns.html, ns.markdown) if p), None)
    if ns.matrix or beside:
        paths = matrix.write_beside(ns.matrix, reps, "") if ns.matrix else matrix.write_beside(str(beside), reps)
        print("matrix: " + ", ".join(paths))
    return EXIT_OK if all(rep.ok for rep in reps) else EXIT_DIVERGED


def _suffix(path: str, suffix: str) -> str:
    return path if path.lower().endswith(suffix) else path + suffix


if __name__ == "__main__":
    sys.exit(main())
