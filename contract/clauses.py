"""The clause registry: every checkable promise of the contract, numbered.

Each clause has an id (``AREA-TOPIC-N``), a level (MUST/SHOULD), a profile (``current``
is today's documented surface, ``proposed`` what the seed asks the server to add,
``semantic`` the numeric behaviour a real model must show), who must keep it (server or
client) and one sentence. Tests declare what they check with :func:`checks`; the
conformance report is per clause.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar

Level = Literal["MUST", "SHOULD"]
ClauseProfile = Literal["current", "proposed", "semantic"]
Subject = Literal["server", "client"]

F = TypeVar("F", bound=Callable[..., object])


@dataclass(frozen=True)
class Clause:
    id: str
    level: Level
    profile: ClauseProfile
    subject: Subject
    area: str
    text: str
    #: Where the rule comes from: ``spec §N.N`` (the published specification), ``client``
    #: (reference-client behaviour servers rely on), ``decided`` (the kit's choice where the
    #: spec is silent) or ``proposed`` (what the kit asks the server team to add). Empty
    #: until every clause is traced.
    source: str = ""


#: Areas, in report order, with a title each.
AREAS: dict[str, str] = {
    "ADDR": "Addressing and framing",
    "AUTH": "Auth and isolation",
    "ERR": "Error envelopes",
    "JOB": "Job life",
    "JOBV": "Job validation",
    "CAP": "Capacity",
    "CANCEL": "Cancel",
    "CKPT": "Checkpoints",
    "REQ": "Asynchronous submission",
    "POLL": "Polling and delivery",
    "WIRE": "DSSST1 frames",
    "CHUNK": "Byte chunking",
    "CG": "Chunk groups",
    "FB": "Forward-backward",
    "STEP": "Step",
    "SAVE": "Save and load",
    "GEN": "Generate",
    "GENS": "Generate-stream",
    "OP": "Operations",
    "LIMIT": "Limits and bad input",
    "PROP": "Proposed routes",
    "CLIENT": "Client behaviour",
    "SEM": "Semantics",
}

_M: Level = "MUST"
_S: Level = "SHOULD"

#: A row is (id, level, profile, subject, sentence) or, with its source,
#: (id, level, profile, subject, source, sentence).
_Row = tuple[str, Level, ClauseProfile, Subject, str] | tuple[str, Level, ClauseProfile, Subject, str, str]

_TABLE: tuple[_Row, ...] = (
    # Addressing and framing
    ("ADDR-PREFIX-1", _M, "current", "server", "Every route is served under /api/v2/databases/{database}/schemas/{schema}/{endpoint} for any database, schema and endpoint name."),
    ("ADDR-REQID-1", _M, "current", "server", "Every response carries an x-snowflake-request-id header."),
    ("ADDR-CT-1", _M, "current", "server", "Control-plane, step, save, load and operation calls answer JSON (application/json)."),
    ("ADDR-CT-2", _M, "current", "server", "A JSON route given a body that is not application/json answers 415 with code unsupported_media_type."),
    ("ADDR-CT-3", _M, "current", "server", "forward-backward and generate given a body that is not application/octet-stream answer 415 with code unsupported_media_type."),
    ("ADDR-ROUTE-1", _M, "current", "server", "An unknown path under the prefix answers 404 with the error envelope."),
    # Auth
    ("AUTH-REQUIRED-1", _M, "current", "server", "With auth on, a service call without the Authorization bearer token answers 401 with code unauthenticated."),
    ("AUTH-REQUIRED-2", _M, "current", "server", "With auth on, a service call with a wrong token answers 401 with code unauthenticated."),
    ("AUTH-HEADERS-1", _M, "current", "server", "A call with Authorization: Bearer <PAT> and X-Snowflake-Authorization-Token-Type: PROGRAMMATIC_ACCESS_TOKEN is accepted."),
    ("AUTH-ISOLATION-1", _M, "current", "server", "A job created with one token is invisible (404) to another token, by id and in the job list."),
    ("AUTH-ISOLATION-2", _M, "current", "server", "Data-plane calls and request polls on another token's job answer 404."),
    # Error envelopes
    ("ERR-ENVELOPE-1", _M, "current", "server", "Every 4xx/5xx JSON error body carries a non-empty string code and message."),
    ("ERR-ENVELOPE-2", _M, "current", "server", "Validation failures carry a detail list of {loc, msg, type} naming each bad field."),
    ("ERR-NO500-1", _M, "current", "server", "No input, however malformed, produces a 5xx answer."),
    ("ERR-NOSTATE-1", _M, "current", "server", "A refused call changes no server state (no job, request, checkpoint or step created)."),
    ("ERR-CODE-1", _M, "current", "server", "Each refusal uses the status and code the contract assigns to it (contract.errors.STATUS_OF)."),
    # Job life
    ("JOB-CREATE-1", _M, "current", "server", "A valid create body answers 200 with a job_id that is a UUID string."),
    ("JOB-OBJECT-1", _M, "current", "server", "A job object carries job_id, status, reason, created_at, updated_at, image_tag and sub_jobs."),
    ("JOB-OBJECT-2", _M, "current", "server", "created_at and updated_at are RFC 3339 timestamps."),
    ("JOB-SUBJOB-1", _M, "current", "server", "Sub-job ids are {job_id}:{training|sampling|log_prob}:{index}, index counting occurrences of the type from 0."),
    ("JOB-SUBJOB-2", _M, "current", "server", "Each sub-job carries sub_job_id, job_type, status, model_name and its training_config or inference_config."),
    ("JOB-STATE-1", _M, "current", "server", "A job moves pending -> placing -> initializing -> running and never backwards."),
    ("JOB-STATE-2", _M, "current", "server", "Job statuses are spelled in one dialect: short (running) or enum (JOB_STATE_RUNNING), never mixed."),
    ("JOB-STATE-3", _M, "current", "server", "A failed job carries a non-empty reason."),
    ("JOB-LIST-1", _M, "current", "server", "GET / lists the caller's jobs as {jobs: [...]}, each a full job object."),
    ("JOB-LIST-2", _M, "current", "server", "GET /?status=S lists only jobs whose normalised status is S."),
    ("JOB-GET-1", _M, "current", "server", "GET of an unknown job id answers 404 with code job_not_found."),
    ("JOB-EXPRUN-1", _M, "current", "server", "GET /{job_id}/experiment-run answers experiment_name and experiment_run_name."),
    ("JOB-RUNNING-1", _M, "current", "server", "Data-plane calls on a job that is not running answer 409 with code job_not_running."),
    ("JOB-RUNNING-2", _M, "current", "server", "A cancelled, terminated or failed job refuses data-plane calls."),
    ("JOB-MODEL-1", _M, "current", "server", "Inference-only models are refused for a training sub-job with 400 code model_not_trainable."),
    ("JOB-MODEL-2", _S, "current", "server", "Every model the service caches for training is accepted for training, sampling and log_probability."),
    # Job validation
    ("JOBV-EMPTY-1", _M, "current", "server", "A create body with an empty or missing sub_job_configs list answers 400."),
    ("JOBV-TYPE-1", _M, "current", "server", "A job_type other than training, sampling or log_probability answers 400 naming the field."),
    ("JOBV-MODEL-1", _M, "current", "server", "An empty or missing model_name answers 400 naming the field."),
    ("JOBV-CONFIG-1", _M, "current", "server", "A sub-job must carry exactly one of training_config (training) or inference_config (sampling, log_probability); otherwise 400."),
    ("JOBV-TRAIN-1", _M, "current", "server", "training_config requires a non-empty optimizer, max_seq_len > 0, train_batch_size > 0 and n_gpus > 0; otherwise 400 naming the field."),
    ("JOBV-INFER-1", _M, "current", "server", "inference_config requires max_seq_len > 0 and n_gpus > 0; otherwise 400 naming the field."),
    ("JOBV-PASSTHRU-1", _M, "current", "server", "Open pass-through keys in training_config/inference_config (ds_config, vllm_config, ...) are accepted."),
    ("JOBV-UNKNOWN-1", _M, "current", "server", "Unknown JSON fields are ignored by default (decided)."),
    ("JOBV-JSON-1", _M, "current", "server", "A body that is not valid JSON answers 400 with code malformed_json."),
    # Capacity
    ("CAP-FIELDS-1", _M, "current", "server", "GET /capacity answers has_reservation, max_total_gpus, in_use_gpus and available_gpus (proto3 may omit zero/false)."),
    ("CAP-COUNT-1", _M, "current", "server", "in_use_gpus counts the GPUs of pending, placing, initializing and running jobs; available_gpus is max_total_gpus - in_use_gpus floored at 0."),
    ("CAP-QUEUE-1", _M, "current", "server", "A job that does not fit the free GPUs stays pending until enough GPUs are freed."),
    # Cancel
    ("CANCEL-ACTIVE-1", _M, "current", "server", "Cancelling a pending, placing, initializing or running job answers 200 {} and the job enters cancellation."),
    ("CANCEL-IDEM-1", _M, "current", "server", "Cancelling a cancelling or cancelled job again succeeds (idempotent)."),
    ("CANCEL-CONFLICT-1", _M, "current", "server", "Cancelling a terminated or failed job answers 409."),
    ("CANCEL-UNKNOWN-1", _M, "current", "server", "Cancelling an unknown job answers 404."),
    ("CANCEL-FREE-1", _M, "current", "server", "A cancelled job's GPUs are released from in_use_gpus."),
    # Checkpoints
    ("CKPT-LIST-1", _M, "current", "server", "A checkpoint list entry carries checkpoint_id, global_steps, avg_loss, created_at and checkpoint_type (resumable | weights-only)."),
    ("CKPT-LIST-2", _M, "current", "server", "A saved checkpoint appears in the list until it is deleted."),
    ("CKPT-DELETE-1", _M, "current", "server", "Deleting a checkpoint answers 200/204 and removes it from the list."),
    ("CKPT-DELETE-2", _M, "current", "server", "Deleting or exporting a missing checkpoint answers 404."),
    ("CKPT-EXPORT-1", _M, "current", "server", "Export answers checkpoint_id, files [{filename, url, size_bytes}] and expires_at."),
    ("CKPT-EXPORT-2", _S, "current", "server", "Each exported file URL downloads size_bytes bytes of a valid safetensors file."),
    ("CKPT-PATH-1", _M, "current", "server", "Checkpoint ids and export file names are never used as file-system paths; traversal ids are refused or treated as opaque."),
    # Asynchronous submission
    ("REQ-SUBMIT-1", _M, "current", "server", "An async call answers {request_id, job_id} with the caller's job_id."),
    ("REQ-SUBMIT-2", _M, "current", "server", "Request ids are unique per submission."),
    ("REQ-ORDER-1", _M, "current", "server", "Async requests of one job execute in submit order, so their state effects happen in order."),
    ("REQ-UNKNOWN-1", _M, "current", "server", "Polling an unknown request id answers 404 with code request_not_found."),
    # Polling and delivery
    ("POLL-FIELDS-1", _M, "current", "server", "A poll answer carries request_id, status, created_at, updated_at, result, error, events and next_cursor."),
    ("POLL-STATE-1", _M, "current", "server", "Request statuses are pending, running, streaming, done, failed or cancelled (or their enum spellings in the enum dialect)."),
    ("POLL-TERMINAL-1", _M, "current", "server", "Once terminal, a request's status and result never change."),
    ("POLL-EMPTY-1", _M, "current", "server", "A successful terminal request without a result answers result {} (or null, meaning {})."),
    ("POLL-INLINE-1", _M, "current", "server", "An inline tensor result is {content_type: application/octet-stream, encoding: base64, wire_format: DSSST1, payload_b64}."),
    ("POLL-CHUNKS-1", _M, "current", "server", "A chunked result arrives as result_chunk events {type, payload_b64, payload_sha256} whose sha256 matches the chunk bytes."),
    ("POLL-CHUNKS-2", _M, "current", "server", "While result chunks remain the answer carries next_cursor; the last page carries none."),
    ("POLL-CURSOR-1", _M, "current", "server", "Re-asking the same cursor returns the same page (retry-safe)."),
    ("POLL-MAXEV-1", _M, "current", "server", "max_events defaults to 16: a page carries at most 16 events unless asked otherwise."),
    ("POLL-MAXEV-2", _M, "current", "server", "max_events is capped at 512."),
    ("POLL-MAXEV-3", _M, "current", "server", "An invalid max_events (not a positive integer) answers 400."),
    ("POLL-REASSEMBLE-1", _M, "current", "server", "Reassembled result chunks decode to the same result the inline form would carry."),
    ("POLL-FAILED-1", _M, "current", "server", "A failed request carries an error object with a code and message."),
    # DSSST1
    ("WIRE-FORMAT-1", _M, "current", "server", "Tensor results are DSSST1 frames: u64 LE header length, JSON header with __metadata__.dss {v: DSSST1, tree}, tensor bytes."),
    ("WIRE-TREE-1", _M, "current", "server", "Tree nodes use the t/j/d/l/u tags; tuples are always u; tensor keys are dotted paths (__root__ at the root)."),
    ("WIRE-SCALAR-1", _M, "current", "server", "0-d tensors are stored reshaped to [1] with {scalar: true} and come back 0-d."),
    ("WIRE-EMPTY-1", _M, "current", "server", "A frame without tensors carries the 1-element uint8 __dss_empty__ tensor, dropped on decode."),
    ("WIRE-DTYPE-1", _M, "current", "server", "Every dtype torch and safetensors share round-trips exactly (bool, uint8, int8..int64, float16, bfloat16, float32, float64)."),
    ("WIRE-PICKLE-1", _M, "current", "server", "A payload starting like pickle (0x80 0x02..0x05) is refused with a message saying legacy pickle payloads are refused."),
    ("WIRE-ZIP-1", _M, "current", "server", "A payload starting like a zip (torch.save) is refused with a message saying torch.save payloads are refused."),
    ("WIRE-VERSION-1", _M, "current", "server", "A frame whose dss version is not DSSST1 is refused with 400."),
    ("WIRE-HEADER-1", _M, "current", "server", "A header length over 64 MiB or beyond the body is refused without allocating it."),
    ("WIRE-MALFORMED-1", _M, "current", "server", "A malformed frame answers 400 with code malformed_frame (never 5xx)."),
    ("WIRE-META-1", _S, "current", "server", "Tensor-op requests carry op metadata {response_options: {format: dssst1, delivery: chunked}}."),
    # Byte chunking
    ("CHUNK-FORMAT-1", _M, "current", "server", "A chunk is a DSSST1 frame whose tree is {payload: 1-D uint8} and whose op metadata has one key request_chunk or result_chunk."),
    ("CHUNK-DESC-1", _M, "current", "server", "A chunk descriptor carries chunk_idx, total_chunks, frame_sha256, frame_size_bytes (and chunk_group_id on request chunks)."),
    ("CHUNK-SIZE-1", _M, "current", "server", "Frames split at max_bytes - 8192 byte ranges (half of a max_bytes at or under 8192), halved until every chunk fits max_bytes."),
    ("CHUNK-ANY-1", _M, "current", "server", "forward-backward accepts a frame split into any number of chunks of any valid size."),
    ("CHUNK-VERIFY-1", _M, "current", "server", "Reassembly checks total size and sha256 and refuses a mismatch with a 4xx."),
    ("CHUNK-DESC-2", _M, "current", "server", "Chunks whose descriptors disagree (total_chunks, frame_sha256, frame_size_bytes, operation) or whose index is out of range are refused with a 4xx."),
    ("CHUNK-KIND-1", _M, "current", "server", "A result_chunk sent as a request chunk is refused with a 4xx."),
    ("CHUNK-PLAIN-1", _M, "current", "server", "generate accepts a plain frame that fits, without a chunk envelope."),
    # Chunk groups
    ("CG-NONFINAL-1", _M, "current", "server", "A non-final chunk's answer carries no request_id."),
    ("CG-FINAL-1", _M, "current", "server", "The final chunk's answer carries {request_id, job_id}."),
    ("CG-CONNECTION-1", _M, "current", "server", "Accepted chunks are kept with the training job: a group's chunks may arrive on different connections."),
    ("CG-RESTART-1", _M, "current", "server", "A first-seen group starting at a chunk other than 0 answers 409 with code chunk_group_restart_required."),
    ("CG-CONFLICT-1", _M, "current", "server", "Reusing a group id with another frame_sha256 answers 409 with code chunk_group_conflict."),
    ("CG-CONFLICT-2", _M, "current", "server", "Reusing a group id with another total_chunks answers 409 with code chunk_group_conflict."),
    ("CG-CONFLICT-3", _M, "current", "server", "Re-sending a chunk index of a group with a different payload answers 409 with code chunk_group_conflict."),
    ("CG-MISSING-1", _M, "current", "server", "A final chunk arriving while chunks are missing answers 409 with code chunk_group_missing_chunks."),
    ("CG-IDEM-1", _M, "current", "server", "Repeating a group's final chunk resolves to the original execution: forward-backward never runs twice for one group."),
    ("CG-IDEM-2", _M, "current", "server", "A repeated non-final chunk with the same payload is accepted without effect."),
    ("CG-IDEM-3", _M, "current", "server", "A replayed whole group after completion resolves to the same single execution and result."),
    # Forward-backward
    ("FB-RESULT-1", _M, "current", "server", "forward-backward resolves to {job_id, avg_loss, metrics, post_process_outputs} with a finite avg_loss."),
    ("FB-SHAPE-1", _M, "current", "server", "forward-backward accepts any batch shape and any supported dtype of model kwargs."),
    ("FB-VERL-1", _M, "current", "server", "forward-backward accepts the verl-GRPO kwargs (input_ids, attention_mask, position_ids, prompts, responses, response_mask, advantages, old_log_probs, ref_log_prob)."),
    ("FB-NOINPUT-1", _M, "current", "server", "A forward-backward frame without input_ids answers 400 (or a failed request with an error), never 5xx."),
    # Step
    ("STEP-RESULT-1", _M, "current", "server", "step resolves to {global_steps, last_lr}."),
    ("STEP-COUNT-1", _M, "current", "server", "global_steps goes up by exactly one per step."),
    ("STEP-LR-1", _M, "current", "server", "A step's learning_rate is reported back as last_lr."),
    ("STEP-MEM-1", _S, "current", "server", "peak_memory {gpu_peak, cpu_peak} is reported when step_peak_memory_log was set on the training config."),
    ("STEP-BAD-1", _M, "current", "server", "A negative or non-numeric learning_rate answers 400."),
    # Save / load
    ("SAVE-RESULT-1", _M, "current", "server", "save resolves to {checkpoint_id, checkpoint_path, checkpoint_tag}; the id in the result is authoritative."),
    ("SAVE-TYPE-1", _M, "current", "server", "checkpoint_type is case-insensitive, resumable by default or weights-only; anything else answers 400."),
    ("SAVE-ID-1", _M, "current", "server", "A save with a checkpoint_id uses that id."),
    ("SAVE-LOAD-1", _M, "current", "server", "load of a saved checkpoint restores its global_steps."),
    ("SAVE-LOAD-2", _M, "current", "server", "load without checkpoint_id answers 400; an unknown checkpoint fails with 404 or a failed request naming it."),
    ("SAVE-LOAD-3", _M, "current", "server", "load with a target_sub_job_id not of this job answers 400; a sampling target answers 501."),
    ("SAVE-LOAD-4", _M, "current", "server", "load with source_job_id loads another of the caller's jobs' checkpoint."),
    # Generate
    ("GEN-COUNT-1", _M, "current", "server", "generate answers exactly one result per prompt."),
    ("GEN-TOKENS-1", _M, "current", "server", "Each result has 1 <= len(token_ids) <= max_tokens (default 16) and a text."),
    ("GEN-FINISH-1", _M, "current", "server", "finish_reason is stop or length."),
    ("GEN-LOGPROBS-1", _M, "current", "server", "With sampling_params.logprobs set, per-token logprobs align with token_ids."),
    ("GEN-PROMPTS-1", _M, "current", "server", "generate accepts string prompts and pre-tokenised prompts ([[1, 2, 3]])."),
    ("GEN-ALIGN-1", _M, "current", "server", "sampling_params and routing_key lists must align with prompts; misaligned lists answer 400."),
    ("GEN-TOOLONG-1", _M, "current", "server", "A token prompt with len >= the sampling sub-job's max_seq_len is refused with 400."),
    ("GEN-RESULT-1", _M, "current", "server", "The generate result is {job_id, results: [...]} DSSST1-encoded."),
    # Generate-stream
    ("GENS-SUBMIT-1", _M, "current", "server", "generate-stream takes JSON bytes as application/octet-stream and answers {request_id, job_id, count} with count = number of prompts."),
    ("GENS-EVENTS-1", _M, "current", "server", "Stream events are {type: result, index, result}, {type: error, index, error} and a final {type: done, completed, failed}."),
    ("GENS-DRAIN-1", _M, "current", "server", "Stream events are drained destructively: each event is returned by exactly one poll."),
    ("GENS-BAD-1", _M, "current", "server", "generate-stream given bytes that are not UTF-8 JSON answers 400."),
    # Operations
    ("OP-UNKNOWN-1", _M, "current", "server", "An unknown operation_type answers 400 with code unknown_operation_type."),
    ("OP-ROUTE-1", _M, "current", "server", "When sub_job_id and sub_job_type are both given and name different sub-jobs, the operation answers 400 with code routing_conflict."),
    ("OP-ROUTE-2", _M, "current", "server", "sub_job_type alone routes an operation when the job has exactly one sub-job of that type."),
    ("OP-ROUTE-3", _M, "current", "server", "An unknown sub_job_id answers 400 or 404 with an error envelope."),
    ("OP-FORWARD-1", _M, "current", "server", "forward operation takes a base64 DSSST1 frame, answers a request_id, and resolves to model_outputs.logprobs [B, S]."),
    ("OP-WSYNC-1", _M, "current", "server", "weight-sync answers a request_id and resolves to completion metadata."),
    ("OP-ROUTER-1", _M, "current", "server", "bootstrap-router-replay and router-replay-discard answer inline results."),
    ("OP-RESET-1", _M, "current", "server", "reset-prefix-cache with sub_job_type sampling and no id answers inline."),
    ("OP-CANCEL-1", _M, "current", "server", "cancel-request answers an inline acknowledgement; a non-terminal target request ends cancelled."),
    ("OP-LOGS-1", _M, "current", "server", "tail-logs answers {entries, next_cursor, eof} inline and is allowed while the job is placing."),
    ("OP-PAYLOAD-1", _M, "current", "server", "An operation payload missing a required field answers 400 naming it."),
    # Limits and bad input
    ("LIMIT-BODY-1", _M, "current", "server", "A request body over 60 MiB answers 413 with code payload_too_large."),
    ("LIMIT-BODY-2", _M, "current", "server", "A body of exactly the 60 MiB limit or less is accepted by forward-backward."),
    ("LIMIT-FRAME-1", _M, "current", "server", "Frames over the tree depth, tensor count or JSON size limits answer 400 with a code, in bounded time and memory."),
    ("LIMIT-GROUPS-1", _M, "current", "server", "Open chunk groups and buffered bytes per job are capped; excess answers 429 or 413 with a code."),
    ("LIMIT-RETRYAFTER-1", _S, "current", "server", "429 and 503 answers carry Retry-After."),
    ("LIMIT-EXPIRE-1", _S, "current", "server", "Abandoned chunk groups expire after an idle time and release their bytes."),
    # Proposed
    ("PROP-FNG-1", _M, "proposed", "server", "POST /{job_id}/forward-no-grad accepts DSSST1 request chunks and answers {request_id, job_id}."),
    ("PROP-FNG-2", _M, "proposed", "server", "forward-no-grad resolves to {model_outputs: {logprobs [B, S] float32, entropy?}, metrics} as DSSST1."),
    ("PROP-FNG-3", _M, "proposed", "server", "forward-no-grad returns entropy [B, S] when meta.calculate_entropy is set."),
    ("PROP-FNG-4", _M, "proposed", "server", "forward-no-grad accepts the verl envelope kwargs and reference_model."),
    ("PROP-LOGPROBS-1", _M, "proposed", "server", "POST /{job_id}/log-probs takes JSON {prompts, completions?, top_k?} and resolves to a DSSST1 result."),
    ("PROP-METRICS-1", _M, "proposed", "server", "forward-backward results carry metrics {grad_norm, ppo_kl, pg_clipfrac_lower, pg_loss, kl_loss, kl_coef}."),
    ("PROP-METRICS-2", _M, "proposed", "server", "step results carry a metrics block with grad_norm."),
    ("PROP-SHAPE-1", _M, "proposed", "server", "forward-no-grad logprobs follow the shape rule for any batch shape."),
    # Client behaviour
    ("CLIENT-RETRY-1", _M, "current", "client", "The client retries connection errors, time-outs and 404/409/429/500/502/503/504 up to ten times with back-off."),
    ("CLIENT-RETRY-2", _M, "current", "client", "create-job is retried only when the request provably never reached the server."),
    ("CLIENT-RETRY-3", _S, "current", "client", "The client honours Retry-After, bounded by its back-off cap."),
    ("CLIENT-CHUNK-1", _M, "current", "client", "forward-backward always sends the chunk envelope, even for a single chunk."),
    ("CLIENT-CHUNK-2", _M, "current", "client", "On chunk_group_restart_required the client replays the whole group once from chunk 0."),
    ("CLIENT-CHUNK-3", _M, "current", "client", "A non-final chunk answered with a request_id is a protocol error."),
    ("CLIENT-POLL-1", _M, "current", "client", "The client drains result chunks by cursor without back-off and verifies each sha256."),
    ("CLIENT-STATE-1", _M, "current", "client", "The client normalises job and request states (lower case, enum prefixes stripped, synonyms folded)."),
    ("CLIENT-ERR-1", _M, "current", "client", "Every client failure is a typed error naming the route, status, code and x-snowflake-request-id."),
    ("CLIENT-PROMPT-1", _M, "current", "client", "Pre-tokenised prompts too long for the sampling sub-job fail before sending."),
    ("CLIENT-SHAPE-1", _M, "current", "client", "Client results agree with the server's: shapes per the shape rules through every delivery form and status dialect."),
    # Semantics
    ("SEM-KL-1", _S, "semantic", "server", "After weight-sync, forward-no-grad log-probs of sampled tokens agree with generate's log-probs (k3 KL <= 0.05)."),
    ("SEM-PPOKL-1", _S, "semantic", "server", "Before any step, old and new log-probs agree so ppo_kl == 0."),
    ("SEM-LEARN-1", _S, "semantic", "server", "A step with lr > 0 on a repeated batch lowers its loss."),
    ("SEM-RESTORE-1", _S, "semantic", "server", "A load restores the losses a batch had at save time exactly."),
    ("SEM-STALE-1", _S, "semantic", "server", "A sampler not synced keeps its outputs for a fixed seed."),
    ("SEM-SHIFT-1", _S, "semantic", "server", "logprobs[:, i] is the log-probability of input_ids[:, i + 1] (the shifted convention)."),
    ("SEM-SIGN-1", _S, "semantic", "server", "A policy-gradient step raises the log-probability of positive-advantage responses."),
    # Appended for the schemathesis run of the conformance suite (schema-level promises).
    ("ERR-SCHEMA-1", _M, "current", "server", "Every answer matches the OpenAPI document (contract.openapi) for its route and status, body and content type."),
    ("ERR-REJECT-1", _M, "current", "server", "Input that violates the OpenAPI document's request schema is refused with a 4xx, never accepted."),
    # Appended for limits, faults and hostile input (server bounds; the fake's admin API).
    ("LIMIT-FRAME-2", _M, "current", "server", "The frame limits apply to frames reassembled from request chunks: an over-limit frame sent in chunks is refused with a 4xx and a code, and nothing executes."),
    ("LIMIT-RELEASE-1", _M, "current", "server", "A finished chunk group releases its buffered chunk bytes; only what a replay needs is kept."),
    ("LIMIT-RECOVER-1", _M, "current", "server", "After refusing hostile input (malformed frames, bad chunk sequences, limit breaches) the server keeps serving normal traffic on the same job."),
    ("AUTH-ADMIN-1", _M, "current", "server", "With tokens configured, the fake's admin API (/_fake/..., export downloads excepted) answers 401 to calls without a valid bearer token."),
    ("LIMIT-RETRYAFTER-2", _M, "current", "server", "A refusal for a server limit (429 chunk_group_limit or rate_limited) carries Retry-After (decided), so clients back off instead of spinning."),
    ("LIMIT-EXPIRE-2", _M, "current", "server", "An abandoned chunk group stops counting against the open-group and buffered-byte caps once the server's idle time has passed (decided)."),
    # Wave 2: a block per issue, so parallel work appends in different places.
    # -- strict fake (issue 11) --
    # -- hardening (issue 12) --
    ("AUTH-ADMIN-2", _M, "current", "server", "decided", "With service tokens and an admin token configured, the fake's admin API answers 403 to every service token and 200 to the admin token only."),
    ("LIMIT-ACCOUNT-1", _M, "current", "server", "decided", "Chunk-group caps apply per account (token) as well as per job and per server: one account at its caps does not stop another account's chunked upload."),
    ("LIMIT-IDLE-1", _S, "current", "server", "decided", "A request body that stops arriving is answered 408 (or the connection closed) after the server's idle time and its bytes freed, never held until the client gives up."),
    ("LIMIT-LATE-1", _M, "current", "server", "decided", "A call whose job ended while its body was still arriving answers 409 and leaves no request behind."),
    ("POLL-EXPIRE-1", _M, "proposed", "server", "decided", "A result the server has freed (read to the end past its grace, or pushed out by newer unread results) answers 410 with code result_expired, never another result or an empty one."),
    ("WIRE-DUPKEY-1", _M, "current", "server", "decided", "A frame whose safetensors header names a key twice (anywhere, __metadata__ included) is refused with 400, as safetensors refuses it."),
    ("CKPT-ID-1", _S, "current", "server", "decided", "A checkpoint id a URL path cannot carry (., .., /, control characters, not UTF-8) is refused at save with 400 and a code, so no checkpoint exists that cannot be exported or deleted."),
    ("LIMIT-BOUNDS-1", _S, "proposed", "server", "decided", "top_k, max_tokens, n and the prompt count have bounds: a call over one answers 400 naming the limit, in bounded time and memory."),
    # -- at most once (issue 13) --
    # -- openapi (issue 19) --
    # -- recipes, logs, TLS (issue 17) --
)


def _clause(row: _Row) -> Clause:
    cid, level, profile, subject = row[0], row[1], row[2], row[3]
    source, text = (row[4], row[5]) if len(row) == 6 else ("", row[4])
    return Clause(cid, level, profile, subject, cid.split("-", 1)[0], text, source)


CLAUSES: dict[str, Clause] = {row[0]: _clause(row) for row in _TABLE}

#: The attribute :func:`checks` sets on a test function.
CLAUSES_ATTR = "__gs_clauses__"


def clause(cid: str) -> Clause:
    """Look up a clause; unknown ids are a programming error."""
    try:
        return CLAUSES[cid]
    except KeyError:
        raise KeyError(f"unknown clause id {cid!r}") from None


def validate_ids(ids: Iterable[str]) -> tuple[str, ...]:
    """Return the ids as a tuple, raising KeyError on any unknown one."""
    out = tuple(ids)
    for cid in out:
        clause(cid)
    return out


def checks(*ids: str) -> Callable[[F], F]:
    """Declare the clauses a test checks: ``@checks("CG-RESTART-1")``."""
    valid = validate_ids(ids)

    def mark(fn: F) -> F:
        existing: tuple[str, ...] = getattr(fn, CLAUSES_ATTR, ())
        setattr(fn, CLAUSES_ATTR, existing + valid)
        return fn

    return mark


def clauses_of(fn: object) -> tuple[str, ...]:
    """The clause ids a test function declared (none when undecorated)."""
    return tuple(getattr(fn, CLAUSES_ATTR, ()))


def for_profile(profile: ClauseProfile, subject: Subject | None = None) -> list[Clause]:
    """Clauses a run of ``profile`` judges: proposed includes current; semantic is its own."""
    wanted = {"current"} if profile == "current" else {"current", "proposed"}
    if profile == "semantic":
        wanted = {"semantic"}
    return [
        c
        for c in CLAUSES.values()
        if c.profile in wanted and (subject is None or c.subject == subject)
    ]
