"""The pytest plugin (entry point ``gs_conformance``): options, fixtures, per-clause results.

Loaded in every pytest session of the repo, so it is inert unless used: it registers
``--gs-*`` options and fixtures, starts no server until a fixture asks for one, and only
books and reports tests that live in ``conformance/properties``. Under pytest-xdist each
worker tags its reports with clause ids (``report.user_properties``) and the controller
books them, so the report is the same with or without ``-n``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance import report as reports
from conformance.cost import COST
from conformance.recorder import RECORDER, finish_run_tape, render_last, start_run_tape
from conformance.results import (
    PROP_CLAUSES,
    PROP_EXAMPLE,
    PROP_FAILED,
    ClauseBook,
    Outcome,
    RunResults,
    TestOutcome,
    clause_ids,
)
from conformance.runtime import RUNTIME
from conformance.target import (
    DELIVERIES,
    DIALECTS,
    ENGINES,
    PROFILES,
    STATUS_STYLES,
    EmbeddedFakes,
    GsOptions,
    ProbeError,
    Target,
    probe,
    remote_target,
)
from conformance.verdict import ClauseViolation
from contract.clauses import CLAUSES, clauses_of, for_profile

PROPERTIES_DIR = Path(__file__).resolve().parent / "properties"
_BOOK = pytest.StashKey[ClauseBook]()
_RESULTS = pytest.StashKey[RunResults]()
_STARTED = pytest.StashKey[float]()
_OPTIONS = pytest.StashKey[GsOptions]()


# --- options ---------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("gs-conformance", "Cortex Training conformance suite")
    g.addoption("--gs-url", help="Server base URL (absent: start the fake in-process).")
    g.addoption("--gs-token", help="PAT for the target (default: $GS_TOKEN).")
    g.addoption("--gs-token2", help="A second account's token, for isolation clauses.")
    g.addoption("--gs-database", default=GsOptions.database)
    g.addoption("--gs-schema", default=GsOptions.schema)
    g.addoption("--gs-endpoint", default=GsOptions.endpoint)
    g.addoption(
        "--gs-profile",
        default=GsOptions.profile,
        choices=PROFILES,
        help="Clauses to judge: current, proposed (current + proposed) or semantic.",
    )
    g.addoption("--gs-job-id", help="Reuse this running job instead of creating one.")
    g.addoption("--gs-model", default=None, help="Model of created jobs (default: the smallest).")
    g.addoption(
        "--gs-examples",
        type=int,
        default=None,
        help="Hypothesis examples per property (default 25 on the fake, 5 on a URL).",
    )
    g.addoption("--gs-report", help="Write the report here (.html, .md, .json, else text).")
    g.addoption("--gs-junit", help="Write JUnit XML with one testcase per clause.")
    g.addoption("--gs-json", help="Write the per-clause results as JSON.")
    g.addoption("--gs-clauses", help="Only run properties checking these clauses (A,B or CG-*).")
    g.addoption("--gs-mutant", help="Embedded fake only: run it with this mutant.")
    g.addoption(
        "--gs-engine", default=GsOptions.engine, choices=ENGINES, help="Embedded fake engine."
    )
    g.addoption(
        "--gs-max-jobs",
        type=int,
        default=None,
        help="Jobs the run may create (default: 1 against a URL, unlimited on the fake).",
    )
    g.addoption(
        "--gs-status-style",
        default=GsOptions.status_style,
        choices=STATUS_STYLES,
        help="Embedded fake: status spelling dialect.",
    )
    g.addoption(
        "--gs-delivery",
        default=GsOptions.delivery,
        choices=DELIVERIES,
        help="Embedded fake: result delivery form.",
    )
    g.addoption(
        "--gs-dialect",
        default=GsOptions.dialect,
        choices=DIALECTS,
        help="Embedded fake: answer forms, kit (its own) or spec (the other forms the spec allows).",
    )
    g.addoption(
        "--gs-randomize",
        action="store_true",
        help="Randomise hypothesis (default: derandomised, reproducible runs).",
    )
    g.addoption(
        "--gs-no-shrink",
        action="store_true",
        help="Skip hypothesis shrinking (fast self-tests; failing examples are not minimal).",
    )
    g.addoption(
        "--gs-require-all",
        action="store_true",
        help="Fail on every skipped MUST clause too (default: only red clauses fail a run; "
        "a skipped clause is one this target cannot be judged on).",
    )
    g.addoption(
        "--gs-record",
        metavar="FILE",
        help="Record every HTTP exchange of the run to this parity tape (JSON lines; "
        "replay it with gs-parity). Under xdist each worker's stream is appended in turn.",
    )
    g.addoption(
        "--gs-plan",
        help="Only plan: write, as JSON, whether each clause can be judged on this target "
        "with these options (and why not), then run nothing.",
    )
    g.addoption(
        "--gs-max-result-mib",
        type=int,
        default=GsOptions.max_result_mib,
        help="Size cap (MiB) of the one large result a URL run asks for, so delivery in "
        "result chunks is judged (default 64: just past the 60 MiB body bound).",
    )
    g.addoption(
        "--gs-startup-timeout",
        type=float,
        default=GsOptions.startup_timeout_s,
        help="Seconds to wait for the session job to be running.",
    )


def gs_options(config: pytest.Config) -> GsOptions:
    cached = config.stash.get(_OPTIONS, None)
    if cached is not None:
        return cached
    opt = config.getoption
    from contract.models_catalog import SMALLEST_TRAINING_MODEL

    options = GsOptions(
        url=opt("--gs-url") or None,
        token=opt("--gs-token") or None,
        token2=opt("--gs-token2") or None,
        database=opt("--gs-database"),
        schema=opt("--gs-schema"),
        endpoint=opt("--gs-endpoint"),
        profile=opt("--gs-profile"),
        job_id=opt("--gs-job-id") or None,
        model=opt("--gs-model") or SMALLEST_TRAINING_MODEL,
        examples=opt("--gs-examples"),
        report=opt("--gs-report"),
        junit=opt("--gs-junit"),
        json=opt("--gs-json"),
        clauses=clause_ids(opt("--gs-clauses")),
        mutant=opt("--gs-mutant") or None,
        engine=opt("--gs-engine"),
        max_jobs=opt("--gs-max-jobs"),
        status_style=opt("--gs-status-style"),
        delivery=opt("--gs-delivery"),
        dialect=opt("--gs-dialect"),
        startup_timeout_s=opt("--gs-startup-timeout"),
        require_all=bool(opt("--gs-require-all")),
        max_result_mib=opt("--gs-max-result-mib"),
    )
    config.stash[_OPTIONS] = options
    return options


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
    RUNTIME.randomize = bool(config.getoption("--gs-randomize"))
    RUNTIME.shrink = not config.getoption("--gs-no-shrink")
    config.stash[_BOOK] = ClauseBook()
    config.stash[_STARTED] = time.monotonic()
    start_run_tape(config, options)
    if not _is_worker(config):
        config.pluginmanager.register(_Booker(config), "gs-conformance-booker")


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


# --- recording -------------------------------------------------------------------------------


def pytest_runtest_setup(item: pytest.Item) -> None:
    if is_property(item):
        RECORDER.clear()
        if RECORDER.tape is not None:
            RECORDER.tape.group = item.nodeid



def _example(excinfo: Any) -> str:
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
    return "\n\n".join(parts)[:12000]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome: Any = yield
    if not is_property(item):
        return
    rep = outcome.get_result()
    ids = item_clauses(item)
    if not ids:
        return
    rep.user_properties.append((PROP_CLAUSES, ",".join(ids)))
    if rep.failed:
        exc = call.excinfo.value if call.excinfo else None
        failed = exc.clauses if isinstance(exc, ClauseViolation) else ()
        failed = tuple(c for c in failed if c in ids) or failed
        rep.user_properties.append((PROP_FAILED, ",".join(failed)))
        rep.user_properties.append((PROP_EXAMPLE, _example(call.excinfo)))


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
    return text.removeprefix("Skipped: ").strip()


class _Booker:
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
        self.config.stash[_BOOK].book(
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


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED] = time.monotonic()
    COST.reset()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    RECORDER.stop_tape()
    if _is_worker(config):
        return
    finish_run_tape(config)
    book = config.stash.get(_BOOK, None)
    if book is None or not book.outcomes:
        return
    options = gs_options(config)
    target = options.url or "embedded fake"
    results = book.results(
        options.profile,
        target,
        selected=options.clauses,
        duration_s=time.monotonic() - config.stash.get(_STARTED, time.monotonic()),
        settings=options.describe(),
        url=not options.embedded,
        require_all=options.require_all,
    )
    if not options.embedded:
        results.cost = COST.summary() | ({"reused_job": options.job_id} if options.job_id else {})
    config.stash[_RESULTS] = results
    for path in (
        options.report,
        options.junit and _as_xml(options.junit),
        options.json and _as_json(options.json),
    ):
        if path:
            reports.write(results, path)


def _as_xml(path: str) -> str:
    return path if path.lower().endswith(".xml") else path + ".xml"


def _as_json(path: str) -> str:
    return path if path.lower().endswith(".json") else path + ".json"


def results_of(config: pytest.Config) -> RunResults | None:
    """The run's per-clause results (controller only, after the session finished)."""
    return config.stash.get(_RESULTS, None)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    results = results_of(config)
    if results is None:
        return
    colour = getattr(terminalreporter, "isatty", False) and os.environ.get("NO_COLOR") is None
    terminalreporter.write_sep("=", "gs-conformance clauses")
    terminalreporter.write_line(reports.text(results, colour=bool(colour)))


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def gs_opts(pytestconfig: pytest.Config) -> GsOptions:
    """The parsed ``--gs-*`` options."""
    return gs_options(pytestconfig)


