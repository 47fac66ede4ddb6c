"""Prints the mutant kill score the self-test computed (aggregated across xdist workers)."""

from __future__ import annotations

from typing import Any

import pytest

KILL_PROPERTY = "gs_kill"
_TALLY: dict[str, list[str]] = {"caught": [], "survived": [], "awaiting": []}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for pair in report.user_properties:
        if isinstance(pair, (list, tuple)) and len(pair) == 2 and pair[0] == KILL_PROPERTY:
            value: Any = pair[1]
            _TALLY["caught"].extend(value.get("caught", []))
            _TALLY["survived"].extend(value.get("survived", []))
            _TALLY["awaiting"].extend(value.get("awaiting", []))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    caught, survived = sorted(set(_TALLY["caught"])), sorted(set(_TALLY["survived"]))
    total = len(caught) + len(survived)
    if not total:
        return
    terminalreporter.write_sep("=", f"mutant kill score: {len(caught)}/{total}")
    if survived:
        terminalreporter.write_line("survivors: " + ", ".join(survived))
    awaiting = sorted(set(_TALLY["awaiting"]))
    if awaiting:
        terminalreporter.write_line(
            f"not judged yet ({len(awaiting)}, their semantic clauses have no property yet): "
            + ", ".join(awaiting)
        )
