"""Result delivery forms, chunk-group restart, retries, time-outs and failures against the fake."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from e2e_fake import Fake

from client import (
    AmbiguousOutcome,
    CortexConnectionError,
    CortexHTTPError,
    DeadlineExceeded,
    JobFailed,
    PollTimeout,
    PromptTooLong,
    RequestCancelled,
    create_client,
)
from client.rest import CortexRestClient
from client.transports.cortex import rpc_body


def _forward_body(b: int = 2, s: int = 3000) -> dict[str, Any]:
    ids = torch.randint(0, 1000, (b, s), generator=torch.Generator().manual_seed(1))
    return {"batch": {"input_ids": ids, "attention_mask": torch.ones(b, s, dtype=torch.long)},
            "meta": {"calculate_entropy": False}}


def _first_done_page(rest: CortexRestClient, job: str, rid: str) -> dict[str, Any]:
    """With instant latency the fake holds a poll until the request is done: no sleeps."""
    for _ in range(50):
        page = rest.get_request(job, rid)
        if page["status"] == "done":
            return page
    raise AssertionError("request never finished")


@pytest.mark.parametrize("delivery", ["inline", "chunks"])
def test_frame_results_inline_and_cursor_paged(make_fake: Any, delivery: str) -> None:
    with make_fake(result_delivery=delivery, result_chunk_bytes=16384) as fake, \
            create_client(fake.config(max_events=2)) as client:
        rest: CortexRestClient = client.transport.rest  # type: ignore[attr-defined]
        job = str(client.job_id)
        rid = rest.forward_no_grad(job, rpc_body(_forward_body()))["request_id"]
        page = _first_done_page(rest, job, rid)
        if delivery == "inline":
            assert page["result"]["encoding"] == "base64" and not page["events"]
        else:
            # at most max_events chunks a page; fewer when the server cuts pages shorter (spec §6.8)
            assert page["result"] is None and 1 <= len(page["events"]) <= 2 and page["next_cursor"]
        decoded = rest.wait(job, rid)
        assert decoded["model_outputs"]["logprobs"].shape == (2, 3000)
        # and through the op surface, where the answer is shaped
        out = client.fwd_no_grad(_forward_body())
        assert out["batch"]["log_probs"].shape == (2, 3000)


def test_json_results_inline(shared_fake: Fake) -> None:
    with create_client(shared_fake.config()) as client:
        rest: CortexRestClient = client.transport.rest  # type: ignore[attr-defined]
        job = str(client.job_id)
        rid = rest.step(job)["request_id"]
        page = _first_done_page(rest, job, rid)
        assert page["result"]["global_steps"] == 1  # plain JSON, no frame
        assert rest.wait(job, rid) == page["result"]


def test_generate_results_in_chunks_become_lists(make_fake: Any) -> None:
    with make_fake(result_delivery="chunks", result_chunk_bytes=9000) as fake, \
            create_client(fake.config(max_events=1)) as client:
        out = client.generate([[1, 2, 3]] * 8, {"max_tokens": 16, "logprobs": 1})
    assert len(out) == 8  # the list of outputs
    assert all(isinstance(r["token_ids"], list) for r in out)


def test_chunk_group_restart_is_replayed_once_from_chunk_zero(make_fake: Any) -> None:
    """The fake forgets the half-sent group (idle expiry while chunk 1 is delayed)."""
    with make_fake(chunk_group_idle_s=0.2) as fake, \
            create_client(fake.config(max_chunk_bytes=16384)) as client:
        client.start()
        fake.admin.set_faults([{"route": "forward_backward", "nth": 2, "delay_s": 0.5, "times": 1}])
        out = client.fwd_bwd(_forward_body())
        assert out["avg_loss"] > 0
        state = fake.admin.state()
    groups = [g for g in state["chunk_groups"] if g["route"] == "forward_backward"]
    assert len(groups) == 1 and groups[0]["executions"] == 1
    assert groups[0]["total_chunks"] > 3
    assert state["jobs"][client.job_id]["forward_backward_executions"] == 1


def test_injected_restart_required_mid_group(make_fake: Any) -> None:
    with make_fake() as fake, create_client(fake.config(max_chunk_bytes=16384)) as client:
        client.start()
        fake.admin.set_faults([{"route": "forward_backward", "nth": 3, "status": 409,
                                "code": "chunk_group_restart_required", "times": 1}])
        client.fwd_bwd(_forward_body())
        state = fake.admin.state()
    assert state["jobs"][client.job_id]["forward_backward_executions"] == 1


@pytest.mark.parametrize("status", [429, 503])
def test_transient_statuses_are_retried(make_fake: Any, status: int) -> None:
    with make_fake() as fake, create_client(fake.config()) as client:
        client.start()
        fake.admin.set_faults([{"route": "step", "status": status, "times": 3},
                               {"route": "get_request", "status": status, "times": 2}])
        assert client.step()["global_steps"] == 1
        assert client.fwd_bwd(_forward_body(1, 8))["avg_loss"] > 0


def test_exhausted_retries_surface_the_last_answer(make_fake: Any) -> None:
    with make_fake() as fake, create_client(fake.config(retries=2)) as client:
        client.start()
        fake.admin.set_faults([{"route": "step", "status": 503, "message": "still busy"}])
        with pytest.raises(CortexHTTPError, match="still busy") as info:
            client.step()
    assert info.value.status == 503 and info.value.code == "unavailable"
    assert info.value.route == "step"


def test_dropped_connection_is_retried_but_not_for_create(make_fake: Any) -> None:
    with make_fake() as fake:
        fake.admin.set_faults([{"route": "create_job", "drop": True, "times": 1}])
        with pytest.raises(CortexConnectionError, match="outcome unknown"):
            create_client(fake.config()).start()
        assert fake.admin.state()["jobs"] == {}
        # A cut step may have run: without idempotency keys it is not resent (at most once).
        fake.admin.set_faults([{"route": "step", "drop": True, "times": 1}])
        with create_client(fake.config()) as client:
            with pytest.raises(AmbiguousOutcome, match="route=step"):
                client.step()
            assert fake.admin.state()["jobs"][client.job_id]["global_steps"] == 0
        # With keys (this fake's proposed profile honours them) it is resent with the same key.
        fake.admin.set_faults([{"route": "step", "drop": True, "times": 2}])
        with create_client(fake.config(supports_idempotency_keys=True)) as client:
            assert client.step()["global_steps"] == 1


def test_per_call_deadline(make_fake: Any) -> None:
    with make_fake() as fake:
        # A read is resent after each time-out until the deadline (a step would not be:
        # its first time-out is an AmbiguousOutcome, see test_at_most_once.py).
        rest = CortexRestClient(fake.config(read_timeout_s=0.2, call_timeout_s=0.5))
        fake.admin.set_faults([{"route": "get_capacity", "delay_s": 0.8}])
        with pytest.raises(DeadlineExceeded, match="route=get_capacity"):
            rest.get_capacity()
        # Read time-outs of 0.2 s inside a 0.5 s deadline: at most three tries, never the
        # retry budget of ten a per-attempt time-out alone would allow.
        seen = fake.admin.faults()[0].get("seen", 0)
        assert 1 <= seen <= 3, f"get_capacity tried {seen} times inside a 0.5 s deadline"
        fake.admin.clear_faults()
        rest.close()


def test_poll_timeout(make_fake: Any) -> None:
    with make_fake(latency="seconds:30") as fake, \
            create_client(fake.config(poll_timeout_s=0.3)) as client, \
            pytest.raises(PollTimeout, match="route=step"):
        client.step()


def test_cancel_request(make_fake: Any) -> None:
    with make_fake() as fake, create_client(fake.config()) as client:
        rest: CortexRestClient = client.transport.rest  # type: ignore[attr-defined]
        job = str(client.job_id)
        fake.admin.hold(job, True)  # the step stays queued
        rid = rest.step(job)["request_id"]
        assert client.cancel_request(rid)["cancelled"] is True
        fake.admin.hold(job, False)
        with pytest.raises(RequestCancelled, match=rid):
            rest.wait(job, rid, route_name="step")
        assert client.step()["global_steps"] == 1  # the cancelled step never ran


def test_job_failure_names_the_reason(make_fake: Any) -> None:
    with make_fake(startup="seconds:30") as fake:
        rest = CortexRestClient(fake.config())
        from client.jobspec import create_job_body

        job = rest.create_job(create_job_body(fake.config()))["job_id"]
        fake.admin.force(job, "failed", "no GPUs left in the pool")
        client = create_client(fake.config(job_id=job))
        with pytest.raises(JobFailed, match="no GPUs left in the pool") as info:
            client.start()
        assert info.value.state == "failed" and info.value.job_id == job


def test_a_created_job_that_never_starts_is_cancelled(make_fake: Any) -> None:
    with make_fake(startup="seconds:30") as fake:
        with pytest.raises(PollTimeout, match="job still pending"):
            create_client(fake.config(job_start_timeout_s=0.2)).start()
        (job,) = fake.admin.state()["jobs"].values()
        assert job["status"] in ("cancelled", "cancelling")


def test_prompt_too_long_is_refused_before_sending(shared_fake: Fake) -> None:
    with create_client(shared_fake.config(max_seq_len=32)) as client:
        client.start()
        before = shared_fake.admin.state()["requests"]["total"]
        with pytest.raises(PromptTooLong, match="max_seq_len=32"):
            client.generate([[1] * 31, [1] * 32])
        assert shared_fake.admin.state()["requests"]["total"] == before
        assert client.generate([[1] * 31])


def test_generate_stream(shared_fake: Fake) -> None:
    with create_client(shared_fake.config()) as client:
        rest: CortexRestClient = client.transport.rest  # type: ignore[attr-defined]
        job = str(client.job_id)
        answer = rest.generate_stream(job, {"prompts": ["a", "b", "c"],
                                            "sampling_params": {"max_tokens": 3}})
        assert answer["count"] == 3
        events = list(rest.stream(job, answer["request_id"]))
    assert events[-1]["type"] == "done" and events[-1]["completed"] == 3
    assert sorted(e["index"] for e in events if e["type"] == "result") == [0, 1, 2]


def test_auth_with_a_token(make_fake: Any) -> None:
    with make_fake(tokens=("sesame",)) as fake:
        with create_client(fake.config(pat="sesame")) as client:
            assert client.step()["global_steps"] == 1
        with pytest.raises(CortexHTTPError) as info:
            create_client(fake.config()).start()
        assert info.value.status == 401