@pytest.fixture(scope="session")
def gs_fakes(gs_opts: GsOptions) -> Iterator[EmbeddedFakes]:
    """Embedded fakes, started on first use (none against a real URL)."""
    fakes = EmbeddedFakes(gs_opts)
    yield fakes
    fakes.close()


@pytest.fixture(scope="session")
def gs_target(gs_opts: GsOptions, gs_fakes: EmbeddedFakes) -> Target:
    """The server under test: the URL given, or the embedded fake."""
    if gs_opts.embedded:
        return gs_fakes.start()
    try:
        probe(gs_opts.url or "")
    except ProbeError as exc:
        pytest.exit(str(exc), returncode=3)
    return remote_target(gs_opts)


@pytest.fixture(scope="session")
def gs_variant(gs_target: Target, gs_fakes: EmbeddedFakes) -> Callable[..., Target]:
    """``gs_variant(name, **fake_settings)``: an extra embedded fake in another dialect.

    Skips against a real URL: the variation is a setting of the fake, not of the server.
    """

    def start(name: str = "variant", **overrides: Any) -> Target:
        if not gs_target.embedded:
            pytest.skip(
                f"needs an embedded fake with {overrides or name}; the target is a real URL"
            )
        return gs_fakes.start(name, **overrides)

    return start


