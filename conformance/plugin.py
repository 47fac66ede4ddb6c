"""The pytest plugin (entry point ``gs_conformance``): the hooks that wire the suite in.

Loaded in every pytest session of the repo, so it is inert unless used: it registers
``--gs-*`` options (conformance.options) and fixtures (conformance.fixtures), starts no
server until a fixture asks for one, and only books and reports tests that live in
``conformance/properties``. Under pytest-xdist each worker tags its reports with clause ids
and the controller books them (conformance.reporting.booking), so the report is the same with or
without ``-n``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from conformance.options import add_pytest_options, gs_options
from conformance.reporting import booking
from conformance.reporting import render as reports
from conformance.reporting.cost import COST
from conformance.reporting.recorder import RECORDER, finish_run_tape, start_run_tape
from conformance.reporting.verdicts import ClauseBook, RunResults
from conformance.runtime import RUNTIME
from conformance.target import run_secrets
from contract.clauses import clauses_of, for_profile
from contract.redact import scrub_text

pytest_plugins = ("conformance.fixtures", "conformance.gate_client")
PROPERTIES_DIR = Path(__file__).resolve().parent / "properties"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gs_property: a conformance property (set automatically)")
    config.addinivalue_line("markers", "gs_last: run after every other property (it ends a job)")
    try:
        options = gs_options(config)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if options.mutant and options.url:
        raise pytest.UsageError("--gs-mutant applies to the embedded fake only (drop --gs-url)")
    RUNTIME.examples = options.n_examples
    RUNTIME.embedded = options.embedded
    RUNTIME.randomize = options.randomize
    RUNTIME.shrink = not options.no_shrink
    RUNTIME.secrets = run_secrets(options)
    RUNTIME.forms = options.forms
    config.stash[booking.BOOK] = ClauseBook()
    config.stash[booking.STARTED] = time.monotonic()
    start_run_tape(config, options)
    if not _is_worker(config):
        config.pluginmanager.register(booking.Booker(config), "gs-conformance-booker")


# --- selection -------------------------------------------------------------------------------


def is_property(item: pytest.Item) -> bool:
    path = getattr(item, "path", None)
    try:
        return path is not None and Path(path).resolve().is_relative_to(PROPERTIES_DIR)
    except OSError:
        return False


def item_clauses(item: pytest.Item) -> tuple[str, ...]:
    found = clauses_of(getattr(item, "function", None))
    if not found:
        found = clauses_of(getattr(item, "cls", None))
    if not found:
        parent = getattr(item, "parent", None)
        found = clauses_of(getattr(parent, "obj", None))
    return found


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    options = gs_options(config)
    wanted = {c.id for c in for_profile(options.profile)}
    if options.clauses:
        wanted &= set(options.clauses)
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        if not is_property(item):
            keep.append(item)
            continue
        item.add_marker(pytest.mark.gs_property)
        ids = item_clauses(item)
        (keep if ids and set(ids) & wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# --- recording and booking -------------------------------------------------------------------


def pytest_runtest_setup(item: pytest.Item) -> None:
    if is_property(item):
        RECORDER.clear()
        if RECORDER.tape is not None:
            RECORDER.tape.group = item.nodeid


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome: Any = yield
    if not is_property(item):
        return
    rep = outcome.get_result()
    _scrub_longrepr(rep)
    ids = item_clauses(item)
    if ids:
        booking.tag(rep, ids, call)


def _scrub_longrepr(rep: pytest.TestReport) -> None:
    """pytest's own text of a failure or skip (the terminal, --junitxml) without the run's
    tokens: a server may have put them in the answer an assertion shows."""
    longrepr = rep.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        rep.longrepr = (longrepr[0], longrepr[1], scrub_text(str(longrepr[2]), RUNTIME.secrets))
    elif longrepr is not None:
        text = str(longrepr)
        scrubbed = scrub_text(text, RUNTIME.secrets)
        if scrubbed != text:
            rep.longrepr = scrubbed


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[booking.STARTED] = time.monotonic()
    COST.reset()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    RECORDER.stop_tape()
    if _is_worker(config):
        _results_sent()
        return
    finish_run_tape(config)
    booking.finish(config, gs_options(config),
                   interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)


def _results_sent() -> None:
    """A worker's session is over: ignore SIGINT from here on. When the controller ends the
    run, execnet gives each worker 5 s to finish and then sends it SIGINT; on a loaded
    machine that lands in a finalizer run by the worker's last garbage collection, and
    pytest prints it on the user's terminal, before the report, as a
    PytestUnraisableExceptionWarning with a KeyboardInterrupt traceback. The results are
    already with the controller, and a user's Ctrl-C still reaches the controller."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def results_of(config: pytest.Config) -> RunResults | None:
    """The run's per-clause results (controller only, after the session finished)."""
    return config.stash.get(booking.RESULTS, None)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    results = results_of(config)
    if results is None:
        return
    colour = getattr(terminalreporter, "isatty", False) and os.environ.get("NO_COLOR") is None
    terminalreporter.write_sep("=", "gs-conformance clauses")
    terminalreporter.write_line(reports.text(results, colour=bool(colour)))
