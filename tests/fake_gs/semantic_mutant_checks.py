"""Liveness checks for the tiny engine's semantic mutants, merged into
test_fake_mutants.CHECKS.

Each takes an Api on a fake running that mutant with ``--engine tiny`` and shows the
numeric bug with the smallest observation of it, over HTTP (so the wiring from the
settings to the engine is covered too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_gs_api import Api, sampling_config, training_config

TINY: dict[str, Any] = {"engine": "tiny"}
IDS = [[257, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100]]


def _job(api: Api) -> str:
    return api.running_job(training_config(), sampling_config())


def _logprobs(api: Api, job: str, meta: dict[str, Any] | None = None) -> Any:
    body = {"args": [], "kwargs": {"input_ids": IDS}, "meta": meta or {}}
    return api.result(job, api.submit_frame(job, "forward-no-grad", body))["model_outputs"]["logprobs"]


def _sft(api: Api, job: str) -> float:
    body = {"args": [], "kwargs": {"input_ids": IDS, "labels": IDS}}
    return float(api.result(job, api.submit_frame(job, "forward-backward", body))["avg_loss"])


def _train(api: Api, job: str, lr: float = 3e-3) -> float:
    loss = _sft(api, job)
    api.result(job, api.submit_json(job, "step", {"learning_rate": lr}))
    return loss


def _generate(api: Api, job: str) -> list[float]:
    req = {"prompts": [IDS[0][:4]], "sampling_params": {"max_tokens": 6, "seed": 3, "logprobs": 1}}
    out = api.result(job, api.submit_frame(job, "generate", req))
    return [float(x) for x in out["results"][0]["logprobs"]]


def _sync(api: Api, job: str) -> None:
    r = api.post(f"/{job}/operation", json={"operation_type": "weight-sync", "payload": {},
                                            "sub_job_id": f"{job}:training:0"})
    api.result(job, r.json()["request_id"])


def logprobs_shifted(api: Api) -> None:
    lp = _logprobs(api, _job(api))
    assert float(lp[0, 0]) == 0.0 and float(lp[0, -1]) != 0.0  # column i scores token i


def stale_sampler(api: Api) -> None:
    job = _job(api)
    before = _generate(api, job)
    _train(api, job)
    _sync(api, job)
    assert _generate(api, job) == before


def sampler_drifts(api: Api) -> None:
    job = _job(api)
    before = _generate(api, job)
    _train(api, job)
    assert _generate(api, job) != before


def advantages_flipped(api: Api) -> None:
    job = _job(api)
    body = {
        "args": [],
        "kwargs": {"input_ids": IDS, "advantages": [1.0]},
        "processing": {"loss_fn": "grpo"},
    }
    out = api.result(job, api.submit_frame(job, "forward-backward", body))
    assert out["avg_loss"] > 0.99  # -advantage x ratio is -1 for a positive advantage


def step_ascends(api: Api) -> None:
    job = _job(api)
    first = _train(api, job)
    assert _train(api, job) > first


def load_partial(api: Api) -> None:
    job = _job(api)
    _train(api, job)
    api.result(job, api.submit_json(job, "save", {"checkpoint_id": "c"}))
    _train(api, job)
    trained = _sft(api, job)
    api.result(job, api.submit_json(job, "load", {"checkpoint_id": "c"}))
    _train(api, job)
    assert _sft(api, job) != trained  # the optimizer restarted from scratch


def fwd_ignores_temperature(api: Api) -> None:
    job = _job(api)
    assert (_logprobs(api, job, {"temperature": 0.5}) == _logprobs(api, job)).all()


SEMANTIC_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "tiny-logprobs-shifted": (logprobs_shifted, TINY),
    "tiny-stale-sampler": (stale_sampler, TINY),
    "tiny-sampler-drifts": (sampler_drifts, TINY),
    "tiny-advantages-flipped": (advantages_flipped, TINY),
    "tiny-step-ascends": (step_ascends, TINY),
    "tiny-load-partial": (load_partial, TINY),
    "tiny-fwd-ignores-temperature": (fwd_ignores_temperature, TINY),
}