@pytest.fixture(scope="session")
def gs_raw(gs_target: Target, gs_opts: GsOptions) -> Iterator[Any]:
    """The raw HTTP driver with the main token."""
    from conformance.driver_raw import RawDriver

    driver = RawDriver(gs_target, timeout_s=gs_opts.request_timeout_s)
    yield driver
    driver.close()


@pytest.fixture(scope="session")
def gs_raw2(gs_target: Target) -> Iterator[Any]:
    """The raw driver with the second token (skips without one)."""
    from conformance.driver_raw import RawDriver

    if not gs_target.token2:
        pytest.skip("needs a second token (--gs-token2) for isolation clauses")
    driver = RawDriver(gs_target, token=gs_target.token2)
    yield driver
    driver.close()


@pytest.fixture(scope="session")
def gs_anon(gs_target: Target) -> Iterator[Any]:
    """The raw driver sending no Authorization header at all."""
    from conformance.driver_raw import RawDriver

    driver = RawDriver(gs_target, token=False)
    yield driver
    driver.close()


@pytest.fixture(scope="session")
def gs_budget(gs_opts: GsOptions) -> Any:
    """Jobs the run may still create beyond the shared one."""
    from conformance.jobs import JobBudget

    limit = gs_opts.job_budget
    return JobBudget(None if limit is None else max(0, limit - (0 if gs_opts.job_id else 1)))


