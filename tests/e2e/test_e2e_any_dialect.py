"""The client against the forms a conformant server may answer in that no other e2e test
reaches by chance: an operation answered with a request id to poll (and fields nobody
declares beside it), every answer seeded differently (``fake-gs --dialect any``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from e2e_fake import Fake

from client import create_client
from client.rest import CortexRestClient, is_submission


def test_a_submission_is_told_from_an_inline_answer() -> None:
    """spec §7: poll an answer holding a request_id; an inline acknowledgement naming a
    request (cancel-request's) or an answer with unknown fields is read for what it is."""
    assert is_submission({"request_id": "r", "job_id": "j"})
    assert is_submission({"request_id": "r", "job_id": "j", "etag": "W/1"})
    assert not is_submission({"request_id": "r", "cancelled": True})
    assert not is_submission({"request_id": "r", "job_id": "j", "cancelled": False})
    assert not is_submission({"bootstrapped": True, "etag": "W/1"})


def test_polled_operations_and_every_form_reach_the_client(make_fake: Callable[..., AbstractContextManager[Fake]]) -> None:
    """bootstrap-router-replay answered inline or as a request to poll (spec §7), with or
    without unknown fields: the client always hands back the bootstrap result."""
    with make_fake(dialect="any", seed=3) as fake, create_client(fake.config()) as client:
        rest: CortexRestClient = client.transport.rest  # type: ignore[attr-defined]
        job, ids = client.job_id, client.transport.ids  # type: ignore[attr-defined]
        assert job is not None
        payload = {"source_sub_job_id": ids.sampling, "target_sub_job_id": ids.training}
        results: list[Any] = []
        for _ in range(12):
            answer = rest.operation(job, "bootstrap-router-replay", payload, sub_job_id=ids.training)
            results.append(rest.operation_result(job, "bootstrap-router-replay", answer))
        assert all(isinstance(r, dict) and r.get("bootstrapped") is True for r in results), results
        steps = [client.step()["global_steps"] for _ in range(3)]
        assert steps == sorted(steps) and len(set(steps)) == 3
