"""Liveness checks for the load mutants, merged into test_fake_mutants.CHECKS:
each acts only while another request is in flight, so each check holds a job's executor
(the admin API) to keep one queued, then shows the violation with the next submits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_gs_api import Api


def _held(api: Api) -> str:
    """A running job whose executor is held, with one step queued on it."""
    job = api.running_job()
    assert api.post(f"/_fake/jobs/{job}/hold", json={"hold": True}).status_code == 200
    api.submit_json(job, "step")
    return job


def concurrent_step_twice(api: Api) -> None:
    job = _held(api)
    second = api.submit_json(job, "step")
    assert api.post(f"/_fake/jobs/{job}/hold", json={"hold": False}).status_code == 200
    assert api.result(job, second)["global_steps"] == 3  # the first step 1, the second 2 and 3
    assert api.state()["requests"]["executed_by_op"]["step"] == 3


def concurrent_500(api: Api) -> None:
    job = _held(api)
    crowded = [api.post(f"/{job}/step", json={}).status_code for _ in range(3)]
    assert api.post(f"/_fake/jobs/{job}/hold", json={"hold": False}).status_code == 200
    assert crowded == [500, 200, 200]
    assert api.state()["requests"]["by_op"]["step"] == 3  # the refused one queued nothing


LOAD_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "concurrent-step-twice": (concurrent_step_twice, {}),
    "concurrent-500": (concurrent_500, {}),
}
