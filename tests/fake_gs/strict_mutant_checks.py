"""Liveness checks for the strict-fake mutants, merged into test_fake_mutants.CHECKS.

Each takes an Api on a fake running that mutant and shows the dropped rule with the
smallest observation: the call the plain fake refuses succeeds.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from fake_gs_api import Api, batch, sampling_config, training_config

from contract.models.catalog import INFERENCE_ONLY_MODELS

TINY: dict[str, Any] = {"engine": "tiny"}


def _op(api: Api, job: str, kind: str, payload: dict[str, Any] | None = None, **hints: Any) -> Any:
    return api.post(f"/{job}/operation", json={"operation_type": kind, "payload": payload or {}, **hints})


def _create(api: Api, *configs: dict[str, Any], **body: Any) -> Any:
    return api.post("/", json={"sub_job_configs": list(configs), **body})


def _saved(api: Api, job: str, ckpt: str, kind: str = "resumable") -> None:
    api.result(job, api.submit_json(job, "save", {"checkpoint_id": ckpt, "checkpoint_type": kind}))


def _from(cfg: dict[str, Any], ckpt: str, job: str) -> dict[str, Any]:
    return {**cfg, "source_checkpoint_info": {"checkpoint_id": ckpt, "source_job_id": job}}


def dp_mismatch_loads(api: Api) -> None:
    src = api.running_job(training_config(n_gpus=2))
    _saved(api, src, "dp2")
    assert _create(api, _from(training_config(n_gpus=1), "dp2", src)).status_code == 200


def sampler_any_checkpoint(api: Api) -> None:
    src = api.running_job(training_config())
    _saved(api, src, "full")
    assert _create(api, _from(sampling_config(), "full", src)).status_code == 200


def sampler_fresh(api: Api) -> None:
    job = api.running_job(training_config(), sampling_config())
    ids = [[257, 104, 105, 32, 104, 105]]
    for _ in range(2):
        api.result(job, api.submit_frame(job, "forward-backward", {"args": [], "kwargs": {"input_ids": ids, "labels": ids}}))
        api.result(job, api.submit_json(job, "step", {"learning_rate": 0.05}))
    _saved(api, job, "w", "weights-only")
    served, fresh = api.running_job(_from(sampling_config(), "w", job)), api.running_job(sampling_config())
    req = {"prompts": [[104, 105]], "sampling_params": {"max_tokens": 4, "seed": 1, "logprobs": 1}}

    def logprobs(j: str) -> list[float]:
        return [float(x) for x in api.result(j, api.submit_frame(j, "generate", req))["results"][0]["logprobs"]]

    assert logprobs(served) == logprobs(fresh)


def lora_unchecked(api: Api) -> None:
    job = api.running_job(training_config(), sampling_config())
    r = _op(api, job, "weight-sync", {"weight_format": "lora"}, sub_job_id=f"{job}:training:0")
    assert r.status_code == 200


def routing_hint_optional(api: Api) -> None:
    job = api.running_job(training_config(), sampling_config())
    assert _op(api, job, "router-replay-discard", {"sample_ids": [1]}).status_code == 200


def bootstrap_any_direction(api: Api) -> None:
    job = api.running_job(training_config(), sampling_config())
    t, s = f"{job}:training:0", f"{job}:sampling:0"
    r = _op(api, job, "bootstrap-router-replay", {"source_sub_job_id": t, "target_sub_job_id": s}, sub_job_id=t)
    assert r.status_code == 200


def reset_any_sub_job(api: Api) -> None:
    job = api.running_job(training_config(), sampling_config())
    assert _op(api, job, "reset-prefix-cache", sub_job_id=f"{job}:training:0").status_code == 200


def generate_on_trainer(api: Api) -> None:
    job = api.running_job(training_config())
    assert api.send_frame(job, "generate", {"prompts": [[1, 2]]}).status_code == 200


def _config_accepted(**extra: Any) -> Callable[[Api], None]:
    def check(api: Api) -> None:
        assert _create(api, training_config(n_gpus=4, **extra)).status_code == 200

    return check


def inference_model_trains(api: Api) -> None:
    trainer = {**training_config(), "model_name": INFERENCE_ONLY_MODELS[0]}
    assert _create(api, trainer).status_code == 200


def seq_len_unchecked(api: Api) -> None:
    job = api.running_job(training_config(max_seq_len=8))
    assert api.send_frame(job, "forward-backward", batch(2, 9)).status_code == 200


def generation_overruns(api: Api) -> None:
    job = api.running_job(training_config(), sampling_config(max_seq_len=8))
    req = {"prompts": [[1, 2, 3, 4, 5, 6]] * 8, "sampling_params": {"max_tokens": 1000}}
    results = api.result(job, api.submit_frame(job, "generate", req))["results"]
    assert max(len(r["token_ids"]) for r in results) > 2


def capacity_global(api: Api) -> None:
    api.running_job(training_config(n_gpus=2))
    other = Api(api.base_url, "b")
    assert other.get("/capacity").json()["in_use_gpus"] == 2


def cancel_request_lies(api: Api) -> None:
    job = api.running_job()
    ran = api.submit_json(job, "step")
    after = api.submit_json(job, "step")
    assert api.result(job, after)["global_steps"] == 2  # `ran` executed first
    r = _op(api, job, "cancel-request", {"request_id": ran})
    assert r.json()["cancelled"] is True


def job_id_ignored(api: Api) -> None:
    mine = str(uuid.uuid4())
    assert _create(api, training_config(), job_id=mine).json()["job_id"] != mine


STRICT_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "dp-mismatch-loads": (dp_mismatch_loads, {}),
    "sampler-any-checkpoint": (sampler_any_checkpoint, {}),
    "tiny-sampler-fresh": (sampler_fresh, TINY),
    "lora-unchecked": (lora_unchecked, {}),
    "routing-hint-optional": (routing_hint_optional, {}),
    "bootstrap-any-direction": (bootstrap_any_direction, {}),
    "reset-any-sub-job": (reset_any_sub_job, {}),
    "generate-on-trainer": (generate_on_trainer, {}),
    "sp-size-unchecked": (_config_accepted(sp_size=3), {}),
    "inference-model-trains": (inference_model_trains, {}),
    "offload-mode-unchecked": (_config_accepted(ac_config={"mode": "selective", "offload_config": {"enabled": True}}), {}),
    "multiplex-id-unchecked": (_config_accepted(multiplex_job_id="abc"), {}),
    "multiplex-any-target": (_config_accepted(multiplex_job_id=f"{uuid.uuid4()}:training:0"), {}),
    "seq-len-unchecked": (seq_len_unchecked, {}),
    "generation-overruns": (generation_overruns, {}),
    "capacity-global": (capacity_global, {"token": "a", "tokens": ("a", "b")}),
    "cancel-request-lies": (cancel_request_lies, {"latency": "polls:3"}),
    "job-id-ignored": (job_id_ignored, {}),
}
