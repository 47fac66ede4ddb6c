"""Liveness checks for the mutants of the corrected clauses, merged into
test_fake_mutants.CHECKS: each shows its violation with the smallest observation."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from fake_gs_api import OCTET, Api, batch, training_config

from contract import wire
from contract.states import normalize_job_state, normalize_request_state

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


def create_no_job_id(api: Api) -> None:
    r = api.post("/", json={"sub_job_configs": [training_config()]})
    assert r.status_code == 200 and r.json() == {}


def create_201(api: Api) -> None:
    r = api.post("/", json={"sub_job_configs": [training_config()]})
    assert r.status_code == 201 and isinstance(r.json()["job_id"], str)


def inflight_result_empty(api: Api) -> None:
    job = api.running_job()
    rid = api.submit_json(job, "step")
    first = api.poll(job, rid)
    assert normalize_request_state(first["status"]) == "running" and first["result"] == {}
    assert isinstance(api.result(job, rid)["global_steps"], int)


def initializing_collapsed(api: Api) -> None:
    job = api.create_job(training_config())
    seen = {normalize_job_state(api.job(job)["status"]) for _ in range(12)}
    assert "running" in seen and "placing" in seen and "initializing" not in seen


def _micro_batches_after(api: Api, job: str, gid: str, repeats: int) -> int:
    cs = wire.encode_byte_chunks(wire.dumps(batch(2, 64)), "request", max_bytes=4096, chunk_group_id=gid,
                                 force_chunk=True)
    for c in cs:
        last = api.post(f"/{job}/forward-backward", data=c, headers=OCTET)
    api.result(job, last.json()["request_id"])
    for _ in range(repeats):
        again = api.post(f"/{job}/forward-backward", data=cs[-1], headers=OCTET)
        assert again.json()["request_id"] == last.json()["request_id"]  # the original request, quietly
        api.result(job, again.json()["request_id"])
    return int(api.result(job, api.submit_json(job, "step"))["metrics"]["micro_batches"])


def replay_reruns_quietly(api: Api) -> None:
    job = api.running_job()
    api.result(job, api.submit_json(job, "step"))
    assert _micro_batches_after(api, job, str(uuid.uuid4()), 0) == 1
    assert _micro_batches_after(api, job, str(uuid.uuid4()), 2) == 3


VERDICT_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "create-no-job-id": (create_no_job_id, {}),
    "create-201": (create_201, {}),
    "running-pages-empty-result": (inflight_result_empty, {}),
    "initializing-collapsed": (initializing_collapsed, {"startup": "polls:8"}),
    "final-chunk-reruns-quietly": (replay_reruns_quietly, {}),
    "job-not-found-miscoded": (job_not_found_miscoded, {}),
    "validation-unnamed": (validation_unnamed, {}),
    "last-lr-text": (last_lr_text, {}),
    "saved-id-unloadable": (saved_id_unloadable, {}),
    "failed-error-empty": (failed_error_empty, {"engine": "tiny"}),
    "poll-next-cursor-missing": (poll_next_cursor_missing, {}),
    "tail-logs-no-eof": (tail_logs_no_eof, {}),
    "capacity-text": (capacity_text, {}),
}
