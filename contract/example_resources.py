"""The resources the OpenAPI document's examples name.

A generic tool's examples phase (schemathesis') sends every operation's documented examples
before anything random. When the examples name resources the server holds, every operation
answers 2xx in that phase, in every run: reach no longer rests on a random walk of links.
The examples name a running job (``EXAMPLE_JOB_ID``: a training and a sampling sub-job), two
checkpoints of it (one for the load and export examples, one the delete example removes, so
their order does not matter), a finished save request of it (the poll example), and a
second job, the one the cancel example ends. The fake holds them when started with
``--example-data``; a server team maps them to resources of its own endpoint (docs: the schemathesis check).
Which route's example names which resource is a field of the route's row
(``contract.routes``: ``examples``, ``executed_body``, ``example_ids``); the document puts
them in place (``contract.openapi``).
"""

from __future__ import annotations

from typing import Any

from contract.models.catalog import SMALLEST_TRAINING_MODEL

EXAMPLE_JOB_ID = "00000000-0000-4000-8000-00000000e001"
EXAMPLE_CANCEL_JOB_ID = "00000000-0000-4000-8000-00000000e002"
EXAMPLE_REQUEST_ID = "00000000-0000-4000-8000-00000000e003"
EXAMPLE_CHECKPOINT_ID = "example-checkpoint"
EXAMPLE_DELETE_CHECKPOINT_ID = "example-checkpoint-to-delete"
#: The ids a job's first save gets when the request names none (the kit's ``global_step{N}``,
#: the spec dialect's ``ckpt-step{N}``, N = 0 before any step), so a tool that draws an
#: example for a job it saved in reaches the checkpoint.
FIRST_SAVE_IDS = ("global_step0", "ckpt-step0")

#: One training and one sampling sub-job of the smallest model: the example job, and the job
#: the get-capacity -> create-job link proposes, so a walk from it can reach every data-plane
#: operation (a generated job often lacks the sub-job a call needs, and is refused with 400).
SAMPLE_JOB: dict[str, Any] = {"sub_job_configs": [
    {"job_type": "training", "model_name": SMALLEST_TRAINING_MODEL,
     "training_config": {"optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 4096,
                         "train_batch_size": 2, "n_gpus": 1}},
    {"job_type": "sampling", "model_name": SMALLEST_TRAINING_MODEL,
     "inference_config": {"max_seq_len": 4096, "n_gpus": 1}},
]}
ONE_PROMPT: dict[str, Any] = {"prompts": ["Hello"], "sampling_params": {"max_tokens": 4}}

__all__ = ["EXAMPLE_CANCEL_JOB_ID", "EXAMPLE_CHECKPOINT_ID", "EXAMPLE_DELETE_CHECKPOINT_ID", "EXAMPLE_JOB_ID",
           "EXAMPLE_REQUEST_ID", "FIRST_SAVE_IDS", "ONE_PROMPT", "SAMPLE_JOB"]
