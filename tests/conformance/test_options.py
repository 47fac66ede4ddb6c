"""The suite's option table: every flag keeps its spelling on both sides, a CLI option
reaches GsOptions through the pytest argv the CLI builds, and the generated options page names
them all."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

from conformance.cli import build_parser, pytest_args
from conformance.options import OPTIONS, GsOptions, add_pytest_options, gs_options

OPTIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli-gs-conformance.md"

#: The flags as they were before the table made them (a flag lost here breaks users' scripts).
CLI_FLAGS = {
    "--url", "--token", "--token2", "--database", "--schema", "--endpoint", "--job-id",
    "--model", "--max-jobs", "--max-result-mib", "--startup-timeout", "--profile",
    "--examples", "--clauses", "-n", "--workers", "--require-all", "--randomize",
    "--no-shrink", "--mutant", "--engine", "--status-style", "--delivery", "--dialect",
    "--gs-dialect", "--report", "--markdown", "--junit", "--json", "--record", "--plan",
    "-v", "--verbose", "--quiet", "--fake-seed",
}
PLUGIN_FLAGS = {
    "--gs-url", "--gs-token", "--gs-token2", "--gs-database", "--gs-schema", "--gs-endpoint",
    "--gs-profile", "--gs-job-id", "--gs-model", "--gs-examples", "--gs-report", "--gs-junit",
    "--gs-json", "--gs-clauses", "--gs-mutant", "--gs-engine", "--gs-max-jobs",
    "--gs-status-style", "--gs-delivery", "--gs-dialect", "--gs-randomize", "--gs-no-shrink",
    "--gs-require-all", "--gs-record", "--gs-plan", "--gs-max-result-mib",
    "--gs-startup-timeout", "--gs-fake-seed",
}
# Parity tapes: what a recording keeps of big request bodies.
CLI_FLAGS |= {"--record-bodies", "--record-budget-mib"}
PLUGIN_FLAGS |= {"--gs-record-bodies", "--gs-record-budget-mib"}


class _Group:
    """pytest's option group over a plain argparse parser (what ``addoption`` forwards to)."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def getgroup(self, *_: str) -> _Group:
        return self

    def addoption(self, *flags: str, **kwargs: Any) -> None:
        self.parser.add_argument(*flags, **kwargs)


class _Config:
    """The two things ``gs_options`` reads off a pytest config."""

    def __init__(self, ns: argparse.Namespace) -> None:
        self.ns = ns
        self.stash = pytest.Stash()

    def getoption(self, flag: str) -> Any:
        return getattr(self.ns, flag.lstrip("-").replace("-", "_"))


def _plugin_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_pytest_options(_Group(parser))
    return parser


def _via_cli(argv: list[str]) -> Any:
    """GsOptions as a CLI run hands them to the plugin."""
    args = pytest_args(build_parser().parse_args(argv), "results.json")
    gs_args = [a for i, a in enumerate(args) if a.startswith("--gs-") or
               (i and args[i - 1].startswith("--gs-") and not a.startswith("-"))]
    return gs_options(_Config(_plugin_parser().parse_args(gs_args)))


def test_every_flag_keeps_its_spelling():
    cli = {s for action in build_parser()._actions for s in action.option_strings}
    assert cli - {"-h", "--help", "-q"} == CLI_FLAGS
    plugin = {s for action in _plugin_parser()._actions for s in action.option_strings}
    assert plugin - {"-h", "--help"} == PLUGIN_FLAGS


def test_defaults_are_the_same_through_the_cli_and_the_plugin():
    assert gs_options(_Config(_plugin_parser().parse_args([]))) == GsOptions()
    assert _via_cli([]) == GsOptions(json="results.json")


def test_a_cli_option_reaches_gs_options():
    argv = ["--url", "http://x", "--token", "t1", "--token2", "t2", "--database", "D",
            "--schema", "S", "--endpoint", "E", "--job-id", "J", "--model", "M",
            "--max-jobs", "3", "--max-result-mib", "7", "--startup-timeout", "2.5",
            "--profile", "current", "--examples", "4", "--clauses", "JOB-GET-1",
            "--require-all", "--randomize", "--no-shrink", "--engine", "tiny",
            "--status-style", "enum", "--delivery", "chunks", "--gs-dialect", "spec",
            "--report", "r.html", "--junit", "j.xml", "--record", "tape"]
    got = _via_cli(argv)
    assert got == GsOptions(
        url="http://x", token="t1", token2="t2", database="D", schema="S", endpoint="E",
        job_id="J", model="M", max_jobs=3, max_result_mib=7, startup_timeout_s=2.5,
        profile="current", examples=4, clauses=("JOB-GET-1",), require_all=True,
        randomize=True, no_shrink=True, engine="tiny", status_style="enum",
        delivery="chunks", dialect="spec", report="r.html", junit="j.xml",
        json="results.json", record="tape",
    )
    assert got.n_examples == 4 and got.job_budget == 3 and not got.embedded


def test_the_table_declares_each_option_once():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names))
    pytest_flags = [o.pytest for o in OPTIONS if o.pytest]
    assert len(pytest_flags) == len(set(pytest_flags))


def test_the_options_page_names_every_option():
    text = OPTIONS_PAGE.read_text()
    for opt in OPTIONS:
        for flag in (*opt.cli, *([opt.pytest] if opt.pytest else [])):
            assert re.search(rf"`{re.escape(flag)}\b", text), f"{OPTIONS_PAGE.name} lacks {flag}"


@pytest.mark.parametrize(("argv", "workers"), [
    ([], "auto"),
    (["--clauses", "AUTH-*"], None),
    (["--clauses", "AUTH-REQUIRED-1", "-n", "2"], "2"),
    (["--clauses", "CG-*,POLL-*,FB-*,STEP-*,SAVE-*,JOB-*"], "auto"),
    (["--url", "http://127.0.0.1:9"], None),
])
def test_a_small_selection_runs_in_one_process_unless_told(argv: list[str], workers: str | None) -> None:
    """xdist workers repay their start-up only on a large selection (cli.ONE_PROCESS_CLAUSES)."""
    args = pytest_args(build_parser().parse_args(argv), "results.json")
    got = args[args.index("-n") + 1] if "-n" in args else None
    assert got == workers
