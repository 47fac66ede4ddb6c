"""The OpenAPI document's examples, and the resources they name.

A generic tool's examples phase (schemathesis') sends every operation's documented examples
before anything random. When the examples name resources the server holds, every operation
answers 2xx in that phase, in every run: reach no longer rests on a random walk of links.
The examples name a running job (``EXAMPLE_JOB_ID``: a training and a sampling sub-job), two
checkpoints of it (one for the load and export examples, one the delete example removes, so
their order does not matter), a finished save request of it (the poll example), and a
second job, the one the cancel example ends. The fake holds them when started with
``--example-data``; a server team maps them to resources of its own endpoint (docs: the schemathesis check).
"""

from __future__ import annotations

from typing import Any

from contract.models.catalog import SMALLEST_TRAINING_MODEL
from contract.routes import DEFAULT_ENDPOINT, Route

EXAMPLE_JOB_ID = "00000000-0000-4000-8000-00000000e001"
EXAMPLE_CANCEL_JOB_ID = "00000000-0000-4000-8000-00000000e002"
EXAMPLE_REQUEST_ID = "00000000-0000-4000-8000-00000000e003"
EXAMPLE_CHECKPOINT_ID = "example-checkpoint"
EXAMPLE_DELETE_CHECKPOINT_ID = "example-checkpoint-to-delete"
#: The service prefix the examples use (any prefix reaches the same account).
PREFIX_EXAMPLES: dict[str, str] = {"database": "EXAMPLE_DB", "schema": "PUBLIC", "endpoint": DEFAULT_ENDPOINT}
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

#: JSON bodies the service executes on a job with both sub-jobs: the examples of these
#: operations, and what create-job's links hand them (merge_body false: sent whole).
EXECUTED_BODIES: dict[str, dict[str, Any]] = {
    "step": {},
    "save": {},
    "log_probs": {"prompts": ["Hello"]},
    "generate_stream": ONE_PROMPT,
}

#: operation -> {name: (summary, value)}: the request body examples the document gives.
#: Tools send them in their examples phase and mix them into generated bodies (schemathesis:
#: one draw in five), so jobs with every sub-job kind exist beside the generated ones.
REQUEST_EXAMPLES: dict[str, dict[str, tuple[str, Any]]] = {
    "create_job": {"sample_job": ("One training and one sampling sub-job of the smallest model",
                                  SAMPLE_JOB)},
    **{name: {"executed": ("A body the service executes on the example job", body)}
       for name, body in EXECUTED_BODIES.items()},
    "load": {"example_checkpoint": ("The example job's own checkpoint, into its training sub-job",
                                    {"checkpoint_id": EXAMPLE_CHECKPOINT_ID}),
             **{f"first_save_{dialect}": (f"The checkpoint a first save names ({dialect} dialect)",
                                          {"checkpoint_id": ckpt})
                for dialect, ckpt in zip(("kit", "spec"), FIRST_SAVE_IDS, strict=True)}},
    "operation": {"tail_logs": ("The training sub-job's log lines (answered inline)",
                                {"operation_type": "tail-logs", "payload": {}})},
}


def param_examples(route: Route, name: str) -> list[str]:
    """The example values of ``route``'s path parameter ``name``: the example resources
    (cancel ends a job of its own, delete removes a checkpoint of its own)."""
    if name in PREFIX_EXAMPLES:
        return [PREFIX_EXAMPLES[name]]
    if name == "job_id":
        return [EXAMPLE_CANCEL_JOB_ID if route.name == "cancel_job" else EXAMPLE_JOB_ID]
    if name == "checkpoint_id":
        own = EXAMPLE_DELETE_CHECKPOINT_ID if route.name == "delete_checkpoint" else EXAMPLE_CHECKPOINT_ID
        return [own, *FIRST_SAVE_IDS]
    if name == "request_id":
        return [EXAMPLE_REQUEST_ID]
    return []


def request_examples(route: Route) -> dict[str, Any]:
    """The media type's ``examples`` of ``route``'s JSON request body (empty when it has none)."""
    return {name: {"summary": summary, "value": value}
            for name, (summary, value) in REQUEST_EXAMPLES.get(route.name, {}).items()}


__all__ = ["EXAMPLE_CANCEL_JOB_ID", "EXAMPLE_CHECKPOINT_ID", "EXAMPLE_DELETE_CHECKPOINT_ID", "EXAMPLE_JOB_ID",
           "EXAMPLE_REQUEST_ID", "EXECUTED_BODIES", "FIRST_SAVE_IDS", "ONE_PROMPT", "PREFIX_EXAMPLES",
           "REQUEST_EXAMPLES", "SAMPLE_JOB", "param_examples", "request_examples"]
