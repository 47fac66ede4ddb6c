"""``gs-conformance``: run the conformance suite against a URL (or the embedded fake) and
report per clause. Exit status 0 when no clause is red (against a URL, a red ``decided``
clause is reported but does not count) and every MUST this target can be judged on is green;
``--require-all`` also fails the run on every skipped MUST. An interrupted run (Ctrl-C) exits
130 with the headline INTERRUPTED, however green its part was.

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

from conformance.options import OPTION, add_cli_arguments, pytest_argv, with_env
from conformance.reporting import render as reports
from conformance.reporting.progress import Progress
from conformance.reporting.verdicts import RunResults
from conformance.target import ProbeError, probe, probe_service
from contract.routes import prefix

EXIT_OK, EXIT_RED, EXIT_ERROR, EXIT_NO_SERVER = 0, 1, 2, 3
#: Ctrl-C: the shell's status for a run ended by SIGINT.
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gs-conformance",
        description="Check a Cortex Training server (default: the embedded fake) against the contract.",
    )
    add_cli_arguments(p)
    return p


#: What every run hands pytest besides the options: the properties, no cache, no addopts.
PYTEST_BASE = ["--pyargs", "conformance.properties", "-p", "no:cacheprovider",
               "--continue-on-collection-errors", "-o", "addopts="]


def pytest_args(ns: argparse.Namespace, json_path: str) -> list[str]:
    """The pytest argv for the CLI's options, the results going to ``json_path``."""
    args = PYTEST_BASE + pytest_argv(argparse.Namespace(**vars(ns) | {"json": json_path}))
    workers = _workers(ns)
    if workers:
        args += ["-n", workers]
    args += ["-v", "-rfE"] if ns.verbose else ["-p", "no:terminal"]
    return args


#: A ``--clauses`` selection this small runs in one process by default: two xdist workers
#: each import the suite, torch and the fake again (about 7 s of CPU), more than a dozen
#: clauses take to judge, so a rerun of one failed clause takes a third of the time.
ONE_PROCESS_CLAUSES = 24


def _workers(ns: argparse.Namespace) -> str | None:
    if ns.url:
        if ns.workers not in (None, "0", "1"):
            print(
                "note: against a URL the suite runs in one process (one job, shared state); "
                f"ignoring -n {ns.workers}",
                file=sys.stderr,
            )
        return None
    small = 0 < len(ns.clauses or ()) <= ONE_PROCESS_CLAUSES
    value = ns.workers or ("0" if getattr(ns, "record", None) or small else "auto")
    return None if value in ("0", "1") else value


def auth_headers(token: str) -> dict[str, str]:
    if not token:
        return {}
    from contract.auth import auth_headers as pat_headers

    return pat_headers(token)


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    started = time.monotonic()
    refused = _check_target(ns)
    if refused is not None:
        return refused
    if ns.plan:
        return plan_only(ns)
    try:
        ran = _run(ns)
    except KeyboardInterrupt:  # before pytest's own handling starts (imports, set-up)
        print("gs-conformance: interrupted before any clause was judged", file=sys.stderr)
        return EXIT_INTERRUPTED
    if isinstance(ran, int):
        return ran
    code, results = ran
    results.duration_s = time.monotonic() - started
    _write_and_print(ns, results)
    if code in (2, 3, 4) and not results.verdicts:
        return EXIT_ERROR
    if results.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if results.ok else EXIT_RED


def _check_target(ns: argparse.Namespace) -> int | None:
    """Refuse options that do not fit the target and probe a URL: the exit status when the
    run cannot start, else None."""
    if ns.mutant and ns.url:
        print("--mutant applies to the embedded fake only", file=sys.stderr)
        return EXIT_ERROR
    if not ns.url:
        return None
    if ns.dialect != OPTION["dialect"].default:
        print("note: --dialect applies to the embedded fake only; judging the URL as it answers",
              file=sys.stderr)
    try:
        probe(ns.url)
        headers = auth_headers(with_env("token", ns.token) or "")
        probe_service(ns.url, prefix(ns.database, ns.schema, ns.endpoint), headers)
    except ProbeError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_NO_SERVER
    return None


def _run(ns: argparse.Namespace) -> tuple[int, RunResults] | int:
    """Run the suite under pytest: (pytest's exit status, the results), or the CLI's exit
    status when the run produced no results."""
    import json

    import pytest

    with tempfile.TemporaryDirectory(prefix="gs-conformance-") as tmp:
        json_path = ns.json or str(Path(tmp) / "results.json")
        progress = None if ns.quiet or ns.verbose else Progress()
        if not ns.quiet:
            print(f"gs-conformance: profile {ns.profile} against {ns.url or 'the embedded fake'}",
                  flush=True)
        code = int(pytest.main(pytest_args(ns, json_path), plugins=[progress] if progress else []))
        if progress and progress.collect_errors:
            print("collection errors:\n" + "\n".join(progress.collect_errors), file=sys.stderr)
        path = Path(json_path)
        if not path.exists():
            print(f"gs-conformance: the run produced no results (pytest exit {code})",
                  file=sys.stderr)
            return {2: EXIT_INTERRUPTED, 3: EXIT_NO_SERVER}.get(code, EXIT_ERROR)
        return code, cli_spelling(RunResults.from_json(json.loads(path.read_text())))


def cli_spelling(results: RunResults) -> RunResults:
    """The results with each skip note and hint spelled for this CLI (``--max-jobs``, not the
    plugin's ``--gs-max-jobs``): properties and hints are written once, for the plugin."""
    import dataclasses

    from conformance.options import cli_spelling as spelt

    results.verdicts = [dataclasses.replace(v, reason=spelt(v.reason), enable=spelt(v.enable))
                        for v in results.verdicts]
    return results


def _write_and_print(ns: argparse.Namespace, results: RunResults) -> None:
    """Write the CLI's report files (with the whole run's duration and the CLI's spelling of
    options: the plugin wrote its JUnit and JSON with its own), print the report."""
    suffixed = (ns.junit and _suffixed(ns.junit, ".xml"), ns.json and _suffixed(ns.json, ".json"))
    for out in (ns.markdown, ns.report, *suffixed):
        if out:
            reports.write(results, out)
    print(reports.text(results, colour=sys.stdout.isatty() and "NO_COLOR" not in os.environ))
    for label in ("report", "markdown", "junit", "json"):
        if getattr(ns, label):
            print(f"{label}: {getattr(ns, label)}")


def _suffixed(path: str, suffix: str) -> str:
    """The path the plugin wrote for ``--junit``/``--json`` (it adds the suffix when missing)."""
    return path if path.lower().endswith(suffix) else path + suffix


def plan_only(ns: argparse.Namespace) -> int:
    """``--plan``: collect the properties in this process, print the plan, run nothing."""
    import json

    import pytest

    from conformance.options import cli_spelling as cli_spelling_of
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
        print(cli_spelling_of(render_plan(json.loads(path.read_text()))))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
