"""Jobs: creation, validation, job objects, start-up progression, listing, capacity, cancel."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import pytest
from fake_gs_api import MODEL, Api, sampling_config, training_config

from contract.errors import is_error_envelope
from contract.models.catalog import INFERENCE_ONLY_MODELS, TRAINING_MODELS
from contract.states import normalize_job_state
from fake_gs.clock import ManualClock


def rfc3339(text: str) -> datetime:
    assert text.endswith("Z")
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_create_answers_a_uuid_and_a_complete_job_object(api: Api) -> None:
    lp = {"job_type": "log_probability", "model_name": MODEL, "inference_config": {"max_seq_len": 32, "n_gpus": 1}}
    job_id = api.create_job(training_config(ds_config={"zero": 2}), sampling_config(), sampling_config(), lp,
                            experiment_name="exp-1")
    assert str(uuid.UUID(job_id)) == job_id
    job = api.job(job_id)
    for key in ("job_id", "status", "reason", "created_at", "updated_at", "image_tag", "submitted_by",
                "owner_role", "sub_jobs"):
        assert key in job
    assert rfc3339(job["created_at"]) <= rfc3339(job["updated_at"])
    assert [s["sub_job_id"] for s in job["sub_jobs"]] == [
        f"{job_id}:training:0", f"{job_id}:sampling:0", f"{job_id}:sampling:1", f"{job_id}:log_prob:0"]
    train, samp = job["sub_jobs"][0], job["sub_jobs"][1]
    assert train["training_config"]["ds_config"] == {"zero": 2} and "inference_config" not in train
    assert samp["inference_config"]["max_seq_len"] == 64 and samp["model_name"] == MODEL
    assert all(s["status"] == job["status"] == "running" for s in job["sub_jobs"])
    assert job["image_tag"]
    run = api.get(f"/{job_id}/experiment-run").json()
    assert run == {"experiment_name": "exp-1", "experiment_run_name": f"run-{job_id}"}


def test_experiment_name_defaults(api: Api) -> None:
    job_id = api.create_job()
    run = api.get(f"/{job_id}/experiment-run").json()
    assert run["experiment_name"] and job_id in run["experiment_run_name"]


BAD_BODIES: list[tuple[Any, str]] = [
    ({}, "sub_job_configs"),
    ({"sub_job_configs": []}, "sub_job_configs"),
    ({"sub_job_configs": [{**training_config(), "job_type": "trainer"}]}, "job_type"),
    ({"sub_job_configs": [{**training_config(), "model_name": ""}]}, "model_name"),
    ({"sub_job_configs": [{"job_type": "training", "training_config": training_config()["training_config"]}]}, "model_name"),
    ({"sub_job_configs": [{**training_config(), "inference_config": {"max_seq_len": 1, "n_gpus": 1}}]}, "sub_job_configs"),
    ({"sub_job_configs": [{"job_type": "sampling", "model_name": MODEL}]}, "sub_job_configs"),
    ({"sub_job_configs": [training_config(n_gpus=0)]}, "n_gpus"),
    ({"sub_job_configs": [{**training_config(), "training_config": {**training_config()["training_config"], "optimizer": {}}}]}, "optimizer"),
    ({"sub_job_configs": [{**training_config(), "training_config": {**training_config()["training_config"], "max_seq_len": -1}}]}, "max_seq_len"),
    ({"sub_job_configs": [{**training_config(), "training_config": {**training_config()["training_config"], "train_batch_size": 0}}]}, "train_batch_size"),
    ({"sub_job_configs": [{"job_type": "sampling", "model_name": MODEL, "inference_config": {"n_gpus": 1}}]}, "max_seq_len"),
    ([1, 2], ""),
]


@pytest.mark.parametrize(("body", "field"), BAD_BODIES)
def test_create_validation_names_the_field(api: Api, body: Any, field: str) -> None:
    before = len(api.get("/").json()["jobs"])
    r = api.post("/", json=body)
    assert r.status_code == 400, r.text
    err = r.json()
    assert is_error_envelope(err) and err["code"] == "validation_failed"
    assert err["detail"] and all({"loc", "msg", "type"} <= set(d) for d in err["detail"])
    if field:
        assert any(field in [str(p) for p in d["loc"]] for d in err["detail"]), err
    assert len(api.get("/").json()["jobs"]) == before


def test_malformed_json_and_content_type(api: Api) -> None:
    r = api.post("/", data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "malformed_json"
    r = api.post("/", data=b'{"sub_job_configs": []}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and r.json()["code"] == "unsupported_media_type"
    r = api.post("/", data=b"\xff\xfe\x00", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "malformed_json"
    for bad in (b'{"a": NaN}', b'{"a": -Infinity}'):  # not JSON
        r = api.post("/", data=bad, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["code"] == "malformed_json"
    r = api.post("/", data=b'{"a": 1e999}', headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "validation_failed"  # JSON, but past a double
    assert ["a"] in [d["loc"] for d in r.json()["detail"]]


def test_models_enforced(api: Api) -> None:
    for model in TRAINING_MODELS:
        api.create_job({**training_config(), "model_name": model}, {**sampling_config(), "model_name": model})
    for model in INFERENCE_ONLY_MODELS:
        api.create_job({**sampling_config(), "model_name": model})
        r = api.post("/", json={"sub_job_configs": [{**training_config(), "model_name": model}]})
        assert r.status_code == 400 and r.json()["code"] == "model_not_trainable"
        assert r.json()["detail"][0]["loc"] == ["sub_job_configs", 0, "model_name"]
    r = api.post("/", json={"sub_job_configs": [training_config(), {**sampling_config(), "model_name": "gpt2"}]})
    assert r.status_code == 400 and r.json()["code"] == "unknown_model"
    assert r.json()["detail"][0]["loc"] == ["sub_job_configs", 1, "model_name"]
    # the refusal says what is served and how to accept any name
    message = r.json()["message"]
    assert all(model in message for model in (*TRAINING_MODELS, *INFERENCE_ONLY_MODELS)), message
    assert "'gpt2'" in message and "--allow-any-model" in message


def test_allow_any_model(make_api) -> None:
    api = make_api(allow_any_model=True)
    api.create_job({**training_config(), "model_name": "openai/gpt-oss-120b"}, {**sampling_config(), "model_name": "x/y"})


def test_unknown_fields_ignored_by_default_refused_in_strict(make_api, api: Api) -> None:
    body = {"sub_job_configs": [{**training_config(), "colour": "red"}], "typo_field": 1}
    assert api.post("/", json=body).status_code == 200
    strict = make_api(strict=True)
    r = strict.post("/", json=body)
    assert r.status_code == 400 and r.json()["code"] == "unknown_field"
    locs = [d["loc"] for d in r.json()["detail"]]
    assert ["typo_field"] in locs and ["sub_job_configs", 0, "colour"] in locs
    # Pass-through keys of the configs are not unknown fields.
    assert strict.post("/", json={"sub_job_configs": [training_config(ds_config={}, peft_config={})]}).status_code == 200
    job_id = strict.running_job()
    r = strict.post(f"/{job_id}/save", json={"path": "/tmp/x", "checkpoint_id": "c"})
    assert r.status_code == 400 and r.json()["detail"][0]["loc"] == ["path"]


def test_get_unknown_job(api: Api) -> None:
    for path in (f"/{uuid.uuid4()}", f"/{uuid.uuid4()}/experiment-run", f"/{uuid.uuid4()}/checkpoints",
                 f"/{uuid.uuid4()}/requests/{uuid.uuid4()}"):
        r = api.get(path)
        assert r.status_code == 404 and r.json()["code"] == "job_not_found"
    r = api.post(f"/{uuid.uuid4()}:cancel")
    assert r.status_code == 404 and r.json()["code"] == "job_not_found"


def test_startup_polls_progression(make_api) -> None:
    api = make_api(startup="polls:6")
    job_id = api.create_job()
    seen = [normalize_job_state(api.job(job_id)["status"]) for _ in range(7)]
    assert seen == ["pending", "placing", "placing", "initializing", "initializing", "running", "running"]
    # The job is not running until then: data-plane calls are refused with job_not_running.
    other = api.create_job()
    assert api.job(other)["image_tag"] == ""
    r = api.post(f"/{other}/step", json={})
    assert r.status_code == 409 and r.json()["code"] == "job_not_running"
    # tail-logs is allowed while placing.
    assert normalize_job_state(api.job(other)["status"]) == "placing"
    r = api.post(f"/{other}/operation", json={"operation_type": "tail-logs", "payload": {}})
    assert r.status_code == 200 and r.json()["entries"]
    # list_jobs does not advance start-up.
    api.get("/")
    assert normalize_job_state(api.job(other)["status"]) == "placing"


def test_startup_seconds(make_api) -> None:
    clock = ManualClock()
    api = make_api(startup="seconds:0.3", clock=clock)
    job_id = api.create_job()
    assert normalize_job_state(api.job(job_id)["status"]) == "pending"  # admitted, no time passed
    clock.advance(0.15)  # half-way: one third of start-up per stage
    assert normalize_job_state(api.job(job_id)["status"]) == "placing"
    clock.advance(0.1)
    assert normalize_job_state(api.job(job_id)["status"]) == "initializing"
    clock.advance(0.1)
    assert normalize_job_state(api.job(job_id)["status"]) == "running"


def test_list_and_status_filter(make_api) -> None:
    api = make_api()
    a, b = api.create_job(), api.create_job()
    api.post(f"/{b}:cancel")
    jobs = api.get("/").json()["jobs"]
    assert {j["job_id"] for j in jobs} == {a, b} and all("sub_jobs" in j for j in jobs)
    for query, expect in (("running", {a}), ("RUNNING", {a}), ("JOB_STATE_RUNNING", {a}), ("cancelled", {b}),
                          ("canceled", {b}), ("failed", set())):
        got = {j["job_id"] for j in api.get("/", params={"status": query}).json()["jobs"]}
        assert got == expect, query


def test_capacity_queueing_fifo_and_release(make_api) -> None:
    api = make_api(max_total_gpus=4)
    cap = api.get("/capacity").json()
    assert cap == {"has_reservation": True, "max_total_gpus": 4, "reserved_gpus": 4, "in_use_gpus": 0, "available_gpus": 4}
    big = api.create_job(training_config(n_gpus=2), sampling_config(n_gpus=1))  # 3 GPUs
    waiting = api.create_job(training_config(n_gpus=2))  # does not fit
    small = api.create_job(training_config(n_gpus=1))  # would fit, but FIFO keeps it behind
    assert normalize_job_state(api.job(big)["status"]) == "running"
    for _ in range(3):
        assert normalize_job_state(api.job(waiting)["status"]) == "pending"
        assert normalize_job_state(api.job(small)["status"]) == "pending"
    cap = api.get("/capacity").json()
    assert cap["in_use_gpus"] == 6 and cap["available_gpus"] == 0
    api.post(f"/{big}:cancel")
    assert normalize_job_state(api.job(waiting)["status"]) == "running"
    assert normalize_job_state(api.job(small)["status"]) == "running"
    assert api.get("/capacity").json()["in_use_gpus"] == 3


def test_cancel_rules(make_api) -> None:
    api = make_api(startup="polls:3")
    pending = api.create_job()
    assert api.post(f"/{pending}:cancel").json() == {}
    assert normalize_job_state(api.job(pending)["status"]) == "cancelled"
    assert api.post(f"/{pending}:cancel").status_code == 200  # idempotent
    for forced in ("failed", "terminated"):
        job_id = api.create_job()
        r = api.post(f"/_fake/jobs/{job_id}/state", json={"status": forced, "reason": "boom"})
        assert r.status_code == 200
        r = api.post(f"/{job_id}:cancel")
        assert r.status_code == 409 and r.json()["code"] == "job_conflict"
    cancelling = api.create_job()
    api.post(f"/_fake/jobs/{cancelling}/state", json={"status": "cancelling"})
    assert api.post(f"/{cancelling}:cancel").status_code == 200


def test_failed_jobs_carry_a_reason(api: Api) -> None:
    job_id = api.running_job()
    api.post(f"/_fake/jobs/{job_id}/state", json={"status": "failed"})
    job = api.job(job_id)
    assert job["status"] == "failed" and job["reason"]
    r = api.post(f"/{job_id}/step", json={})
    assert r.status_code == 409 and r.json()["code"] == "job_not_running"


def test_force_state_validation(api: Api) -> None:
    job_id = api.create_job()
    assert api.post(f"/_fake/jobs/{job_id}/state", json={"status": "exploded"}).status_code == 400
    assert api.post(f"/_fake/jobs/{job_id}/state", json={}).status_code == 400
    assert api.post(f"/_fake/jobs/{uuid.uuid4()}/state", json={"status": "failed"}).status_code == 404


def test_enum_status_style(make_api) -> None:
    api = make_api(status_style="enum")
    job_id = api.create_job()
    job = api.job(job_id)
    assert job["status"] == "JOB_STATE_RUNNING"
    assert {s["status"] for s in job["sub_jobs"]} == {"JOB_STATE_RUNNING"}
    got = api.get("/", params={"status": "running"}).json()["jobs"]
    assert [j["job_id"] for j in got] == [job_id]
