"""POST /{job_id}/operation: every type, routing hints, inline vs polled answers."""

from __future__ import annotations

import base64
import pickle
from typing import Any

from fake_gs_api import MODEL, Api, batch, sampling_config, training_config

from contract import shapes, wire


def op(api: Api, job_id: str, operation_type: str, payload: dict[str, Any] | None = None, **hints: Any) -> Any:
    return api.post(f"/{job_id}/operation", json={"operation_type": operation_type, "payload": payload or {}, **hints})


def test_forward_operation(api: Api, running: str) -> None:
    obj = batch(3, 4, meta={"calculate_entropy": True})
    frame = wire.dumps(obj)
    r = op(api, running, "forward", {"payload_b64": base64.b64encode(frame).decode(), "content_type": "application/octet-stream"})
    assert r.status_code == 200 and set(r.json()) == {"request_id", "job_id"}
    out = api.result(running, r.json()["request_id"])
    assert shapes.check_forward_result(obj, out) == []


def test_forward_operation_bad_payloads(api: Api, running: str) -> None:
    for payload, code in (
        ({"payload_b64": "!!!not base64"}, "malformed_frame"),
        ({"payload_b64": base64.b64encode(b"garbage frame").decode()}, "malformed_frame"),
        ({"payload_b64": base64.b64encode(pickle.dumps({"a": 1})).decode()}, "legacy_payload_refused"),
        ({"payload_b64": ""}, "malformed_frame"),
        ({}, "validation_failed"),
    ):
        r = op(api, running, "forward", payload)
        assert r.status_code == 400 and r.json()["code"] == code, (payload, r.text)


def test_weight_sync_bumps_sampler_versions(api: Api, running: str) -> None:
    before = api.state()["jobs"][running]["weight_versions"][f"{running}:sampling:0"]
    t = f"{running}:training:0"
    r = op(api, running, "weight-sync", {"cuda_ipc": True, "low_memory": False}, sub_job_id=t)
    out = api.result(running, r.json()["request_id"])
    assert out["weight_version"] == before + 1 and out["weight_format"] == "vllm"
    assert out["target_sub_job_ids"] == [f"{running}:sampling:0"] and out["source_sub_job_id"] == f"{running}:training:0"
    assert api.state()["jobs"][running]["weight_versions"][f"{running}:sampling:0"] == before + 1
    r = op(api, running, "weight-sync", {"source_sub_job_id": t, "target_sub_job_ids": [f"{running}:sampling:0"],
                                          "weight_format": "hf"}, sub_job_id=t)
    assert api.result(running, r.json()["request_id"])["weight_version"] == before + 2
    r = op(api, running, "weight-sync", {"target_sub_job_ids": ["someone:sampling:0"]}, sub_job_id=t)
    assert r.status_code == 400 and r.json()["code"] == "sub_job_not_found"
    r = op(api, running, "weight-sync", {"weight_format": "onnx"}, sub_job_id=t)
    assert r.status_code == 400 and r.json()["detail"][0]["loc"][:2] == ["payload", "weight_format"]


def test_inline_operations(api: Api, running: str) -> None:
    t, s = f"{running}:training:0", f"{running}:sampling:0"
    r = op(api, running, "bootstrap-router-replay", {"source_sub_job_id": s, "target_sub_job_id": t, "max_cache_bytes": 10},
           sub_job_id=t)
    assert r.status_code == 200 and "request_id" not in r.json() and r.json()["bootstrapped"] is True
    r = op(api, running, "router-replay-discard", {"sample_ids": ["a", 2]}, sub_job_id=s)
    assert r.json()["discarded"] == 2
    r = op(api, running, "reset-prefix-cache", {"drain": True, "timeout_s": 60.0, "retry_interval_s": 0.1},
           sub_job_type="sampling")
    assert r.status_code == 200 and r.json()["sub_job_id"] == s
    assert op(api, running, "reset-prefix-cache").json()["sub_job_id"] == s  # natural target
    r = op(api, running, "bootstrap-router-replay", {"source_sub_job_id": s})
    assert r.status_code == 400 and ["payload", "target_sub_job_id"] in [d["loc"] for d in r.json()["detail"]]


