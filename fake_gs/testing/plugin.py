"""pytest plugin ``fake_gs`` (with the ``server`` extra): the fake as a plumbing gate in a
client team's CI.

* ``fake_gs`` fixture: a running fake (one per session and settings) and a fresh account
  for the test; ``@pytest.mark.fake_gs(engine=..., status_style=..., latency=...,
  dialect=...)`` picks other settings. Override the session fixture ``fake_gs_settings``
  in a conftest for defaults of the whole session.
* The gate: a test fails when the fake answered it a 4xx/5xx it did not declare with
  ``fake_gs.expect_error(...)``, when it sent JSON fields the contract does not know, or
  when it left a chunk group open. ``--fake-gs-gate=off|warn|fail`` (default ``fail``);
  ``@pytest.mark.fake_gs_gate("warn", allow=("open_chunk_groups",))`` per test.
* ``--fake-gs-coverage``: what of the contract the tests exercised, at the end;
  ``--fake-gs-coverage-min=N`` fails the session below N percent of routes.

Inert until a test asks for ``fake_gs``: importing it pulls no hypothesis, schemathesis
or torch, and no fake starts.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from fake_gs.testing import hookspecs
from fake_gs.testing.coverage import Tally, report, route_percent
from fake_gs.testing.fleet import DEFAULT_TRAFFIC, Fleet, marker_settings
from fake_gs.testing.gate import CHECKS, MODES, Exchange, message, offences
from fake_gs.testing.handle import FakeGs

_TALLY = pytest.StashKey[Tally]()
_HANDLE = pytest.StashKey[FakeGs]()
_CHECKED = pytest.StashKey[int]()
WORKER_KEY = "fake_gs_coverage"
#: The gate's mode when neither ``--fake-gs-gate`` nor the ini option names one.
DEFAULT_GATE = "fail"


class FakeGsGateWarning(UserWarning):
    """The gate found problems in a test run with ``--fake-gs-gate=warn``."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("fake_gs", "the fake Cortex Training server as a CI plumbing gate")
    g.addoption("--fake-gs-gate", choices=MODES, default=None,
                help="what to do with a test the fake saw send what the service would refuse: "
                     f"{', '.join(MODES)} (default {DEFAULT_GATE}; ini: fake_gs_gate)")
    g.addoption("--fake-gs-coverage", action="store_true",
                help="print which routes, operation types, delivery forms, dialects and error codes "
                     "the tests exercised")
    g.addoption("--fake-gs-coverage-min", type=float, default=None, metavar="N",
                help="fail the session when the tests exercised fewer than N percent of the routes")
    g.addoption("--fake-gs-traffic", type=int, default=DEFAULT_TRAFFIC, metavar="N",
                help="exchanges of each test the fake keeps for fake_gs.traffic() and the gate")
    parser.addini("fake_gs_gate", f"the fake_gs gate's mode when --fake-gs-gate is not given: {', '.join(MODES)}",
                  default=DEFAULT_GATE)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fake_gs(**settings): run this test against a fake with these "
                                       "settings (engine, status_style, latency, dialect, ...)")
    config.addinivalue_line("markers", "fake_gs_gate(mode='warn', allow=()): relax the fake_gs gate for "
                                       f"this test (mode off|warn|fail; allow any of {', '.join(CHECKS)})")
    config.stash[_TALLY] = Tally()
    if str(config.getini("fake_gs_gate")) not in MODES:
        raise pytest.UsageError(f"ini fake_gs_gate must be one of {', '.join(MODES)}")


@pytest.fixture(scope="session")
def fake_gs_settings() -> dict[str, Any]:
    """Settings of every fake of the session (override in a conftest); markers win."""
    return {}


@pytest.fixture(scope="session")
def fake_gs_fleet(request: pytest.FixtureRequest, fake_gs_settings: dict[str, Any]) -> Iterator[Fleet]:
    fleet = Fleet(request.config.getoption("--fake-gs-traffic"), **marker_settings(fake_gs_settings))
    yield fleet
    fleet.close()


