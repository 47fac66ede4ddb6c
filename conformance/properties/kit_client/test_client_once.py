"""CLIENT-ONCE: the kit's client runs each state-changing call at most once.

Judged against clean embedded fakes (the fake's fault rules, and a loopback
:class:`~conformance.drivers.faultproxy.FaultProxy` that loses, cuts and delays exchanges),
comparing what the fake executed (``/_fake/state``) with what the client reported. A
client mutant of ``fake_gs.controls.mutants`` (``client=True``) given with ``--gs-mutant`` is
applied to the client driven here, so the self-test proves these properties have teeth.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from client.config import ClientConfig
from client.errors import AmbiguousOutcome
from client.rest import CortexRestClient
from conformance.drivers.faultproxy import Action, FaultProxy
from conformance.fake_admin import admin_of
from conformance.fixtures import Variant
from conformance.inputs.strategies import tensor
from conformance.judging.at_most_once import (
    CURRENT_ROUTES,
    FAST_CLIENT,
    PROPOSED_ROUTES,
    client_mutant_seams,
    measure,
    open_job,
)
from conformance.judging.checks import kit_form
from conformance.options import GsOptions
from conformance.properties.kit_client import CLEAN
from conformance.reporting.violations import Soft, expect
from conformance.target import Target
from contract.clauses import checks
from contract.idempotency import IDEMPOTENCY_KEY_HEADER
from contract.routes import ROUTES
from fake_gs.testing.admin_api import AdminApi

CALLS = 4
#: The POSTs' fates, in order: every fault kind, each followed by clean exchanges.
SCRIPT: list[Action] = [
    "drop_after", "pass", "reset", "pass", "drop_before", "pass", "delay", "pass",
    "drop_after", "drop_after", "pass", "reset", "pass", "drop_after", "pass", "delay",
]
#: The proxy's late answers come after the client's read time-out; only POSTs meet faults.
PROXY_DELAY_S = 0.9


def _posts(method: str, path: str) -> bool:
    return method == "POST"


TIMING = {"read_timeout_s": 0.5}
#: Polls answer at once (no long poll past the client's short read time-out).
FAKE = {"poll_wait_s": 0.02, **CLEAN}


def _client_mutant(gs_opts: Any) -> str | None:
    from fake_gs.controls.mutants import MUTANTS

    name = gs_opts.mutant
    return name if name and MUTANTS[name].client else None


def _config(target: Any, **extra: Any) -> dict[str, Any]:
    return {"database": target.database, "schema_name": target.schema, "endpoint": target.endpoint,
            "pat": target.token, **TIMING, **extra}


def _rest(target: Any, gs_opts: Any, **extra: Any) -> CortexRestClient:
    return CortexRestClient(ClientConfig(base_url=target.base_url,
                                         **{**FAST_CLIENT, **_config(target, **extra)}),
                            **client_mutant_seams(_client_mutant(gs_opts)))


@pytest.fixture
def once_fake(
    gs_variant: Variant, gs_opts: GsOptions, request: pytest.FixtureRequest
) -> Iterator[tuple[Target, AdminApi, str]]:
    """(target, admin, job id) of a clean fake in the profile the test asks for."""
    target = gs_variant(f"once-{request.param}", profile=request.param, **FAKE)
    admin = admin_of(target)
    job = open_job(target.base_url, gs_opts.model, **_config(target))
    yield target, admin, job
    admin.clear_faults()


def _steps(admin: AdminApi, job: str) -> int:
    return int(admin.job_state(job)["global_steps"])


def _settled_steps(admin: AdminApi, job: str, within_s: float = 30.0) -> int:
    """The job's global_steps once no accepted request waits for its worker.

    A lost answer means the step was queued, not yet run: on a loaded machine the worker
    may not have reached it when the client gives up.
    """
    deadline = time.monotonic() + within_s
    while admin.state()["requests"]["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    return _steps(admin, job)


FAULTS: dict[str, dict[str, Any]] = {
    "lose_answer": {"lose_answer": True},
    "502": {"status": 502, "code": "bad_gateway"},
    "timeout": {"delay_s": 0.9},
}


@checks("CLIENT-ONCE-1")
@pytest.mark.parametrize("once_fake", ["current"], indirect=True)
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_ambiguous_step_is_not_resent(
    once_fake: tuple[Target, AdminApi, str], gs_opts: GsOptions, fault: str
) -> None:
    """A step whose answer is lost, 502 or timed out raises AmbiguousOutcome, unsent again."""
    target, admin, job = once_fake
    admin.set_faults([{"route": "step", "times": 1, **FAULTS[fault]}])
    before = _steps(admin, job)
    rest = _rest(target, gs_opts)
    with pytest.raises(AmbiguousOutcome) as info:
        rest.step(job)
    err, rule = info.value, admin.faults()[0]
    soft = Soft()
    soft.expect("CLIENT-ONCE-1", rule.get("seen") == 1,
                f"the step reached the server {rule.get('seen')} times after a {fault}")
    soft.expect("CLIENT-ONCE-1", err.route == "step" and err.attempt == 1 and err.how_to_check,
                f"AmbiguousOutcome names route {err.route!r}, attempt {err.attempt!r}")
    if fault == "502":  # named when the answer carried one (spec §2.4: it may not)
        soft.expect("CLIENT-ONCE-1", (err.snowflake_request_id is None and not kit_form("ADDR-REQID-1"))
                    or f"x-snowflake-request-id={err.snowflake_request_id}" in str(err),
                    f"the 502's x-snowflake-request-id is missing from {err}")
    if fault == "lose_answer":
        after = _settled_steps(admin, job)
        soft.expect("CLIENT-ONCE-1", after == before + 1,
                    f"global_steps {before} -> {after} for one lost step")
    rest.close()
    soft.check()


@checks("CLIENT-ONCE-2")
@pytest.mark.parametrize("once_fake", ["current"], indirect=True)
def test_calls_that_never_ran_or_are_idempotent_are_retried(
    once_fake: tuple[Target, AdminApi, str], gs_opts: GsOptions
) -> None:
    """429s, 503 + Retry-After, cut reads and a lost forward-backward answer are retried."""
    target, admin, job = once_fake
    rest = _rest(target, gs_opts)
    soft = Soft()
    before = _steps(admin, job)
    admin.set_faults([{"route": "step", "times": 2, "status": 429, "retry_after": 0.01},
                      {"route": "save", "times": 1, "status": 503, "retry_after": 0.01},
                      {"route": "get_job", "times": 2, "drop": True}])
    step = rest.result(job, rest.step(job), route_name="step")
    soft.expect("CLIENT-ONCE-2", step.get("global_steps") == before + 1, f"step {step!r}")
    save = rest.result(job, rest.save(job), route_name="save")
    soft.expect("CLIENT-ONCE-2", bool(save.get("checkpoint_id")), f"save {save!r}")
    soft.expect("CLIENT-ONCE-2", rest.get_job(job).get("job_id") == job, "get_job after cut reads")
    fired = [r.get("fired") for r in admin.faults()]
    soft.expect("CLIENT-ONCE-2", fired == [2, 1, 2], f"faults fired {fired}, want [2, 1, 2]")
    admin.set_faults([{"route": "forward_backward", "chunk": "final", "lose_answer": True,
                       "times": 1}])
    fb_before = admin.fb_executions(job)
    rest.result(job, rest.forward_backward(job, {"input_ids": tensor((1, 5), "int64", 3)}),
                route_name="forward_backward")
    soft.expect("CLIENT-ONCE-2", admin.fb_executions(job) == fb_before + 1,
                f"forward-backward ran {admin.fb_executions(job) - fb_before} times for one call")
    rest.close()
    soft.check()


def _judge(out: dict[str, Any], cid: str, *, keyed: bool) -> Soft:
    soft = Soft()
    for name, tally in out.items():
        figures = {k: v for k, v in tally.public().items() if k != "errors"}
        soft.expect(cid, tally.duplicates == 0 and tally.phantom == 0,
                    f"{name}: a call ran twice or a success did not run: {figures}")
        soft.expect(cid, tally.unflagged == 0,
                    f"{name}: a call ran without success and without AmbiguousOutcome: "
                    f"{figures} {tally.errors}")
        if keyed:
            soft.expect(cid, tally.executions == tally.succeeded + tally.poll_errors == tally.calls,
                        f"{name}: with keys every call should succeed exactly once: {figures} "
                        f"{tally.errors}")
    return soft


@checks("CLIENT-ONCE-1")
@pytest.mark.parametrize("once_fake", ["current"], indirect=True)
def test_current_profile_through_fault_proxy(
    once_fake: tuple[Target, AdminApi, str], gs_opts: GsOptions
) -> None:
    """Without keys, through lost, cut and late answers: nothing runs twice, and every
    call that ran without a success raised AmbiguousOutcome."""
    target, admin, job = once_fake
    with FaultProxy(target.base_url, script=SCRIPT, delay_s=PROXY_DELAY_S, match=_posts) as proxy:
        out = measure(target.base_url, job, proxy, CURRENT_ROUTES, CALLS,
                      admin_headers=target.admin_headers(), mutant=_client_mutant(gs_opts),
                      **_config(target))
    soft = _judge(out, "CLIENT-ONCE-1", keyed=False)
    ambiguous = sum(t.ambiguous for t in out.values())
    soft.expect("CLIENT-ONCE-1", ambiguous > 0, "no fault reached the client: the proxy did nothing")
    soft.check()


DATA_PLANE_PATHS = tuple(r.path.rsplit("/", 1)[-1] for r in ROUTES if r.keyed)


@checks("CLIENT-ONCE-3")
@pytest.mark.parametrize("once_fake", ["proposed"], indirect=True)
def test_keys_make_resends_safe(
    once_fake: tuple[Target, AdminApi, str], gs_opts: GsOptions
) -> None:
    """With keys (proposed), through the same faults: every call succeeds and runs once, and
    every data-plane POST the server saw an answer to carried a key."""
    target, admin, job = once_fake
    seen: list[tuple[str, str, str | None]] = []

    def record(response: requests.Response, *args: Any, **kwargs: Any) -> None:
        sent = response.request
        tail = urlsplit(sent.url or "").path.rsplit("/", 1)[-1]
        seen.append((sent.method or "", tail, sent.headers.get(IDEMPOTENCY_KEY_HEADER)))

    session = requests.Session()
    session.hooks["response"].append(record)
    with FaultProxy(target.base_url, script=SCRIPT, delay_s=PROXY_DELAY_S, match=_posts) as proxy:
        out = measure(target.base_url, job, proxy, PROPOSED_ROUTES, CALLS, session=session,
                      admin_headers=target.admin_headers(), mutant=_client_mutant(gs_opts),
                      **_config(target, supports_idempotency_keys=True))
    soft = _judge(out, "CLIENT-ONCE-3", keyed=True)
    posts = [s for s in seen if s[0] == "POST" and s[1] in DATA_PLANE_PATHS]
    keyless = [s for s in posts if not s[2]]
    soft.expect("CLIENT-ONCE-3", posts and not keyless,
                f"{len(keyless)} of {len(posts)} data-plane POSTs went without {IDEMPOTENCY_KEY_HEADER}")
    soft.check()


@checks("CLIENT-ONCE-3")
@pytest.mark.parametrize("once_fake", ["proposed"], indirect=True)
def test_key_support_is_learnt_and_used(
    once_fake: tuple[Target, AdminApi, str], gs_opts: GsOptions
) -> None:
    """A client that was not told learns key support from the echo, then resends a lost
    step with its key: the step runs once."""
    target, admin, job = once_fake
    rest = _rest(target, gs_opts)
    rest.result(job, rest.step(job), route_name="step")
    expect("CLIENT-ONCE-3", rest.http.keys_supported,
           "the server echoed Idempotency-Key but the client did not learn it honours keys")
    admin.set_faults([{"route": "step", "times": 1, "lose_answer": True}])
    before = _steps(admin, job)
    result = rest.result(job, rest.step(job), route_name="step")
    after = _steps(admin, job)
    rest.close()
    expect("CLIENT-ONCE-3", after == before + 1 and result.get("global_steps") == after,
           f"global_steps {before} -> {after} (answer {result!r}) for one step whose answer was lost")
