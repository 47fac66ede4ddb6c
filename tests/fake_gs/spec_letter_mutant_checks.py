"""Liveness checks for the mutants of the rules of the spec's letter the fake enforces, merged into
test_fake_mutants.CHECKS: each shows the call the plain fake refuses being taken."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_gs_api import Api, sampling_config, training_config


def _weights(api: Api) -> tuple[str, str]:
    """A running job with a weights-only checkpoint: (job id, checkpoint id)."""
    job = api.running_job(training_config())
    ckpt = api.result(job, api.submit_json(job, "save", {"checkpoint_type": "weights-only"}))["checkpoint_id"]
    return job, ckpt


def debug_gate_open(api: Api) -> None:
    body = {"sub_job_configs": [training_config()], "debug": {"trace": True}}
    assert api.post("/", json=body).status_code == 200


def body_taken(api: Api) -> None:
    job = api.running_job(training_config())
    assert api.post(f"/{job}:cancel", json={"reason": "x"}).status_code == 200


def init_credentials_taken(api: Api) -> None:
    job, ckpt = _weights(api)
    info = {"checkpoint_id": ckpt, "source_job_id": job, "stage_info": {"location": "s3://b/p"}}
    assert api.post("/", json={"sub_job_configs": [{**sampling_config(), "source_checkpoint_info": info}]}).status_code == 200


def init_any_job(api: Api) -> None:
    _, ckpt = _weights(api)
    info = {"checkpoint_id": ckpt}
    assert api.post("/", json={"sub_job_configs": [{**sampling_config(), "source_checkpoint_info": info}]}).status_code == 200


SPEC_LETTER_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "debug-gate-open": (debug_gate_open, {}),
    "body-taken": (body_taken, {}),
    "init-credentials-taken": (init_credentials_taken, {}),
    "init-any-job": (init_any_job, {}),
}
