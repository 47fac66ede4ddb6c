"""AUTH: the bearer token is required and checked, and one account cannot see another's jobs."""

from __future__ import annotations

import secrets
import string

import pytest

from conformance.drivers.raw import RawDriver, encode
from conformance.inputs import valid_bodies
from conformance.jobs import JobBudget, JobLedger, SharedJob
from conformance.judging.checks import refused
from conformance.options import GsOptions
from conformance.reporting.violations import Soft, expect
from conformance.target import Target
from contract.auth import TOKEN_TYPE, TOKEN_TYPE_HEADER, unrelated_token
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.states import is_job_terminal, normalize_job_state


def _needs_auth(target: Target) -> None:
    if not target.token:
        pytest.skip("no token given (--gs-token / GS_TOKEN): the auth clauses need one")


def _all_unauthenticated(driver: RawDriver, job_id: str, cid: str) -> None:
    """Control and data plane calls of ``driver`` answer 401 unauthenticated (``cid``)."""
    soft = Soft()
    for ans in (
        driver.call("get_capacity"),
        driver.call("list_jobs"),
        driver.get_job(job_id),
        driver.call("step", json_body={}, job_id=job_id),
    ):
        refused(ans, soft, cid, codes=[ErrorCode.UNAUTHENTICATED], statuses=[401])
    soft.check()


@checks("AUTH-REQUIRED-1")
@pytest.mark.gs_needs_token
def test_missing_token_is_refused(gs_target: Target, gs_anon: RawDriver, gs_job_id: str) -> None:
    """No Authorization header: 401 unauthenticated, on control and data plane."""
    _needs_auth(gs_target)
    _all_unauthenticated(gs_anon, gs_job_id, "AUTH-REQUIRED-1")


@checks("AUTH-REQUIRED-2")
@pytest.mark.gs_needs_token
def test_wrong_token_is_refused(gs_target: Target, gs_job_id: str) -> None:
    """A token the service does not know: 401 unauthenticated."""
    _needs_auth(gs_target)
    wrong = RawDriver(gs_target, token=unrelated_token(gs_target.token or ""))
    try:
        _all_unauthenticated(wrong, gs_job_id, "AUTH-REQUIRED-2")
    finally:
        wrong.close()


@checks("AUTH-HEADERS-1")
@pytest.mark.gs_needs_token
def test_pat_headers_are_accepted(gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """Bearer PAT + X-Snowflake-Authorization-Token-Type: PROGRAMMATIC_ACCESS_TOKEN works."""
    _needs_auth(gs_target)
    soft = Soft()
    sent = gs_raw.session.headers
    soft.expect(
        "AUTH-HEADERS-1",
        sent.get(TOKEN_TYPE_HEADER) == TOKEN_TYPE,
        "driver misconfigured: no token-type header",
    )
    for ans in (
        gs_raw.call("get_capacity"),
        gs_raw.call("list_jobs"),
        gs_raw.get_job(gs_job.job_id),
    ):
        soft.expect("AUTH-HEADERS-1", ans.ok, f"PAT call refused: {ans}")
    soft.check()


@checks("AUTH-ISOLATION-1")
def test_other_accounts_jobs_are_invisible(gs_raw2: RawDriver, gs_job: SharedJob) -> None:
    """Another token gets 404 for the job id, and the job is absent from its list."""
    soft = Soft()
    refused(gs_raw2.get_job(gs_job.job_id), soft, "AUTH-ISOLATION-1", statuses=[404])
    listed = gs_raw2.call("list_jobs")
    ids = [j.get("job_id") for j in listed.field("jobs", []) or [] if isinstance(j, dict)]
    soft.expect("AUTH-ISOLATION-1", listed.ok, f"list with the second token: {listed}")
    soft.expect(
        "AUTH-ISOLATION-1",
        gs_job.job_id not in ids,
        "the first token's job is listed for the second token",
    )
    refused(
        gs_raw2.call("get_experiment_run", job_id=gs_job.job_id),
        soft,
        "AUTH-ISOLATION-1",
        statuses=[404],
    )
    soft.check()


@checks("AUTH-ISOLATION-2")
def test_other_accounts_data_plane_is_404(
    gs_raw: RawDriver, gs_raw2: RawDriver, gs_job: SharedJob
) -> None:
    """Data-plane calls and polls on another token's job answer 404."""
    jid = gs_job.job_id
    mine = gs_raw.call("step", json_body={}, job_id=jid)
    rid = mine.field("request_id")
    soft = Soft()
    attempts = [
        gs_raw2.call("step", json_body={}, job_id=jid),
        gs_raw2.call("save", json_body={}, job_id=jid),
        gs_raw2.call("list_checkpoints", job_id=jid),
        gs_raw2.operation(jid, {"operation_type": "tail-logs", "payload": {}}),
        gs_raw2.call("generate", data=encode({"prompts": ["x"]}), job_id=jid),
    ]
    if isinstance(rid, str):
        attempts.append(gs_raw2.poll(jid, rid))
        gs_raw.settle(jid, rid)
    for ans in attempts:
        refused(ans, soft, "AUTH-ISOLATION-2", statuses=[404])
    soft.check()


def _same_shape(job_id: str) -> str:
    """A fresh id shaped like ``job_id``: each hex digit replaced by a random one."""
    return "".join(secrets.choice("0123456789abcdef") if c in string.hexdigits else c for c in job_id)


@checks("AUTH-ISOLATION-3")
def test_another_accounts_job_id_is_no_conflict(
    gs_target: Target,
    gs_raw: RawDriver,
    gs_raw2: RawDriver,
    gs_opts: GsOptions,
    gs_budget: JobBudget,
    gs_ledger: JobLedger,
) -> None:
    """The second token creating a job with a job id of the first token's gets what a free id
    of that shape gets (a 409 for it alone would say the other account's job exists), and
    the first token's job carries on. A job of its own: the second token now holds that id."""
    if not gs_target.embedded:
        gs_budget.take(2, "a job, and another account's under its id")
    body = valid_bodies.small_job(str(gs_opts.model))
    first = gs_raw.create_job(body)
    theirs = first.field("job_id")
    expect("AUTH-ISOLATION-3", first.ok and isinstance(theirs, str), f"create with the first token: {first}")
    gs_ledger.add(gs_raw, theirs)
    taken = gs_raw2.create_job({**body, "job_id": theirs})
    soft = Soft()
    if taken.ok and isinstance(taken.field("job_id"), str):
        gs_ledger.add(gs_raw2, taken.field("job_id"))
    elif not taken.ok:
        free = gs_raw2.create_job({**body, "job_id": _same_shape(theirs)})
        if free.ok and isinstance(free.field("job_id"), str):
            gs_ledger.add(gs_raw2, free.field("job_id"))
        # The same answer, up to the forms of one refusal spec §3.6 allows (400 or 422 for a
        # validation failure): a 409 for the taken id alone is the tell.
        same = taken.status == free.status or {taken.status, free.status} == {400, 422}
        soft.expect("AUTH-ISOLATION-3", same and taken.status != 409,
                    f"create with another account's job id: {taken}; with a free id of that shape: {free}")
    after = gs_raw.get_job(theirs)
    status = normalize_job_state(after.field("status"))
    soft.expect("AUTH-ISOLATION-3", after.ok and after.field("job_id") == theirs
                and not is_job_terminal(status),
                f"the first token's job after the second token's create: {after}")
    soft.check()