def test_routing_hints(api: Api) -> None:
    lp = {"job_type": "log_probability", "model_name": MODEL, "inference_config": {"max_seq_len": 32, "n_gpus": 1}}
    job_id = api.running_job(training_config(), sampling_config(), sampling_config(), lp)
    s0 = f"{job_id}:sampling:0"
    r = op(api, job_id, "reset-prefix-cache", sub_job_id=s0, sub_job_type="training")
    assert r.status_code == 400 and r.json()["code"] == "routing_conflict"
    assert op(api, job_id, "reset-prefix-cache", sub_job_id=s0, sub_job_type="sampling").json()["sub_job_id"] == s0
    r = op(api, job_id, "reset-prefix-cache", sub_job_type="sampling")  # two sampling sub-jobs: ambiguous
    assert r.status_code == 400 and r.json()["code"] == "routing_conflict"
    discard: dict[str, list[str]] = {"sample_ids": []}
    assert op(api, job_id, "router-replay-discard", discard, sub_job_type="log_prob").json()["sub_job_id"] == f"{job_id}:log_prob:0"
    assert op(api, job_id, "router-replay-discard", discard, sub_job_type="log_probability").status_code == 200
    r = op(api, job_id, "reset-prefix-cache", sub_job_id=f"{job_id}:sampling:9")
    assert r.status_code == 400 and r.json()["code"] == "sub_job_not_found"
    r = op(api, job_id, "reset-prefix-cache", sub_job_type="robot")
    assert r.status_code == 400 and r.json()["code"] == "validation_failed"
    only_train = api.running_job(training_config())
    r = op(api, only_train, "reset-prefix-cache", sub_job_type="sampling")
    assert r.status_code == 400 and r.json()["code"] == "sub_job_not_found"


def test_unknown_operation_type(api: Api, running: str) -> None:
    r = op(api, running, "defragment")
    assert r.status_code == 400 and r.json()["code"] == "unknown_operation_type"
    r = api.post(f"/{running}/operation", json={"payload": {}})
    assert r.status_code == 400 and r.json()["detail"][0]["loc"] == ["operation_type"]


def test_cancel_request_operation(make_api) -> None:
    """A request that has not started is cancelled and never runs; one that ran (even if its
    answer is still gated by latency) is not: the old fake said cancelled while it ran."""
    api = make_api(latency="polls:3")
    job_id = api.running_job()
    assert api.post(f"/_fake/jobs/{job_id}/hold", json={"hold": True}).status_code == 200
    queued = api.submit_json(job_id, "step")
    r = op(api, job_id, "cancel-request", {"request_id": queued})
    assert r.status_code == 200 and r.json() == {"cancelled_request_id": queued, "cancelled": True, "status": "cancelled"}
    api.post(f"/_fake/jobs/{job_id}/hold", json={"hold": False})
    ran = api.submit_json(job_id, "step")
    assert api.result(job_id, ran)["global_steps"] == 1  # the cancelled step never ran
    assert api.poll(job_id, queued)["status"] == "cancelled"
    hidden = api.submit_json(job_id, "step")
    after = api.submit_json(job_id, "step")
    assert api.result(job_id, after)["global_steps"] == 3  # serial: `hidden` ran before `after`
    r = op(api, job_id, "cancel-request", {"request_id": hidden})  # ran, answer still gated (polls:3)
    assert r.json()["cancelled"] is False and r.json()["status"] in ("running", "done")
    assert api.result(job_id, hidden)["global_steps"] == 2
    r = op(api, job_id, "cancel-request", {"request_id": ran})
    assert r.json()["cancelled"] is False and r.json()["status"] == "done"
    r = op(api, job_id, "cancel-request", {"request_id": "nope"})
    assert r.status_code == 404 and r.json()["code"] == "request_not_found"


def test_tail_logs_paging(api: Api, running: str) -> None:
    api.result(running, api.submit_json(running, "step"))
    first = op(api, running, "tail-logs", {"max_lines": 1}).json()
    assert set(first) == {"entries", "next_cursor", "eof"} and len(first["entries"]) == 1 and first["eof"] is False
    rest = op(api, running, "tail-logs", {"cursor": first["next_cursor"]}).json()
    assert rest["eof"] is True and rest["entries"]
    assert op(api, running, "tail-logs", {"cursor": "zzz"}).status_code == 400
    assert op(api, running, "tail-logs", {"max_lines": 0}).status_code == 400


def test_operations_need_running_except_tail_logs(make_api) -> None:
    api = make_api(startup="polls:3")
    job_id = api.create_job()
    api.job(job_id)  # placing
    r = op(api, job_id, "reset-prefix-cache")
    assert r.status_code == 409 and r.json()["code"] == "job_not_running"
    assert op(api, job_id, "tail-logs").status_code == 200
    pending = make_api(startup="polls:3", max_total_gpus=0)
    other = pending.create_job()
    r = op(pending, other, "tail-logs")
    assert r.status_code == 409 and r.json()["code"] == "job_not_running"
