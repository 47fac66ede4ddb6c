"""Data plane results: shapes, seeds, metrics per profile, step/save/load, checkpoints."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests
from fake_gs_api import OCTET, Api, batch, sampling_config, training_config

from contract import shapes
from contract.models import PROPOSED_METRIC_KEYS
from contract.states import normalize_request_state


def test_forward_backward_result_and_metrics(api: Api, running: str) -> None:
    result = api.result(running, api.submit_frame(running, "forward-backward", batch()))
    assert set(result) == {"job_id", "avg_loss", "metrics", "post_process_outputs"}
    assert not shapes.check_loss(result["avg_loss"])
    assert set(PROPOSED_METRIC_KEYS) <= set(result["metrics"])
    assert result["metrics"]["ppo_kl"] == 0.0  # no step yet: old and new log-probs agree
    assert result["post_process_outputs"] == {}


def test_current_profile_drops_metrics_but_the_micro_batch_count(make_api) -> None:
    api = make_api(profile="current")
    job_id = api.running_job()
    assert api.result(job_id, api.submit_frame(job_id, "forward-backward", batch()))["metrics"] == {}
    # The step keeps only the count of forward-backward runs it applied (results are open,
    # spec §11): what CG-IDEM-1 reads in every profile.
    assert api.result(job_id, api.submit_json(job_id, "step"))["metrics"] == {"micro_batches": 1}


def test_verl_envelope_and_post_process_tensors(api: Api, running: str) -> None:
    import torch

    b, p, r = 3, 4, 6
    payload = {"args": [], "kwargs": {
        "input_ids": torch.ones(b, p + r, dtype=torch.long), "attention_mask": torch.ones(b, p + r, dtype=torch.long),
        "position_ids": torch.arange(p + r).repeat(b, 1), "prompts": torch.ones(b, p, dtype=torch.long),
        "responses": torch.ones(b, r, dtype=torch.long), "response_mask": torch.ones(b, r),
        "advantages": torch.randn(b, r), "old_log_probs": -torch.rand(b, r), "ref_log_prob": -torch.rand(b, r)},
        "meta": {"calculate_entropy": True, "temperature": 1.0},
        "processing": {"loss_fn": "verl_grpo", "post": ["logprobs", {"name": "entropy"}]}}
    result = api.result(running, api.submit_frame(running, "forward-backward", payload))
    post = result["post_process_outputs"]
    assert tuple(post["logprobs"].shape) == (b, p + r) and tuple(post["entropy"].shape) == (b, p + r)
    verl = {"batch": payload["kwargs"], "meta": payload["meta"], "processing": payload["processing"]}
    out = api.result(running, api.submit_frame(running, "forward-no-grad", verl))
    assert shapes.check_forward_result(verl, out) == []


@pytest.mark.parametrize(("b", "s", "entropy"), [(1, 1, False), (2, 7, True), (5, 33, True)])
def test_forward_no_grad_shapes(api: Api, running: str, b: int, s: int, entropy: bool) -> None:
    payload = batch(b, s, meta={"calculate_entropy": entropy}, reference_model=True)
    out = api.result(running, api.submit_frame(running, "forward-no-grad", payload))
    assert shapes.check_forward_result(payload, out) == []
    assert ("entropy" in out["model_outputs"]) == entropy
    assert out["model_outputs"]["logprobs"].dtype.__str__() == "torch.float32"


def test_forward_without_input_ids_is_400(api: Api, running: str) -> None:
    import torch

    before = api.state()["requests"]["total"]
    for bad in ({"args": [], "kwargs": {"labels": torch.ones(2, 2)}}, [1, 2, 3], {"kwargs": {"input_ids": torch.ones(4)}}):
        for route in ("forward-backward", "forward-no-grad"):
            r = api.send_frame(running, route, bad)
            assert r.status_code == 400 and r.json()["code"] == "invalid_argument", r.text
    assert api.state()["requests"]["total"] == before


def test_generate_rules(api: Api, running: str) -> None:
    req = {"prompts": ["hello", [1, 2, 3], "x"], "sampling_params": [{"max_tokens": 3, "logprobs": 1}, None, {"max_tokens": 1}]}
    for chunked in (False, True):
        out = api.result(running, api.submit_frame(running, "generate", req, force_chunk=chunked))
        assert out["job_id"] == running
        assert shapes.check_generate_result(req, out) == []
        assert len(out["results"][0]["logprobs"]) == len(out["results"][0]["token_ids"])
        assert "logprobs" not in out["results"][1]
        assert out["results"][2]["finish_reason"] == "length"


def test_generate_validation(api: Api, running: str) -> None:
    bad = [
        ({"prompts": []}, "validation_failed"),
        ({"prompts": ["a", "b"], "sampling_params": [{}]}, "validation_failed"),
        ({"prompts": ["a"], "routing_key": ["x", "y"]}, "validation_failed"),
        ({"prompts": ["a"], "sampling_params": {"max_tokens": 0}}, "validation_failed"),
        ({"prompts": [list(range(64))]}, "prompt_too_long"),
        ({"no_prompts": 1}, "validation_failed"),
    ]
    for body, code in bad:
        r = api.send_frame(running, "generate", body, force_chunk=False)
        assert r.status_code == 400 and r.json()["code"] == code, (body, r.text)
    assert api.send_frame(running, "generate", {"prompts": [list(range(63))]}, force_chunk=False).status_code == 200


def test_generate_stream_events_drain(api: Api, running: str) -> None:
    r = api.post(f"/{running}/generate-stream", data=b'{"prompts": ["a", [5, 6], "c"], "sampling_params": {"max_tokens": 4}}',
                 headers=OCTET)
    assert r.status_code == 200
    body = r.json()
    assert body["count"] == 3 and body["job_id"] == running
    first = api.poll(running, body["request_id"], max_events=2)
    assert [e["index"] for e in first["events"]] == [0, 1] and first["status"] == "streaming"
    second = api.poll(running, body["request_id"], max_events=10)
    assert [e["type"] for e in second["events"]] == ["result", "done"]
    assert second["events"][-1] == {"type": "done", "completed": 3, "failed": 0}
    assert second["status"] == "done"
    third = api.poll(running, body["request_id"])
    assert third["events"] == [] and third["status"] == "done"
    res = first["events"][0]["result"]
    assert isinstance(res["token_ids"], list) and 1 <= len(res["token_ids"]) <= 4


def test_generate_stream_bad_bodies(api: Api, running: str) -> None:
    r = api.post(f"/{running}/generate-stream", data=b"\xff\xfe", headers=OCTET)
    assert r.status_code == 400 and r.json()["code"] == "malformed_json"
    r = api.post(f"/{running}/generate-stream", data=b'{"prompts": ["a"]}', headers={"Content-Type": "application/json"})
    assert r.status_code == 415
    r = api.post(f"/{running}/generate-stream", data=b'{"prompts": 5}', headers=OCTET)
    assert r.status_code == 400 and r.json()["code"] == "validation_failed"


def test_log_probs(api: Api, running: str) -> None:
    out = api.result(running, api.submit_json(running, "log-probs",
                                              {"prompts": ["a b c", [1, 2]], "completions": ["x y", [3]], "top_k": 2}))
    assert out["job_id"] == running and len(out["results"]) == 2
    assert tuple(out["results"][0]["top_logprobs"].shape)[1] == 2
    assert bool((out["results"][1]["logprobs"] <= 0).all())
    r = api.post(f"/{running}/log-probs", json={"prompts": ["a"], "completions": ["x", "y"]})
    assert r.status_code == 400


def test_step_save_load_checkpoints(api: Api) -> None:
    job_id = api.running_job(training_config(step_peak_memory_log=True), sampling_config())
    steps = [api.result(job_id, api.submit_json(job_id, "step", {"learning_rate": 0.5}))]
    assert steps[0]["global_steps"] == 1 and steps[0]["last_lr"] == 0.5
    assert set(steps[0]["peak_memory"]) == {"gpu_peak", "cpu_peak"} and "grad_norm" in steps[0]["metrics"]
    save = api.result(job_id, api.submit_json(job_id, "save", {}))
    assert save["checkpoint_id"] == "global_step1" and save["checkpoint_path"] and save["checkpoint_tag"]
    named = api.result(job_id, api.submit_json(job_id, "save", {"checkpoint_id": "mine", "checkpoint_type": "WEIGHTS-ONLY"}))
    assert named["checkpoint_id"] == "mine"
    for _ in range(3):
        last = api.result(job_id, api.submit_json(job_id, "step"))
    assert last["global_steps"] == 4 and last["last_lr"] == 0.5
    listed = api.get(f"/{job_id}/checkpoints").json()["checkpoints"]
    assert [c["checkpoint_id"] for c in listed] == ["global_step1", "mine"]
    assert listed[1]["checkpoint_type"] == "weights-only" and listed[0]["global_steps"] == 1
    assert set(listed[0]) == {"checkpoint_id", "global_steps", "avg_loss", "created_at", "checkpoint_type"}
    loaded = api.result(job_id, api.submit_json(job_id, "load", {"checkpoint_id": "global_step1"}))
    assert loaded["checkpoint_id"] == "global_step1" and loaded["global_steps"] == 1
    assert api.result(job_id, api.submit_json(job_id, "step"))["global_steps"] == 2
    # delete, then everything about it is 404
    assert api.call("DELETE", f"/{job_id}/checkpoints/mine").status_code == 200
    assert [c["checkpoint_id"] for c in api.get(f"/{job_id}/checkpoints").json()["checkpoints"]] == ["global_step1"]
    for method, path in (("DELETE", f"/{job_id}/checkpoints/mine"), ("POST", f"/{job_id}/checkpoints/mine:export")):
        r = api.call(method, path)
        assert r.status_code == 404 and r.json()["code"] == "checkpoint_not_found"
    # load is asynchronous (spec §6.4): an unknown checkpoint fails the request, no 404
    failed = api.wait(job_id, api.submit_json(job_id, "load", {"checkpoint_id": "mine"}))
    assert normalize_request_state(failed["status"]) == "failed"
    assert failed["error"]["code"] == "checkpoint_not_found" and "'mine'" in failed["error"]["message"]


def test_load_unknown_source_job_fails_on_the_poll(api: Api, running: str) -> None:
    """An unknown (or another account's) source job is accepted and the request fails
    naming it; a save queued just before the load is found by it."""
    failed = api.wait(running, api.submit_json(running, "load", {"checkpoint_id": "c", "source_job_id": "gone"}))
    assert normalize_request_state(failed["status"]) == "failed"
    assert failed["error"]["code"] == "job_not_found" and "'gone'" in failed["error"]["message"]
    save = api.submit_json(running, "save", {"checkpoint_id": "queued"})
    loaded = api.result(running, api.submit_json(running, "load", {"checkpoint_id": "queued"}))
    assert loaded["checkpoint_id"] == "queued" and api.result(running, save)["checkpoint_id"] == "queued"
    for body in ({"checkpoint_id": "../x"}, {"checkpoint_id": "c", "source_job_id": "a/b"}):
        r = api.post(f"/{running}/load", json=body)
        assert r.status_code == 400 and r.json()["code"] == "invalid_id", body


def test_save_and_load_validation(api: Api, running: str) -> None:
    for body in ({"checkpoint_type": "full"}, {"checkpoint_id": 5}):
        r = api.post(f"/{running}/save", json=body)
        assert r.status_code == 400 and r.json()["detail"], body
    for body in ({}, {"checkpoint_id": ""}):
        assert api.post(f"/{running}/load", json=body).status_code == 400
    api.result(running, api.submit_json(running, "save", {"checkpoint_id": "c1"}))
    r = api.post(f"/{running}/load", json={"checkpoint_id": "c1", "target_sub_job_id": "other:training:0"})
    assert r.status_code == 400 and r.json()["code"] == "sub_job_not_found"
    r = api.post(f"/{running}/load", json={"checkpoint_id": "c1", "target_sub_job_id": f"{running}:sampling:0"})
    assert r.status_code == 501 and r.json()["code"] == "not_implemented"
    ok = api.result(running, api.submit_json(running, "load", {"checkpoint_id": "c1", "target_sub_job_id": f"{running}:training:0"}))
    assert ok["checkpoint_id"] == "c1"
    r = api.post(f"/{running}/step", json={"learning_rate": -1})
    assert r.status_code == 400 and r.json()["detail"][0]["loc"] == ["learning_rate"]
    for bad in ("fast", True, False, "0.1"):
        r = api.post(f"/{running}/step", json={"learning_rate": bad})
        assert r.status_code == 400, bad


def test_load_from_another_job(api: Api) -> None:
    src = api.running_job()
    for _ in range(2):
        api.result(src, api.submit_json(src, "step"))
    api.result(src, api.submit_json(src, "save", {"checkpoint_id": "shared"}))
    dst = api.running_job()
    out = api.result(dst, api.submit_json(dst, "load", {"checkpoint_id": "shared", "source_job_id": src}))
    assert out["global_steps"] == 2 and out["source_job_id"] == src
    gone = str(uuid.uuid4())
    failed = api.wait(dst, api.submit_json(dst, "load", {"checkpoint_id": "shared", "source_job_id": gone}))
    assert failed["error"]["code"] == "job_not_found" and gone in failed["error"]["message"]
    # A new job may start from it (source_checkpoint_info).
    cfg = {**training_config(), "source_checkpoint_info": {"checkpoint_id": "shared", "source_job_id": src}}
    job_id = api.running_job(cfg)
    assert api.result(job_id, api.submit_json(job_id, "step"))["global_steps"] == 3
    r = api.post("/", json={"sub_job_configs": [{**cfg, "source_checkpoint_info": {"checkpoint_id": "nope", "source_job_id": src}}]})
    assert r.status_code == 400


def test_export_downloads_a_real_safetensors_file(api: Api, running: str) -> None:
    from safetensors.torch import load

    cid = "..\\..\\etc\\passwd"  # a traversal-looking id ("/" itself is refused at save)
    api.result(running, api.submit_json(running, "save", {"checkpoint_id": cid}))
    r = api.post(f"/{running}/checkpoints/..%5C..%5Cetc%5Cpasswd:export")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["checkpoint_id"] == cid and body["expires_at"].endswith("Z")
    (file,) = body["files"]
    assert "/_fake/exports/" in file["url"] and "passwd" not in file["url"]
    data = requests.get(file["url"], timeout=10).content
    assert len(data) == file["size_bytes"]
    tensors = load(data)
    assert tensors and all(t.numel() for t in tensors.values())
    assert requests.get(file["url"] + "x", timeout=10).status_code == 404


def test_seeded_values_are_reproducible(make_api) -> None:
    def run(seed: int) -> list[Any]:
        api = make_api(seed=seed)
        job_id = api.running_job()
        fb = api.result(job_id, api.submit_frame(job_id, "forward-backward", batch()))
        fwd = api.result(job_id, api.submit_frame(job_id, "forward-no-grad", batch()))
        gen = api.result(job_id, api.submit_frame(job_id, "generate", {"prompts": ["a", "b"]}, force_chunk=False))
        return [fb["avg_loss"], fwd["model_outputs"]["logprobs"].tolist(), [r["token_ids"].tolist() for r in gen["results"]]]

    assert run(11) == run(11)
    assert run(11) != run(12)


def test_tensor_dtypes_accepted(api: Api, running: str) -> None:
    import torch

    for dtype in (torch.int32, torch.int64, torch.int16, torch.uint8):
        payload = {"args": [], "kwargs": {"input_ids": torch.ones(2, 3, dtype=dtype),
                                          "attention_mask": torch.ones(2, 3, dtype=torch.bool),
                                          "labels": torch.ones(2, 3, dtype=torch.bfloat16)}}
        api.result(running, api.submit_frame(running, "forward-backward", payload))


def test_training_ops_need_a_training_sub_job(api: Api) -> None:
    job_id = api.running_job(sampling_config())
    for route, body in (("step", dict[str, Any]()), ("save", dict[str, Any]())):
        r = api.post(f"/{job_id}/{route}", json=body)
        assert r.status_code == 400 and r.json()["code"] == "sub_job_not_found"
    r = api.send_frame(job_id, "forward-backward", batch())
    assert r.status_code == 400 and r.json()["code"] == "sub_job_not_found"
    out = api.result(job_id, api.submit_frame(job_id, "generate", {"prompts": ["a"]}, force_chunk=False))
    assert len(out["results"]) == 1
