"""From pytest reports to per-clause results: tag, book, report.

A worker tags each property's report with its clause ids, the clauses it failed and the
failing example (``report.user_properties``, which pytest-xdist carries to the controller);
the controller's :class:`Booker` books them in a :class:`ClauseBook`, and at the end of the
session :func:`finish` turns the book into :class:`RunResults` and writes the reports. So
the report is the same with or without ``-n``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from conformance.reporting import render as reports
from conformance.reporting.cost import COST
from conformance.reporting.recorder import render_last
from conformance.reporting.verdicts import (
    PROP_CLAUSES,
    PROP_EXAMPLE,
    PROP_FAILED,
    ClauseBook,
    Outcome,
    RunResults,
    TestOutcome,
)
from conformance.reporting.violations import ClauseViolation
from conformance.runtime import RUNTIME
from contract.redact import scrub_text

BOOK = pytest.StashKey[ClauseBook]()
RESULTS = pytest.StashKey[RunResults]()
STARTED = pytest.StashKey[float]()


def failing_example(excinfo: Any) -> str:
    """The failing example: hypothesis' shrunk input, the assertion, the last exchanges."""
    if excinfo is None:
        return ""
    exc = excinfo.value
    message = exc.message if isinstance(exc, ClauseViolation) else excinfo.exconly().strip()
    if not isinstance(exc, AssertionError):
        # A property that crashed could not judge the answer: say so (the clause is red).
        message = f"the property could not judge the server's answer ({message})"
    parts: list[str] = [message.strip()]
    notes = [n for n in getattr(exc, "__notes__", []) if isinstance(n, str)]
    if notes:
        parts.append("\n".join(notes))
    exchanges = render_last()
    if exchanges:
        parts.append("last HTTP exchanges:\n" + exchanges)
    return scrub_text("\n\n".join(parts), RUNTIME.secrets)[:12000]


def tag(rep: pytest.TestReport, ids: tuple[str, ...], call: pytest.CallInfo[None]) -> None:
    """Tag a property's report with its clauses and, when it failed, what failed and how."""
    rep.user_properties.append((PROP_CLAUSES, ",".join(ids)))
    if rep.failed:
        exc = call.excinfo.value if call.excinfo else None
        failed = exc.clauses if isinstance(exc, ClauseViolation) else ()
        failed = tuple(c for c in failed if c in ids) or failed
        rep.user_properties.append((PROP_FAILED, ",".join(failed)))
        rep.user_properties.append((PROP_EXAMPLE, failing_example(call.excinfo)))


def _props(report: pytest.TestReport) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in report.user_properties:
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str):
            out[pair[0]] = str(pair[1])
    return out


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
    else:
        text = str(longrepr or "")
    return scrub_text(text.removeprefix("Skipped: ").strip(), RUNTIME.secrets)


class Booker:
    """Books each property's outcome on the controller (one per session, no globals, so
    sessions run one after another in one process stay apart)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = _props(report)
        ids = props.get(PROP_CLAUSES)
        if not ids:
            return
        if report.when != "call" and report.outcome == "passed":
            return
        outcome: Outcome = "failed"
        if report.outcome in ("passed", "skipped"):
            outcome = "passed" if report.outcome == "passed" else "skipped"
        self.config.stash[BOOK].book(
            TestOutcome(
                nodeid=report.nodeid,
                clauses=tuple(ids.split(",")),
                outcome=outcome,
                failed_clauses=tuple(c for c in props.get(PROP_FAILED, "").split(",") if c),
                skip_reason=_skip_reason(report) if report.skipped else "",
                example=props.get(PROP_EXAMPLE, ""),
                duration=report.duration,
            )
        )


def finish(config: pytest.Config, options: Any, *, interrupted: bool = False) -> None:
    """The controller's end of session: the book's results, kept on ``config`` and written
    to the report files asked for (nothing when no property ran). ``interrupted``: the run
    was stopped (Ctrl-C) before every property ran, so it can conform on nothing."""
    book = config.stash.get(BOOK, None)
    if book is None or not book.outcomes:
        return
    results = book.results(
        options.profile,
        options.url or "embedded fake",
        selected=options.clauses,
        duration_s=time.monotonic() - config.stash.get(STARTED, time.monotonic()),
        settings=options.describe(),
        url=not options.embedded,
        require_all=options.require_all,
        forms=options.forms,
    )
    results.interrupted = interrupted
    if not options.embedded:
        results.cost = COST.summary() | ({"reused_job": options.job_id} if options.job_id else {})
    config.stash[RESULTS] = results
    for path in (
        options.report,
        options.junit and _with_suffix(options.junit, ".xml"),
        options.json and _with_suffix(options.json, ".json"),
    ):
        if path:
            reports.write(results, path)


def _with_suffix(path: str, suffix: str) -> str:
    return path if path.lower().endswith(suffix) else path + suffix
