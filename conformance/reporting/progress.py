"""Live progress for the CLI: one line per finished property, counted against the total.

Works with and without pytest-xdist (the controller sees every worker's reports); it also
keeps the collection errors the CLI must print when pytest's own terminal is silenced.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import pytest

from conformance.reporting.verdicts import PROP_CLAUSES

_WORD = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}


class Progress:
    def __init__(self, stream: TextIO | None = None, colour: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.colour = self.stream.isatty() if colour is None else colour
        self.total = 0
        self.done = 0
        self.started = time.monotonic()
        self.collect_errors: list[str] = []
        self._seen: set[str] = set()

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    @pytest.hookimpl
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not hasattr(session.config, "workerinput") and session.items:
            self.total = len(session.items)
            # The first property's line can take a while (a fake, a job to start): say so.
            self._line(f"collected {self.total} properties in {time.monotonic() - self.started:.1f}s; "
                       "starting the target's first job (the first result can take a minute)")

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: list[Any]) -> None:
        self._line(f"starting {len(specs)} worker processes (pytest-xdist): each imports the suite "
                   "and collects its properties before the first one runs")

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        first = not self.total
        self.total = max(self.total, len(ids))
        if first and ids:  # under xdist the controller collects nothing: the first worker says
            self._line(f"collected {self.total} properties in {time.monotonic() - self.started:.1f}s; "
                       "starting the target's first job (the first result can take a minute)")

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors.append(f"{report.nodeid}: {report.longreprtext[-2000:]}")

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        finished = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
        if not finished or report.nodeid in self._seen:
            if report.when == "teardown" and report.failed:
                self._line(f"       ERROR in teardown of {report.nodeid}")
            return
        self._seen.add(report.nodeid)
        self.done += 1
        clauses = ""
        for pair in report.user_properties:
            if isinstance(pair, (list, tuple)) and len(pair) == 2 and pair[0] == PROP_CLAUSES:
                clauses = str(pair[1])
        word = _WORD.get(report.outcome, report.outcome.upper())
        if self.colour:
            code = {"PASS": "32", "FAIL": "31", "SKIP": "33"}.get(word, "0")
            word = f"\x1b[{code}m{word}\x1b[0m"
        width = len(str(self.total or 0))
        count = f"[{self.done:>{width}}/{self.total}]" if self.total else f"[{self.done}]"
        name = report.nodeid.split("::", 1)[-1]
        tail = f"  ({clauses.replace(',', ', ')})" if clauses else ""
        elapsed = time.monotonic() - self.started
        self._line(f"{count} {word} {name}{tail[:120]}  {elapsed:5.1f}s")
