"""What the document says of answers: the fields each answer schema requires, taken from
the clause that requires them (never more than the clause does: the models may declare
defaults for fields a server sends anyway), and the looser forms the spec allows.

Every answer schema stays open (``additionalProperties``): spec §11 calls the results
open, and no answer of the spec is closed, so a server adding a field is conformant
(``contract.forms`` unknown-fields).
"""

from __future__ import annotations

from typing import Any

#: answer schema -> (the clause requiring its fields, the fields it requires).
REQUIRED: dict[str, tuple[str, tuple[str, ...]]] = {
    "CreateJobResponse": ("JOB-CREATE-1", ("job_id",)),
    "Job": ("JOB-OBJECT-1", ("job_id", "status", "reason", "created_at", "updated_at", "image_tag", "sub_jobs")),
    "SubJob": ("JOB-SUBJOB-2", ("sub_job_id", "job_type", "status", "model_name")),
    "JobList": ("JOB-LIST-1", ("jobs",)),
    "JobListEntry": ("JOB-LIST-1", ("job_id", "status", "sub_jobs")),
    "ExperimentRun": ("JOB-EXPRUN-1", ("experiment_name", "experiment_run_name")),
    "Checkpoint": ("CKPT-LIST-1", ("checkpoint_id", "global_steps", "avg_loss", "created_at", "checkpoint_type")),
    "CheckpointList": ("CKPT-LIST-1", ("checkpoints",)),
    "ExportResponse": ("CKPT-EXPORT-1", ("checkpoint_id", "files", "expires_at")),
    "ExportFile": ("CKPT-EXPORT-1", ("filename", "url", "size_bytes")),
    "SubmitResponse": ("REQ-SUBMIT-1", ("request_id", "job_id")),
    "GenerateStreamSubmitResponse": ("GENS-SUBMIT-1", ("request_id", "job_id", "count")),
    "RequestStatus": ("POLL-FIELDS-1", ("request_id", "status", "created_at", "updated_at", "result", "error",
                                        "events", "next_cursor")),
    "InlineFrame": ("POLL-INLINE-1", ("content_type", "encoding", "wire_format", "payload_b64")),
    "ResultChunkEvent": ("POLL-CHUNKS-1", ("type", "payload_b64", "payload_sha256")),
    "ForwardBackwardResult": ("FB-RESULT-1", ("job_id", "avg_loss", "metrics", "post_process_outputs")),
    "StepResult": ("STEP-RESULT-1", ("global_steps", "last_lr")),
    "SaveResult": ("SAVE-RESULT-1", ("checkpoint_id",)),
    "GenerateResult": ("GEN-RESULT-1", ("job_id", "results")),
    "TailLogsResult": ("OP-LOGS-1", ("entries", "next_cursor", "eof")),
    # proto3 JSON may leave any of them out (spec §5.4).
    "Capacity": ("CAP-FIELDS-1", ()),
}
#: Fields of the answers whose form the spec leaves looser than the kit's models say.
_LOOSER = {
    ("CreateJobResponse", "job_id"): {"type": "string", "minLength": 1,
                                      "description": "Opaque (spec §5.1 shows job-id; the kit's are UUIDs)."},
    ("RequestStatus", "next_cursor"): {"anyOf": [{"type": "string"}, {"type": "null"}],
                                       "description": "Empty: null or \"\" (spec §6.8)."},
}


def require_as_clauses(components: dict[str, Any]) -> None:
    """Each answer schema requires exactly the fields its clause requires, and is open."""
    for name, (_cid, fields) in REQUIRED.items():
        schema = components.get(name)
        if schema is None:
            continue
        if fields:
            schema["required"] = list(fields)
        else:
            schema.pop("required", None)
        schema["additionalProperties"] = True
    for (name, prop), looser in _LOOSER.items():
        schema = components.get(name)
        if schema is not None:
            schema["properties"][prop] = looser
