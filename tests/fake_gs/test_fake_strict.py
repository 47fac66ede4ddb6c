"""The fake refuses what the real service refuses (spec §8, §6.5), on both engines.

Each test is one "Why" bullet of the issue: on the old fake every call below succeeded.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from fake_gs_api import Api, batch, sampling_config, training_config

from contract.states import normalize_job_state

ENGINES = ["shape", "tiny"]
LORA = {"peft_type": "Lora", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}


@pytest.fixture(params=ENGINES)
def eapi(request: pytest.FixtureRequest, make_api: Callable[..., Api]) -> Api:
    """An Api on a fresh fake of each engine."""
    return make_api(engine=request.param)


def create(api: Api, *configs: dict[str, Any], **body: Any) -> Any:
    return api.post("/", json={"sub_job_configs": list(configs), **body})


def refused(r: Any, code: str, status: int = 400) -> dict[str, Any]:
    assert r.status_code == status and r.json()["code"] == code, r.text
    return dict(r.json())


def sampler_from(ckpt: str, job: str, **extra: Any) -> dict[str, Any]:
    cfg = sampling_config(**extra)
    cfg["source_checkpoint_info"] = {"checkpoint_id": ckpt, "source_job_id": job}
    return cfg


def trainer_from(ckpt: str, job: str, **extra: Any) -> dict[str, Any]:
    cfg = training_config(**extra)
    cfg["source_checkpoint_info"] = {"checkpoint_id": ckpt, "source_job_id": job}
    return cfg


def saved(api: Api, job: str, ckpt: str, kind: str = "resumable") -> None:
    api.result(job, api.submit_json(job, "save", {"checkpoint_id": ckpt, "checkpoint_type": kind}))


def op(api: Api, job: str, kind: str, payload: dict[str, Any] | None = None, **hints: Any) -> Any:
    return api.post(f"/{job}/operation", json={"operation_type": kind, "payload": payload or {}, **hints})


# --- DP size (spec §6.4, §6.5, §8.2) ------------------------------------------------------


def test_load_across_dp_sizes_needs_load_optimizer_states_false(eapi: Api) -> None:
    src = eapi.running_job(training_config(n_gpus=2))
    saved(eapi, src, "dp2")
    same = eapi.running_job(training_config(n_gpus=2))
    assert eapi.result(same, eapi.submit_json(same, "load", {"checkpoint_id": "dp2", "source_job_id": src}))
    other = eapi.running_job(training_config(n_gpus=4))
    rid = eapi.submit_json(other, "load", {"checkpoint_id": "dp2", "source_job_id": src})
    failed = eapi.wait(other, rid)
    assert failed["status"] == "failed" and failed["error"]["code"] == "dp_size_mismatch", failed
    assert normalize_job_state(eapi.job(other)["status"]) == "running"  # a failed request, not a failed job
    fresh_opt = eapi.running_job(training_config(n_gpus=4, load_optimizer_states=False))
    out = eapi.result(fresh_opt, eapi.submit_json(fresh_opt, "load", {"checkpoint_id": "dp2", "source_job_id": src}))
    assert out["checkpoint_id"] == "dp2"


def test_create_time_init_across_dp_sizes(eapi: Api) -> None:
    src = eapi.running_job(training_config(n_gpus=2))
    saved(eapi, src, "dp2")
    body = refused(create(eapi, trainer_from("dp2", src, n_gpus=1)), "dp_size_mismatch")
    assert body["detail"][0]["loc"][-1] == "load_optimizer_states"
    assert create(eapi, trainer_from("dp2", src, n_gpus=1, load_optimizer_states=False)).status_code == 200
    assert create(eapi, trainer_from("dp2", src, n_gpus=2)).status_code == 200


# --- sampling sub-jobs from checkpoints (spec §6.5, §8.4, §13.4) --------------------------


def test_sampler_needs_an_existing_weights_only_checkpoint(eapi: Api) -> None:
    src = eapi.running_job(training_config())
    saved(eapi, src, "full")
    saved(eapi, src, "weights", "weights-only")
    refused(create(eapi, sampler_from("full", src)), "checkpoint_type_mismatch")
    refused(create(eapi, sampler_from("nope", src)), "validation_failed")
    lonely = sampling_config()
    lonely["source_checkpoint_info"] = {"checkpoint_id": "nope"}  # no source job, found nowhere
    refused(create(eapi, lonely), "validation_failed")
    no_id = sampling_config()
    no_id["source_checkpoint_info"] = {"source_job_id": src}
    body = refused(create(eapi, no_id), "validation_failed")
    assert ["sub_job_configs", 0, "source_checkpoint_info", "checkpoint_id"] in [d["loc"] for d in body["detail"]]
    assert create(eapi, sampler_from("weights", src)).status_code == 200


def _greedy(api: Api, job: str) -> tuple[list[int], list[float]]:
    req = {"prompts": [[104, 105, 32]], "sampling_params": {"max_tokens": 8, "temperature": 0.0, "seed": 5,
                                                            "logprobs": 1}}
    out = api.result(job, api.submit_frame(job, "generate", req))["results"][0]
    return [int(t) for t in out["token_ids"]], [round(float(x), 4) for x in out["logprobs"]]


def test_sampler_from_saved_weights_serves_the_trained_model(make_api: Callable[..., Api]) -> None:
    api = make_api(engine="tiny")
    job = api.running_job(training_config(), sampling_config())
    fresh = _greedy(api, job)
    ids = [[257, 104, 105, 32, 104, 105, 32, 104, 105]]
    for _ in range(3):
        api.result(job, api.submit_frame(job, "forward-backward", {"args": [], "kwargs": {"input_ids": ids, "labels": ids}}))
        api.result(job, api.submit_json(job, "step", {"learning_rate": 0.05}))
    saved(api, job, "trained", "weights-only")
    r = op(api, job, "weight-sync", sub_job_id=f"{job}:training:0")
    api.result(job, r.json()["request_id"])
    trained = _greedy(api, job)
    assert trained != fresh  # training moved the model
    served = api.running_job(sampler_from("trained", job))
    assert _greedy(api, served) == trained


# --- LoRA weight-sync (spec §7.3) ---------------------------------------------------------


def _lora_job(api: Api, train: Any, sample: Any) -> str:
    t, s = training_config(), sampling_config()
    if train is not None:
        t["training_config"]["peft_config"] = train
    if sample is not None:
        s["inference_config"]["peft_config"] = sample
    return api.running_job(t, s)


def _lora_sync(api: Api, job: str) -> Any:
    return op(api, job, "weight-sync", {"weight_format": "lora"}, sub_job_id=f"{job}:training:0")


def test_lora_sync_needs_matching_peft_configs(eapi: Api) -> None:
    refused(_lora_sync(eapi, j := _lora_job(eapi, None, None)), "lora_not_configured")
    refused(_lora_sync(eapi, _lora_job(eapi, LORA, None)), "lora_not_configured")
    refused(_lora_sync(eapi, _lora_job(eapi, LORA, {**LORA, "r": 16})), "lora_not_configured")
    assert op(eapi, j, "weight-sync", {"weight_format": "vllm"}, sub_job_id=f"{j}:training:0").status_code == 200
    ok = _lora_job(eapi, LORA, {**LORA, "target_modules": ["v_proj", "q_proj"]})
    r = _lora_sync(eapi, ok)
    assert r.status_code == 200 and eapi.result(ok, r.json()["request_id"])["weight_format"] == "lora"
    defaults = _lora_job(eapi, {"peft_type": "Lora"}, {"peft_type": "Lora", "r": 8, "lora_alpha": 8})
    assert _lora_sync(eapi, defaults).status_code == 200  # the server's defaults (r, lora_alpha 8) agree


# --- routing and receivers (spec §7, §7.4, §7.6, §6.6) -------------------------------------


def test_receivers_must_be_named_and_right(eapi: Api) -> None:
    job = eapi.running_job(training_config(), sampling_config())
    t, s = f"{job}:training:0", f"{job}:sampling:0"
    for kind, payload in (("weight-sync", {}), ("router-replay-discard", {"sample_ids": ["a"]}),
                          ("bootstrap-router-replay", {"source_sub_job_id": s, "target_sub_job_id": t})):
        refused(op(eapi, job, kind, payload), "routing_hint_required")
    assert op(eapi, job, "router-replay-discard", {"sample_ids": ["a"]}, sub_job_id=s).status_code == 200
    refused(op(eapi, job, "bootstrap-router-replay", {"source_sub_job_id": t, "target_sub_job_id": s}, sub_job_id=s),
            "wrong_sub_job_type")
    refused(op(eapi, job, "bootstrap-router-replay", {"source_sub_job_id": s, "target_sub_job_id": t}, sub_job_id=s),
            "wrong_sub_job_type")  # the training target is the receiver
    assert op(eapi, job, "bootstrap-router-replay", {"source_sub_job_id": s, "target_sub_job_id": t},
              sub_job_type="training").status_code == 200
    refused(op(eapi, job, "reset-prefix-cache", sub_job_id=t), "wrong_sub_job_type")
    only_train = eapi.running_job(training_config())
    assert op(eapi, only_train, "weight-sync").status_code == 200  # one sub-job: nothing to choose
    r = eapi.send_frame(only_train, "generate", {"prompts": [[1, 2]]})
    refused(r, "sub_job_not_found")
    r = eapi.post(f"/{only_train}/generate-stream", data=b'{"prompts": ["hi"]}',
                  headers={"Content-Type": "application/octet-stream"})
    refused(r, "sub_job_not_found")


# --- create-time config rules (spec §8.2, §8.3) --------------------------------------------


@pytest.mark.parametrize("extra,field", [
    ({"sp_size": 3}, "sp_size"),
    ({"sp_size": 0}, "sp_size"),
    ({"ac_config": {"mode": "selective", "offload_config": {"enabled": True}}}, "mode"),
    ({"ac_config": {"offload_config": {"enabled": True}}}, "mode"),
    ({"multiplex_job_id": "abc"}, "multiplex_job_id"),
    ({"multiplex_job_id": "abc:training"}, "multiplex_job_id"),
])
def test_config_rules_refused_at_create(api: Api, extra: dict[str, Any], field: str) -> None:
    body = refused(create(api, training_config(n_gpus=4, **extra)), "validation_failed")
    assert field in body["detail"][0]["loc"]


@pytest.mark.parametrize("extra", [
    {"sp_size": 2},
    {"ac_config": {"mode": "full", "offload_config": {"enabled": True}}},
    {"ac_config": {"mode": "selective", "offload_config": {"enabled": False}}},
])
def test_config_rules_accept_valid_values(api: Api, extra: dict[str, Any]) -> None:
    assert create(api, training_config(n_gpus=4, **extra)).status_code == 200


def test_multiplex_names_a_running_sub_job_of_the_callers(make_server) -> None:
    """JOBV-MULTIPLEX-2: a missing or foreign job, a sub-job the job lacks, a cancelled job
    are refused naming the field; onto a running sub-job the job is taken and its GPUs are
    counted once (they are its host's) until the host ends."""
    srv = make_server(tokens=("a", "b"), max_total_gpus=64)
    api, other = Api(srv.base_url, "a"), Api(srv.base_url, "b")
    host = api.running_job(training_config(n_gpus=8), sampling_config())
    foreign = other.running_job()
    cancelled = api.running_job()
    assert api.call("POST", f"/{cancelled}:cancel").status_code == 200
    for target, says in ((f"{uuid.uuid4()}:training:0", "you hold no job"),
                         (f"{foreign}:training:0", "you hold no job"),
                         (f"{host}:training:3", "has no sub-job"),
                         (f"{cancelled}:training:0", "is cancelled")):
        body = refused(create(api, training_config(multiplex_job_id=target)), "validation_failed")
        assert "multiplex_job_id" in body["detail"][0]["loc"] and says in body["message"], body
    before = api.get("/capacity").json()["in_use_gpus"]
    guest = api.running_job(training_config(n_gpus=8, multiplex_job_id=f"{host}:training:0"))
    assert api.get("/capacity").json()["in_use_gpus"] == before
    assert api.call("POST", f"/{host}:cancel").status_code == 200
    assert api.get("/capacity").json()["in_use_gpus"] == 8  # the guest's GPUs are its own now
    assert api.job(guest)["status"] == "running"


def test_multiplex_id_of_the_job_itself_and_on_samplers(api: Api) -> None:
    own = str(uuid.uuid4())
    refused(create(api, training_config(multiplex_job_id=f"{own}:training:0"), job_id=own), "validation_failed")
    cfg = sampling_config()
    cfg["inference_config"]["multiplex_job_id"] = "abc"
    refused(create(api, cfg), "validation_failed")


# --- sequence lengths ----------------------------------------------------------------------


def test_training_frames_longer_than_max_seq_len_are_refused(eapi: Api) -> None:
    job = eapi.running_job(training_config(max_seq_len=16), sampling_config())
    refused(eapi.send_frame(job, "forward-backward", batch(2, 17), force_chunk=False), "sequence_too_long")
    assert eapi.send_frame(job, "forward-backward", batch(2, 16), force_chunk=False).status_code == 200


def test_generation_never_exceeds_max_seq_len(eapi: Api) -> None:
    job = eapi.running_job(training_config(), sampling_config(max_seq_len=64))
    prompt = list(range(1, 41))
    req = {"prompts": [prompt] * 4, "sampling_params": {"max_tokens": 100_000, "temperature": 1.0, "ignore_eos": True}}
    for item in eapi.result(job, eapi.submit_frame(job, "generate", req))["results"]:
        assert len(prompt) + len(item["token_ids"]) <= 64
    too_long = eapi.wait(job, eapi.submit_frame(job, "generate", {"prompts": ["x " * 100]}))
    assert too_long["status"] == "failed" and "max_seq_len" in too_long["error"]["message"]


# --- capacity per account (spec §5.4) ------------------------------------------------------


def test_capacity_is_per_account(make_server: Callable[..., Any]) -> None:
    srv = make_server(tokens=("alice", "bob"), max_total_gpus=2)
    alice, bob = Api(srv.base_url, "alice"), Api(srv.base_url, "bob")
    first = alice.running_job(training_config(n_gpus=2))
    queued = alice.create_job(training_config(n_gpus=1))
    assert normalize_job_state(alice.job(queued)["status"]) == "pending"  # alice's ceiling is full
    theirs = bob.running_job(training_config(n_gpus=2))  # bob's ceiling is his own
    cap_a, cap_b = alice.get("/capacity").json(), bob.get("/capacity").json()
    assert cap_a["in_use_gpus"] == 3 and cap_a["available_gpus"] == 0
    assert cap_b == {"has_reservation": True, "max_total_gpus": 2, "reserved_gpus": 2,
                     "in_use_gpus": 2, "available_gpus": 0}
    alice.post(f"/{first}:cancel")
    assert normalize_job_state(alice.job(queued)["status"]) == "running"
    assert normalize_job_state(bob.job(theirs)["status"]) == "running"


# --- client-chosen job ids -----------------------------------------------------------------


def test_client_job_id_is_honoured_and_unique(api: Api) -> None:
    mine = str(uuid.uuid4())
    r = create(api, training_config(), job_id=mine)
    assert r.status_code == 200 and r.json()["job_id"] == mine
    assert api.job(mine)["sub_jobs"][0]["sub_job_id"] == f"{mine}:training:0"
    refused(create(api, training_config(), job_id=mine), "job_conflict", 409)
    refused(create(api, training_config(), job_id="not-a-uuid"), "validation_failed")
    assert len([j for j in api.get("/").json()["jobs"] if j["job_id"] == mine]) == 1
