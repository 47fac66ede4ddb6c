"""Liveness checks for the url-run mutants, merged into test_fake_mutants.CHECKS:
each shows its violation with the smallest observation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_gs_api import Api, batch


def cancel_cancelling_409(api: Api) -> None:
    job = api.running_job()
    assert api.post(f"/{job}:cancel").status_code == 200
    assert api.post(f"/{job}:cancel").status_code == 409


def cursor_page_consumed(api: Api) -> None:
    job = api.running_job()
    rid = api.submit_frame(job, "forward-no-grad", batch(4, 2000))
    api.wait(job, rid)
    again = [api.poll(job, rid) for _ in range(2)][-1]
    assert again["status"] == "done" and again["events"] == [] and not again.get("next_cursor")


URL_RUN_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "cancel-cancelling-409": (cancel_cancelling_409, {}),
    "cursor-page-consumed": (
        cursor_page_consumed,
        {"result_delivery": "chunks", "result_chunk_bytes": 8192 + 256},
    ),
}
