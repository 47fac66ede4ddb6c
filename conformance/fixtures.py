"""The suite's fixtures: the options, the target, its drivers, jobs and op surfaces.

Registered by the plugin (``conformance.plugin``'s ``pytest_plugins``). Session-scoped and
lazy: a session that never asks for ``gs_target`` starts no fake and opens no connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from conformance.options import GsOptions, gs_options
from conformance.reporting.violations import ClauseViolation
from conformance.target import EmbeddedFakes, ProbeError, Target, probe, remote_target

if TYPE_CHECKING:  # imported where first used: a session that needs none starts none
    from conformance.drivers.kit_client import ClientDriver, ClientOps
    from conformance.drivers.ops import Ops, RawOps
    from conformance.drivers.raw import Answer, RawDriver
    from conformance.jobs import JobBudget, JobLedger, SharedJob
    from fake_gs.testing.admin_api import AdminApi

#: What a property's fixture parameter holds, by fixture (the fixtures below say more).
Variant = Callable[..., Target]
NewJob = Callable[..., "tuple[str, Answer]"]
Source = Callable[[str], "tuple[RawDriver, RawOps]"]
Via = Callable[[str], "Ops"]


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
def gs_variant(gs_target: Target, gs_fakes: EmbeddedFakes) -> Variant:
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
def gs_raw(gs_target: Target, gs_opts: GsOptions) -> Iterator[RawDriver]:
    """The raw HTTP driver with the main token."""
    from conformance.drivers.raw import RawDriver

    driver = RawDriver(gs_target, timeout_s=gs_opts.request_timeout_s)
    yield driver
    driver.close()


@pytest.fixture(scope="session")
def gs_raw2(gs_target: Target) -> Iterator[RawDriver]:
    """The raw driver with the second token (skips without one)."""
    from conformance.drivers.raw import RawDriver

    if not gs_target.token2:
        pytest.skip("needs a second token (--gs-token2) for isolation clauses")
    driver = RawDriver(gs_target, token=gs_target.token2)
    yield driver
    driver.close()


@pytest.fixture(scope="session")
def gs_anon(gs_target: Target) -> Iterator[RawDriver]:
    """The raw driver sending no Authorization header at all."""
    from conformance.drivers.raw import RawDriver

    driver = RawDriver(gs_target, token=False)
    yield driver
    driver.close()


@pytest.fixture(scope="session")
def gs_budget(gs_opts: GsOptions) -> JobBudget:
    """Jobs the run may still create beyond the shared one."""
    from conformance.jobs import JobBudget

    limit = gs_opts.job_budget
    return JobBudget(None if limit is None else max(0, limit - (0 if gs_opts.job_id else 1)))


@pytest.fixture(scope="session")
def gs_ledger() -> Iterator[JobLedger]:
    """Jobs created by the run, cancelled when the session ends."""
    from conformance.jobs import JobLedger

    ledger = JobLedger()
    yield ledger
    ledger.cancel_all()


@pytest.fixture(scope="session")
def gs_job(gs_raw: RawDriver, gs_opts: GsOptions, gs_ledger: JobLedger) -> SharedJob:
    """The shared session job (created once, or ``--gs-job-id``), running.

    When it cannot be created or started, that failure is the run's root cause: every test
    that needs the job is skipped naming it (pytest keeps the session fixture's skip, so the
    job is tried once), and the report shows it once, red on the clause it breaks, with the
    exchange that shows it; tests needing no job are judged as usual."""
    from conformance.jobs import SetupFailed, start_shared_job
    from conformance.reporting.recorder import render_last
    from conformance.reporting.verdicts import root_cause_skip
    from conformance.runtime import RUNTIME
    from contract.redact import scrub_text

    try:
        job = start_shared_job(gs_raw, gs_opts.model, gs_opts.job_id, gs_opts.startup_timeout_s)
    except SetupFailed as exc:
        evidence = render_last() or str(exc.answer or "")
        pytest.skip(root_cause_skip(exc.clause, exc.summary, scrub_text(evidence, RUNTIME.secrets)))
    if job.created:
        gs_ledger.add(gs_raw, job.job_id)
    return job


#: The job id a property addresses when the session job could not be set up (a UUID no job has).
NO_SUCH_JOB = "00000000-0000-4000-8000-00000000c0de"


@pytest.fixture(scope="session")
def gs_job_id(request: pytest.FixtureRequest) -> str:
    """A job id to put in a path: the session job's, or, when it could not be set up, one no
    job has. For clauses judged before any job is looked up (auth, routing), so a failed
    set-up does not leave them unjudged; the set-up's failure is reported on its own."""
    try:
        job: SharedJob = request.getfixturevalue("gs_job")
    except pytest.skip.Exception:
        return NO_SUCH_JOB
    return job.job_id


