"""At most once, whatever the faults: a property over fault schedules.

For any schedule drawn from {transient statuses, dropped connections, one lost chunk
group, a lost final answer} (plus, now and then, a fault on create-job), a client
forward-backward either returns the right result with the fake's execution counter at
exactly one, or - only when the schedule exceeds the retry budget - raises a typed error
with at most one execution; create-job never makes two jobs. A schedule whose faults fit
the budget (no more than ``RETRIES`` failures in all, at most one lost group) must succeed.

The fake runs in-process; results are DSSST1 frames delivered as result chunks one event
per page, so faults on polls hit cursor re-reads too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stress_helpers import Admin, job_body, rest_client

from client.errors import CortexError
from client.rest import CortexRestClient
from fake_gs import FakeServer, start_in_background

RETRIES = 4
SEED = 1234
CHUNK_BYTES = 8192 + 8192
#: The batch: [8, 512] int64 input ids (32 KiB, so 3 request chunks) and logprobs asked for.
BATCH, SEQ = 8, 512
TRANSIENT = [404, 409, 429, 500, 502, 503, 504]
ROUTES = ["forward_backward", "get_request", "get_job"]


def payload() -> dict[str, Any]:
    ids = torch.arange(BATCH * SEQ, dtype=torch.int64).reshape(BATCH, SEQ) % 1000
    return {"args": [], "kwargs": {"input_ids": ids}, "processing": {"post": ["logprobs"]}}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    server = start_in_background(result_delivery="chunks", result_chunk_bytes=8192 + 4096,
                                 log_level="critical", seed=9)
    yield server
    server.stop()


def run_forward_backward(client: CortexRestClient, job_id: str) -> dict[str, Any]:
    answer = client.forward_backward(job_id, payload(), max_chunk_bytes=CHUNK_BYTES)
    return dict(client.wait(job_id, answer["request_id"], route_name="forward_backward"))


@pytest.fixture(scope="module")
def reference(fake: FakeServer) -> dict[str, Any]:
    """The fault-free result for a fresh job with the same seed."""
    client = rest_client(fake.base_url, max_events=1)
    job_id = client.create_job(job_body(SEED))["job_id"]
    client.wait_running(job_id)
    out = run_forward_backward(client, job_id)
    client.cancel_job(job_id)
    return out


@st.composite
def schedules(draw: st.DrawFn) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    failures = 0
    for _ in range(draw(st.integers(0, 3))):
        # A burst: `times` consecutive failures from the (after+1)-th call of a route on, so
        # one logical call (a chunk, a poll) may need up to `times` retries.
        route = draw(st.sampled_from(ROUTES))
        kind = draw(st.sampled_from([*TRANSIENT, "drop"]))
        times = draw(st.integers(1, RETRIES + 2))
        rule: dict[str, Any] = {"route": route, "after": draw(st.integers(0, 4)), "times": times}
        rule.update({"drop": True} if kind == "drop" else {"status": kind})
        rules.append(rule)
        failures += times
    lost_group = draw(st.one_of(st.none(), st.integers(1, 2), st.just("final")))
    if lost_group is not None:
        rules.append({"route": "forward_backward", "chunk": lost_group, "lose_group": True, "times": 1})
    lost_answer = draw(st.booleans())
    if lost_answer:
        rules.append({"route": "forward_backward", "chunk": "final", "lose_answer": True, "times": 1})
    create = draw(st.sampled_from([None] * 12 + [503, "drop", "lose_answer"]))
    if create is not None:
        key = {503: "status", "drop": "drop", "lose_answer": "lose_answer"}[create]
        rules.append({"route": "create_job", "times": 1, key: 503 if create == 503 else True})
    failures += int(lost_answer)
    return {"rules": rules, "within_budget": failures <= RETRIES and create is None}


def check_schedule(fake: FakeServer, reference: dict[str, Any], schedule: dict[str, Any]) -> str:
    admin = Admin(fake.base_url)
    client = rest_client(fake.base_url, retries=RETRIES, max_events=1)
    jobs_before = len(admin.state()["jobs"])
    admin.set_faults(schedule["rules"])
    job_id: str | None = None
    try:
        try:
            job_id = client.create_job(job_body(SEED))["job_id"]
        except CortexError as exc:
            assert exc.route == "create_job" and "create_job" in str(exc)
            created = len(admin.state()["jobs"]) - jobs_before
            assert created <= 1, f"create-job made {created} jobs"
            assert not schedule["within_budget"], f"create failed within budget: {exc}"
            return "create-failed"
        assert len(admin.state()["jobs"]) - jobs_before == 1, "create-job made more than one job"
        try:
            client.wait_running(job_id)
            result = run_forward_backward(client, job_id)
        except CortexError as exc:
            assert exc.route, f"untyped failure: {exc!r}"
            execs = admin.settle()["jobs"][job_id]["forward_backward_executions"]
            assert execs <= 1, f"{execs} executions after a failed call ({exc})"
            assert not schedule["within_budget"], f"a schedule within the budget failed: {exc}"
            return "failed"
        state = admin.settle()
        execs = state["jobs"][job_id]["forward_backward_executions"]
        assert execs == 1, f"{execs} executions for one forward-backward"
        assert math.isfinite(result["avg_loss"]) and result["avg_loss"] == reference["avg_loss"]
        got = result["post_process_outputs"]["logprobs"]
        want = reference["post_process_outputs"]["logprobs"]
        assert got.shape == (BATCH, SEQ) and torch.equal(got, want)
        return "ok"
    finally:
        admin.set_faults([])
        if job_id is not None:
            client.cancel_job(job_id)
        client.close()


def test_forward_backward_at_most_once_under_any_fault_schedule(fake: FakeServer, reference: dict[str, Any],
                                                                 fault_examples: int) -> None:
    outcomes: dict[str, int] = {}

    @settings(max_examples=fault_examples, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck), database=None)
    @given(schedule=schedules())
    def prop(schedule: dict[str, Any]) -> None:
        outcome = check_schedule(fake, reference, schedule)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    prop()
    assert fake.state.store.internal_errors == 0
    assert outcomes.get("ok", 0) > 0 and outcomes.get("failed", 0) > 0, outcomes
    print(f"fault schedules: {outcomes}")


def test_lost_group_and_lost_answer_together_execute_once(fake: FakeServer, reference: dict[str, Any]) -> None:
    """The worst single schedule of the family within budget, spelled out."""
    rules = [
        {"route": "forward_backward", "chunk": 1, "lose_group": True, "times": 1},
        {"route": "forward_backward", "chunk": "final", "lose_answer": True, "times": 1},
        {"route": "forward_backward", "nth": 3, "status": 503, "times": 1},
        {"route": "get_request", "nth": 2, "drop": True, "times": 1},
    ]
    assert check_schedule(fake, reference, {"rules": rules, "within_budget": True}) == "ok"


def test_over_budget_is_a_typed_error_without_execution(fake: FakeServer, reference: dict[str, Any]) -> None:
    rules = [{"route": "forward_backward", "status": 503}]
    assert check_schedule(fake, reference, {"rules": rules, "within_budget": False}) == "failed"