@pytest.fixture
def fake_gs(request: pytest.FixtureRequest, fake_gs_fleet: Fleet) -> Iterator[FakeGs]:
    """A running fake and a fresh account of this test on it (see the module docstring)."""
    overrides: dict[str, Any] = {}
    for mark in reversed(list(request.node.iter_markers("fake_gs"))):
        if mark.args:
            raise TypeError("@pytest.mark.fake_gs takes keyword settings only")
        overrides.update(mark.kwargs)
    handle = fake_gs_fleet.handle(marker_settings(overrides))
    hook = request.config.hook
    handle.config_builder = lambda kwargs: hook.pytest_fake_gs_client_config(kwargs=kwargs)
    item = request.node
    item.stash[_HANDLE] = handle
    yield handle
    view = handle.traffic_view()
    request.config.stash[_TALLY].add_traffic(view.get("tally") or {}, handle.settings)
    _judge(item, view, phase="teardown")


def _gate(item: pytest.Item) -> tuple[str, set[str]]:
    mode = str(item.config.getoption("--fake-gs-gate") or item.config.getini("fake_gs_gate"))
    allowed: set[str] = set()
    mark = item.get_closest_marker("fake_gs_gate")
    if mark is not None:
        allowed = set(mark.kwargs.get("allow", ()))
        # a bare marker relaxes to warn; one that only allows checks keeps the session's mode
        default = mode if allowed else "warn"
        mode = str(mark.kwargs.get("mode", mark.args[0] if mark.args else default))
        if mode not in MODES or not allowed <= set(CHECKS):
            raise TypeError(f"@pytest.mark.fake_gs_gate: mode is one of {MODES}, allow a subset of {CHECKS}")
    return mode, allowed


def _judge(item: pytest.Item, view: dict[str, Any], phase: str) -> None:
    """Fail (or warn about) the problems among the exchanges not judged yet. The call
    phase judges the test body and the chunk groups it left open; teardown judges what
    other fixtures' teardown sent (a failed test is not judged again)."""
    handle = item.stash[_HANDLE]
    checked = item.stash.get(_CHECKED, None)
    if phase == "teardown" and checked is None:
        return
    exchanges = [Exchange.from_json(raw) for raw in view["exchanges"]]
    item.stash[_CHECKED] = max([checked or 0, *(ex.seq for ex in exchanges)])
    mode, handle.expected.allowed = _gate(item)
    if mode == "off":
        return
    fresh = [ex for ex in exchanges if ex.seq > (checked or 0)]
    groups = view.get("open_chunk_groups") or [] if phase == "call" else []
    problems = offences(fresh, groups, handle.expected)
    if not problems:
        return
    kept = sum(1 for ex in exchanges if ex.refused or ex.unknown_fields)
    text = message(f"{item.nodeid} ({phase})", problems, int(view.get("flagged_total", 0)) - kept)
    if mode == "warn":
        warnings.warn(FakeGsGateWarning(text), stacklevel=1)
    else:
        pytest.fail(text, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After the test body passed, the gate judges what the fake saw of it."""
    result = yield
    handle = item.stash.get(_HANDLE, None)
    if handle is not None:
        _judge(item, handle.traffic_view(), phase="call")
    return result


# --- coverage: every worker tallies, the controller reports -----------------------------------


def _wanted(config: pytest.Config) -> bool:
    return bool(config.getoption("--fake-gs-coverage")) or config.getoption("--fake-gs-coverage-min") is not None


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: fold a finished worker's tally into the controller's."""
    data = getattr(node, "workeroutput", {}).get(WORKER_KEY)
    if data:
        node.config.stash[_TALLY].merge_json(data)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput"):
        config.workeroutput[WORKER_KEY] = config.stash[_TALLY].to_json()  # type: ignore[attr-defined]
        return
    minimum = config.getoption("--fake-gs-coverage-min")
    if minimum is not None and route_percent(config.stash[_TALLY]) < minimum and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not _wanted(config):
        return
    tally = config.stash[_TALLY]
    terminalreporter.section("fake_gs coverage")
    for line in report(tally):
        terminalreporter.write_line(line)
    minimum = config.getoption("--fake-gs-coverage-min")
    if minimum is not None:
        pct = route_percent(tally)
        verdict = "FAIL" if pct < minimum else "ok"
        terminalreporter.write_line(f"{verdict}: routes exercised {pct:.1f}% "
                                    f"(--fake-gs-coverage-min={minimum:g})")