@pytest.fixture(scope="session")
def gs_new_job(
    gs_raw: RawDriver, gs_budget: JobBudget, gs_ledger: JobLedger, gs_opts: GsOptions
) -> NewJob:
    """``gs_new_job(body=None, driver=None, wait=True, why='', cid=None)``: an extra job.

    Budgeted against a real URL; a refused creation fails on clause ``cid`` when given.

    Jobs on embedded variants cost nothing and are not budgeted.
    """
    from conformance.inputs.valid_bodies import small_job

    def create(
        body: dict[str, Any] | None = None,
        driver: RawDriver | None = None,
        wait: bool = True,
        why: str = "",
        cid: str | None = None,
    ) -> tuple[str, Answer]:
        drv = driver or gs_raw
        if not drv.target.embedded:
            gs_budget.take(1, why)
        ans = drv.create_job(body or small_job(gs_opts.model))
        job_id = ans.field("job_id")
        if not ans.ok or not isinstance(job_id, str):
            if cid:
                raise ClauseViolation([cid], f"could not create a job: {ans}")
            raise AssertionError(f"could not create a job: {ans}")
        gs_ledger.add(drv, job_id)
        if wait:
            ans, _ = drv.wait_job(job_id, timeout_s=gs_opts.startup_timeout_s)
        return job_id, ans

    return create


@pytest.fixture(scope="session")
def gs_admin(gs_target: Target) -> AdminApi:
    """The embedded fake's admin API (skips against a real URL)."""
    from conformance.fake_admin import admin_of

    if not gs_target.embedded:
        pytest.skip("needs the embedded fake's admin API; the target is a real URL")
    return admin_of(gs_target)


@pytest.fixture(scope="session")
def gs_ops(gs_raw: RawDriver, gs_job: SharedJob) -> RawOps:
    """The op surface over the raw driver, on the shared job."""
    from conformance.drivers.ops import RawOps

    return RawOps(gs_raw, gs_job)


@pytest.fixture(scope="session")
def gs_client(gs_target: Target, gs_job: SharedJob, gs_opts: GsOptions) -> Iterator[ClientDriver]:
    """The client-transport driver attached to the shared job."""
    from conformance.drivers.kit_client import ClientDriver

    driver = ClientDriver(gs_target, gs_job.job_id, model=gs_opts.model)
    yield driver
    driver.close()


@pytest.fixture(scope="session")
def gs_client_ops(gs_client: ClientDriver) -> ClientOps:
    from conformance.drivers.kit_client import ClientOps

    return ClientOps(gs_client)


@pytest.fixture
def gs_source(
    gs_target: Target, gs_variant: Variant, request: pytest.FixtureRequest
) -> Source:
    """``gs_source('inline'|'chunks')``: (driver, ops) whose results come in that form (a
    fake variant; against a URL the target itself, properties skip on another form)."""
    from conformance.judging.variants import source

    def get(form: str) -> tuple[RawDriver, RawOps]:
        ops = None if gs_target.embedded else request.getfixturevalue("gs_ops")
        return source(gs_target, gs_variant, ops, form)

    return get


@pytest.fixture
def gs_via(request: pytest.FixtureRequest) -> Via:
    """``gs_via('raw'|'client')``: the op surface of that driver (lazily built)."""

    def get(via: str) -> Ops:
        ops: Ops = request.getfixturevalue("gs_ops" if via == "raw" else "gs_client_ops")
        return ops

    return get