@pytest.fixture(scope="session")
def gs_ledger() -> Iterator[Any]:
    """Jobs created by the run, cancelled when the session ends."""
    from conformance.jobs import JobLedger

    ledger = JobLedger()
    yield ledger
    ledger.cancel_all()


@pytest.fixture(scope="session")
def gs_job(gs_raw: Any, gs_opts: GsOptions, gs_ledger: Any) -> Any:
    """The shared session job (created once, or ``--gs-job-id``), running."""
    from conformance.jobs import start_shared_job

    try:
        job = start_shared_job(gs_raw, gs_opts.model, gs_opts.job_id, gs_opts.startup_timeout_s)
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    if job.created:
        gs_ledger.add(gs_raw, job.job_id)
    return job


@pytest.fixture(scope="session")
def gs_new_job(
    gs_raw: Any, gs_budget: Any, gs_ledger: Any, gs_opts: GsOptions
) -> Callable[..., Any]:
    """``gs_new_job(body=None, driver=None, wait=True, why='', cid=None)``: an extra job.

    Budgeted against a real URL; a refused creation fails on clause ``cid`` when given.

    Jobs on embedded variants cost nothing and are not budgeted.
    """
    from conformance.bodies import small_job

    def create(
        body: dict[str, Any] | None = None,
        driver: Any = None,
        wait: bool = True,
        why: str = "",
        cid: str | None = None,
    ) -> tuple[str, Any]:
        drv = driver or gs_raw
        if not drv.target.embedded:
            gs_budget.take(1, why)
        ans = drv.create_job(body or small_job(gs_opts.model))
        job_id = ans.field("job_id")
        if ans.status != 200 or not isinstance(job_id, str):
            if cid:
                raise ClauseViolation([cid], f"could not create a job: {ans}")
            raise AssertionError(f"could not create a job: {ans}")
        gs_ledger.add(drv, job_id)
        if wait:
            ans, _ = drv.wait_job(job_id, timeout_s=gs_opts.startup_timeout_s)
        return job_id, ans

    return create


@pytest.fixture(scope="session")
def gs_admin(gs_target: Target) -> Any:
    """The embedded fake's admin API (skips against a real URL)."""
    from conformance.fake_admin import FakeAdmin

    if not gs_target.embedded:
        pytest.skip("needs the embedded fake's admin API; the target is a real URL")
    return FakeAdmin(gs_target)


@pytest.fixture(scope="session")
def gs_ops(gs_raw: Any, gs_job: Any) -> Any:
    """The op surface over the raw driver, on the shared job."""
    from conformance.ops import RawOps

    return RawOps(gs_raw, gs_job)


@pytest.fixture(scope="session")
def gs_client(gs_target: Target, gs_job: Any, gs_opts: GsOptions) -> Iterator[Any]:
    """The client-transport driver attached to the shared job."""
    from conformance.driver_client import ClientDriver

    driver = ClientDriver(gs_target, gs_job.job_id, model=gs_opts.model)
    yield driver
    driver.close()


@pytest.fixture(scope="session")
def gs_client_ops(gs_client: Any) -> Any:
    from conformance.driver_client import ClientOps

    return ClientOps(gs_client)


@pytest.fixture
def gs_source(
    gs_target: Target, gs_variant: Any, request: pytest.FixtureRequest
) -> Callable[[str], Any]:
    """``gs_source('inline'|'chunks')``: (driver, ops) whose results come in that form (a
    fake variant; against a URL the target itself, properties skip on another form)."""
    from conformance.variants import source

    def get(form: str) -> Any:
        ops = None if gs_target.embedded else request.getfixturevalue("gs_ops")
        return source(gs_target, gs_variant, ops, form)

    return get


@pytest.fixture
def gs_via(request: pytest.FixtureRequest) -> Callable[[str], Any]:
    """``gs_via('raw'|'client')``: the op surface of that driver (lazily built)."""

    def get(via: str) -> Any:
        return request.getfixturevalue("gs_ops" if via == "raw" else "gs_client_ops")

    return get


@pytest.fixture(scope="session")
def gs_examples(gs_opts: GsOptions) -> int:
    return gs_opts.n_examples


def all_clause_ids() -> list[str]:
    return list(CLAUSES)
