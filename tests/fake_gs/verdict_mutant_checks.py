"""Liveness checks for the mutants of the corrected clauses, merged into
test_fake_mutants.CHECKS: each shows its violation with the smallest observation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_gs_api import Api

UNKNOWN_JOB = "/00000000-0000-4000-8000-000000000000"


def job_not_found_miscoded(api: Api) -> None:
    r = api.get(UNKNOWN_JOB)
    assert r.status_code == 404 and r.json()["code"] == "job_conflict"


def validation_unnamed(api: Api) -> None:
    r = api.post("/", json={"sub_job_configs": [{"job_type": "nope", "model_name": ""}]})
    assert r.status_code == 400 and "detail" not in r.json()
    assert "job_type" not in r.json()["message"] and "model_name" not in r.json()["message"]


def last_lr_text(api: Api) -> None:
    job = api.running_job()
    assert api.result(job, api.submit_json(job, "step", {"learning_rate": 0.5}))["last_lr"] == "0.5"


def saved_id_unloadable(api: Api) -> None:
    job = api.running_job()
    saved = api.result(job, api.submit_json(job, "save", {"checkpoint_id": "c1"}))
    assert saved["checkpoint_id"] == "c1-unsaved"
    failed = api.wait(job, api.submit_json(job, "load", {"checkpoint_id": saved["checkpoint_id"]}))
    assert failed["error"]["code"] == "checkpoint_not_found"


def failed_error_empty(api: Api) -> None:
    # The tiny engine fails a generate with token ids outside its vocabulary at execution.
    job = api.running_job()
    rid = api.submit_frame(job, "generate", {"prompts": [[10**9, 10**9 + 1]], "sampling_params": {"max_tokens": 2}},
                           force_chunk=False)
    ans = api.wait(job, rid)
    assert ans["status"] == "failed" and ans["error"] == ""


def poll_next_cursor_missing(api: Api) -> None:
    job = api.running_job()
    ans = api.poll(job, api.submit_json(job, "step"))
    assert "next_cursor" not in ans


def tail_logs_no_eof(api: Api) -> None:
    job = api.running_job()
    body = {"operation_type": "tail-logs", "payload": {}, "sub_job_type": "training"}
    page = api.post(f"/{job}/operation", json=body).json()
    assert "entries" in page and "eof" not in page


def capacity_text(api: Api) -> None:
    assert isinstance(api.get("/capacity").json()["max_total_gpus"], str)


VERDICT_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "job-not-found-miscoded": (job_not_found_miscoded, {}),
    "validation-unnamed": (validation_unnamed, {}),
    "last-lr-text": (last_lr_text, {}),
    "saved-id-unloadable": (saved_id_unloadable, {}),
    "failed-error-empty": (failed_error_empty, {"engine": "tiny"}),
    "poll-next-cursor-missing": (poll_next_cursor_missing, {}),
    "tail-logs-no-eof": (tail_logs_no_eof, {}),
    "capacity-text": (capacity_text, {}),
}
