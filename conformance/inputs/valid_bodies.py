"""Valid JSON bodies the properties start from (and break on purpose).

The shared job is small on purpose: one training and one sampling sub-job of the smallest
model, one GPU each. It also carries an open pass-through key and an unknown field, so on
a real service (where every job costs GPUs) its creation doubles as the evidence for
JOBV-PASSTHRU-1 and JOBV-UNKNOWN-1.
"""

from __future__ import annotations

from typing import Any

TRAIN_MAX_SEQ_LEN = 512
TRAINING_MODEL = "Qwen/Qwen3-0.6B"
SAMPLING_MAX_SEQ_LEN = 256
#: Unknown fields the shared job carries (a server must ignore them).
UNKNOWN_TOP = "gs_conformance_probe"
UNKNOWN_SUB = "gs_conformance_note"


def training(
    model: str, n_gpus: int = 1, max_seq_len: int = TRAIN_MAX_SEQ_LEN, **extra: Any
) -> dict[str, Any]:
    return {
        "job_type": "training",
        "model_name": model,
        "training_config": {
            "optimizer": {"name": "AdamW", "lr": 1e-4},
            "max_seq_len": max_seq_len,
            "train_batch_size": 1,
            "n_gpus": n_gpus,
            **extra,
        },
    }


def inference(
    job_type: str,
    model: str,
    n_gpus: int = 1,
    max_seq_len: int = SAMPLING_MAX_SEQ_LEN,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "job_type": job_type,
        "model_name": model,
        "inference_config": {"max_seq_len": max_seq_len, "n_gpus": n_gpus, **extra},
    }


def sampling(model: str, n_gpus: int = 1, **extra: Any) -> dict[str, Any]:
    return inference("sampling", model, n_gpus, **extra)


def job(*subs: dict[str, Any], experiment: str | None = "gs-conformance") -> dict[str, Any]:
    body: dict[str, Any] = {"sub_job_configs": list(subs)}
    if experiment:
        body["experiment_name"] = experiment
    return body


def small_job(model: str, n_gpus: int = 1) -> dict[str, Any]:
    """The cheapest valid job: one training sub-job."""
    return job(training(model, n_gpus))


def shared_job(model: str) -> dict[str, Any]:
    """The session's job: training (+ peak-memory logging) and sampling."""
    train = training(model, step_peak_memory_log=True)
    train[UNKNOWN_SUB] = "unknown sub-job field; servers ignore it"
    body = job(train, sampling(model))
    body[UNKNOWN_TOP] = {"why": "unknown top-level field; servers ignore it (JOBV-UNKNOWN-1)"}
    return body


def step(learning_rate: float | None = None) -> dict[str, Any]:
    """The step body of ``Ops.step``, raw or through the client (no rate: the job's own)."""
    return {} if learning_rate is None else {"learning_rate": learning_rate}


def save(checkpoint_id: str | None = None, checkpoint_type: str | None = None) -> dict[str, Any]:
    """The save body of ``Ops.save``, raw or through the client (absent fields left out)."""
    return {
        k: v
        for k, v in (("checkpoint_id", checkpoint_id), ("checkpoint_type", checkpoint_type))
        if v is not None
    }
