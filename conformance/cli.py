"""``gs-conformance``: run the conformance suite against a URL (or the embedded fake) and
report per clause. Exit status 0 when no clause is red (against a URL, a red ``decided``
clause is reported but does not count) and every MUST this target can be judged on is green;
``--require-all`` also fails the run on every skipped MUST.

It wraps the pytest plugin with ``pytest.main``: a server that is not there is reported in
seconds (the URL is probed first), a real URL runs in one process so the run creates at
most one job (cancelled at the end), and progress prints one line per finished property.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from conformance import report as reports
from conformance.progress import Progress
from conformance.results import RunResults
from conformance.target import (
    DELIVERIES,
    DIALECTS,
    ENGINES,
    PROFILES,
    STATUS_STYLES,
    GsOptions,
    ProbeError,
    probe,
    probe_service,
)
from contract.routes import prefix

EXIT_OK, EXIT_RED, EXIT_ERROR, EXIT_NO_SERVER = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gs-conformance",
        description="Check a Cortex Training server (default: the embedded fake) against the contract.",
    )
    t = p.add_argument_group("target")
    t.add_argument(
        "--url",
        help="Service base URL, e.g. https://ACCOUNT.snowflakecomputing.com "
        "(absent: start the fake in-process).",
    )
    t.add_argument("--token", help="Programmatic access token (default: $GS_TOKEN).")
    t.add_argument("--token2", help="A second account's token, for the isolation clauses.")
    t.add_argument("--database", default=GsOptions.database)
    t.add_argument("--schema", default=GsOptions.schema)
    t.add_argument("--endpoint", default=GsOptions.endpoint)
    t.add_argument("--job-id", help="Reuse this running job instead of creating one.")
    t.add_argument("--model", help="Model for created jobs (default: the smallest training model).")
    t.add_argument(
        "--max-jobs", type=int, help="Jobs the run may create (default 1 against a URL)."
    )
    t.add_argument(
        "--max-result-mib",
        type=int,
        default=GsOptions.max_result_mib,
        help="Cap (MiB) on the one large result the run asks for, so result chunks are "
        "judged (default 64: a result just past the 60 MiB body bound).",
    )
    t.add_argument(
        "--startup-timeout",
        type=float,
        default=GsOptions.startup_timeout_s,
        help="Seconds to wait for the job to be running (default 1800).",
    )
    r = p.add_argument_group("run")
    r.add_argument(
        "--profile",
        default=GsOptions.profile,
        choices=PROFILES,
        help="current: today's surface; proposed: current + the seed's additions; "
        "semantic: numeric behaviour (tiny engine or a real model).",
    )
    r.add_argument(
        "--examples",
        type=int,
        help="Hypothesis examples per property (default 25 on the fake, 5 against a URL).",
    )
    r.add_argument(
        "--clauses", help="Only properties checking these clauses: ID,ID or prefixes like CG-*."
    )
    r.add_argument(
        "-n",
        "--workers",
        default=None,
        help="pytest-xdist workers for the embedded fake: auto or N (default: auto; a URL "
        "always runs in one process).",
    )
    r.add_argument(
        "--require-all",
        action="store_true",
        help="Fail on every skipped MUST clause too (the embedded fake's gate); default: "
        "only red clauses fail, a skipped clause being one this target cannot be judged on.",
    )
    r.add_argument(
        "--randomize", action="store_true", help="Randomise hypothesis (default: reproducible)."
    )
    r.add_argument(
        "--no-shrink",
        action="store_true",
        help="Skip hypothesis shrinking: faster, but failing examples are not minimal.",
    )
    f = p.add_argument_group("embedded fake")
    f.add_argument("--mutant", help="Run the fake with this deliberate contract violation.")
    f.add_argument("--engine", default=GsOptions.engine, choices=ENGINES)
    f.add_argument("--status-style", default=GsOptions.status_style, choices=STATUS_STYLES)
    f.add_argument("--delivery", default=GsOptions.delivery, choices=DELIVERIES)
    f.add_argument(
        "--dialect",
        "--gs-dialect",
        dest="dialect",
        default=GsOptions.dialect,
        choices=DIALECTS,
        help="Answer forms: kit (the fake's own) or spec (integer error codes, detail lists, "
        "'' poll fields, last_lr lists, ... : the other forms the spec allows).",
    )
    o = p.add_argument_group("output")
    o.add_argument("--report", help="HTML (or .md/.json/.txt by suffix) report path.")
    o.add_argument("--markdown", help="Markdown report path.")
    o.add_argument("--junit", help="JUnit XML path (one testcase per clause).")
    o.add_argument("--json", help="Per-clause results as JSON.")
    o.add_argument(
        "--record",
        metavar="FILE",
        help="Record every HTTP exchange to this parity tape (replay it with gs-parity); "
        "recording runs in one process unless -n is given.",
    )
    o.add_argument(
        "--plan",
        action="store_true",
        help="Run nothing: list for each clause whether this target, with these options, can "
        "judge it, and why not (which option would let it).",
    )
    o.add_argument("-v", "--verbose", action="store_true", help="Show pytest's own output too.")
    o.add_argument("--quiet", action="store_true", help="No progress lines, only the report.")
    return p


def pytest_args(ns: argparse.Namespace, json_path: str) -> list[str]:
    args = [
        "--pyargs",
        "conformance.properties",
        "-p",
        "no:cacheprovider",
        "--continue-on-collection-errors",
        "-o",
        "addopts=",
        "--gs-profile",
        ns.profile,
        "--gs-json",
        json_path,
        "--gs-database",
        ns.database,
        "--gs-schema",
        ns.schema,
        "--gs-endpoint",
        ns.endpoint,
        "--gs-engine",
        ns.engine,
        "--gs-status-style",
        ns.status_style,
        "--gs-delivery",
        ns.delivery,
        "--gs-dialect",
        ns.dialect,
        "--gs-startup-timeout",
        str(ns.startup_timeout),
        "--gs-max-result-mib",
        str(ns.max_result_mib),
    ]
    pairs = [
        ("--gs-url", ns.url),
        ("--gs-token", ns.token),
        ("--gs-token2", ns.token2),
        ("--gs-job-id", ns.job_id),
        ("--gs-model", ns.model),
        ("--gs-clauses", ns.clauses),
        ("--gs-mutant", ns.mutant),
        ("--gs-report", ns.report),
        ("--gs-record", ns.record),
    ]
    for flag, value in pairs:
        if value:
            args += [flag, value]
    for flag, value in (("--gs-examples", ns.examples), ("--gs-max-jobs", ns.max_jobs)):
        if value is not None:
            args += [flag, str(value)]
    if ns.junit:
        args += ["--gs-junit", ns.junit]
    if ns.randomize:
        args.append("--gs-randomize")
    if ns.require_all:
        args.append("--gs-require-all")
    if ns.no_shrink:
        args.append("--gs-no-shrink")
    workers = _workers(ns)
    if workers:
        args += ["-n", workers]
    args += ["-v", "-rfE"] if ns.verbose else ["-p", "no:terminal"]
    return args


def _workers(ns: argparse.Namespace) -> str | None:
    if ns.url:
        if ns.workers not in (None, "0", "1"):
            print(
                "note: against a URL the suite runs in one process (one job, shared state); "
                f"ignoring -n {ns.workers}",
                file=sys.stderr,
            )
        return None
    value = ns.workers or ("0" if getattr(ns, "record", None) else "auto")
    return None if value in ("0", "1") else value


def auth_headers(token: str) -> dict[str, str]:
    if not token:
        return {}
    from contract.auth import auth_headers as pat_headers

    return pat_headers(token)


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if ns.mutant and ns.url:
        print("--mutant applies to the embedded fake only", file=sys.stderr)
        return EXIT_ERROR
    if ns.url and ns.dialect != GsOptions.dialect:
        print("note: --dialect applies to the embedded fake only; judging the URL as it answers",
              file=sys.stderr)
    started = time.monotonic()
    if ns.url:
        try:
            probe(ns.url)
            headers = auth_headers(ns.token or os.environ.get("GS_TOKEN") or "")
            probe_service(ns.url, prefix(ns.database, ns.schema, ns.endpoint), headers)
        except ProbeError as exc:
            print(str(exc), file=sys.stderr)
            return EXIT_NO_SERVER
    import pytest

    if ns.plan:
        return plan_only(ns)
    with tempfile.TemporaryDirectory(prefix="gs-conformance-") as tmp:
        json_path = ns.json or str(Path(tmp) / "results.json")
        progress = None if ns.quiet or ns.verbose else Progress()
        plugins: list[object] = [progress] if progress else []
        target = ns.url or "the embedded fake"
        if not ns.quiet:
            print(f"gs-conformance: profile {ns.profile} against {target}", flush=True)
        code = pytest.main(pytest_args(ns, json_path), plugins=plugins)
        if progress and progress.collect_errors:
            print("collection errors:\n" + "\n".join(progress.collect_errors), file=sys.stderr)
        path = Path(json_path)
        if not path.exists():
            print(
                f"gs-conformance: the run produced no results (pytest exit {int(code)})",
                file=sys.stderr,
            )
            return EXIT_ERROR if int(code) != 3 else EXIT_NO_SERVER
        import json

        results = RunResults.from_json(json.loads(path.read_text()))
    results.duration_s = time.monotonic() - started
    for out in (ns.markdown,):
        if out:
            reports.write(results, out)
    if ns.report:
        reports.write(results, ns.report)
    print(reports.text(results, colour=sys.stdout.isatty() and "NO_COLOR" not in os.environ))
    for label, out in (
        ("report", ns.report),
        ("markdown", ns.markdown),
        ("junit", ns.junit),
        ("json", ns.json),
    ):
        if out:
            print(f"{label}: {out}")
    if int(code) in (2, 3, 4) and not results.verdicts:
        return EXIT_ERROR
    return EXIT_OK if results.ok else EXIT_RED


def plan_only(ns: argparse.Namespace) -> int:
    """``--plan``: collect the properties in this process, print the plan, run nothing."""
    import json

    import pytest

    from conformance.planner import render_plan

    with tempfile.TemporaryDirectory(prefix="gs-conformance-plan-") as tmp:
        plan_path = str(Path(tmp) / "plan.json")
        args = pytest_args(ns, str(Path(tmp) / "results.json"))
        if "-n" in args:
            cut = args.index("-n")
            del args[cut : cut + 2]
        pytest.main([*args, "--gs-plan", plan_path], plugins=[])
        path = Path(plan_path)
        if not path.exists():
            print("gs-conformance: could not collect the properties to plan", file=sys.stderr)
            return EXIT_ERROR
        print(render_plan(json.loads(path.read_text())))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
