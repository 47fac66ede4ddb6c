"""Every checkable rule of the published spec, in the kit's words, with what judges it.

One row per rule: its section, the rule, the clauses judging it (any source: a spec
clause states the rule, a decided one the kit's choice where the rule leaves one, a client
one what the reference client does), whether the fake enforces it (``yes``, ``partial:
why``, ``n/a``: a rule of clients only) and the rows of ``contract.forms`` through which
``--dialect any`` exercises the rule's alternatives. ``docs/spec-coverage.md`` is
rendered from this table and the clauses (``python -m contract coverage``); tests hold
every rule to a clause, every clause id to the registry and every form to a rule.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass


@dataclass(frozen=True)
class Rule:
    """One checkable rule of the spec."""

    section: str
    _: KW_ONLY
    text: str
    clauses: tuple[str, ...]
    fake: str
    forms: tuple[str, ...]


#: One row per rule: its section, then by keyword the rule, the clauses judging it, whether
#: the fake enforces it and the forms through which ``--dialect any`` exercises it.
RULES: tuple[Rule, ...] = (
    Rule("1.1", text="a job without a sampling sub-job cannot generate", clauses=("GEN-SAMPLER-1",), fake="yes", forms=()),
    Rule("1.2", text="sub-job ids are {job_id}:{training|sampling|log_prob}:{index}, the index counting each type from 0", clauses=("JOB-SUBJOB-1",), fake="yes", forms=("id-shape",)),
    Rule("1.4", text="inference-only and coming-soon models are not trainable", clauses=("JOB-MODEL-1",), fake="yes", forms=("error-forms", "validation-422")),
    Rule("1.4", text="cached training models serve training and inference", clauses=("JOB-MODEL-2",), fake="yes", forms=()),
    Rule("2.1", text="routes live under /api/v2/databases/{db}/schemas/{schema}/{endpoint}", clauses=("ADDR-PREFIX-1", "ADDR-PREFIX-2"), fake="yes", forms=()),
    Rule("2.1", text="the statements API sits outside the prefix", clauses=("JOB-LOGS-1",), fake="yes", forms=()),
    Rule("2.2", text="calls authenticate with a bearer PAT and the PROGRAMMATIC_ACCESS_TOKEN type header", clauses=("AUTH-HEADERS-1", "AUTH-REQUIRED-1", "AUTH-REQUIRED-2", "ERR-STATUS-1"), fake="partial: only with --token (tokens off by default)", forms=("error-forms",)),
    Rule("2.3", text="control-plane, step, save, load and operation bodies are JSON; frames are octet; generate-stream JSON under octet", clauses=("ADDR-CT-4", "ADDR-CT-1", "ADDR-CT-2", "ADDR-CT-3", "GENS-SUBMIT-1"), fake="yes", forms=()),
    Rule("2.4", text="answers may carry x-snowflake-request-id", clauses=("ADDR-REQID-1", "CLIENT-ERR-1"), fake="yes", forms=("request-id-header",)),
    Rule("3.1", text="a scheduling call answers {request_id, job_id}, then is polled", clauses=("REQ-SUBMIT-1", "REQ-SUBMIT-2"), fake="yes", forms=("id-shape", "unknown-fields", "success-status")),
    Rule("3.2", text="job states pending, placing, initializing, running, cancelled, terminated, failed; initializing is visible", clauses=("JOB-STATE-1", "JOB-STATE-2"), fake="yes (start-up is instant by default: placing and initializing are seen with --startup)", forms=("job-state-spelling",)),
    Rule("3.2", text="a failed job explains itself in reason", clauses=("JOB-STATE-3",), fake="yes", forms=()),
    Rule("3.2", text="clients fold legacy done/unknown and JOB_STATE_ names", clauses=("CLIENT-STATE-1",), fake="n/a", forms=("job-state-spelling",)),
    Rule("3.3", text="request states include the synonyms completed, succeeded, canceled and raw enum names", clauses=("POLL-STATE-1", "POLL-STATE-2", "POLL-TERMINAL-1", "CLIENT-STATE-1"), fake="yes", forms=("request-state-spelling",)),
    Rule("3.4", text="clients poll from 0.5 s, x1.25, capped at 6 s, for 1800 s", clauses=("CLIENT-POLL-2",), fake="n/a", forms=()),
    Rule("3.5", text="clients retry connection failures and 404/409/429/5xx ten times with jitter", clauses=("CLIENT-RETRY-1", "CLIENT-ONCE-1", "CLIENT-ONCE-2"), fake="n/a", forms=()),
    Rule("3.5", text="create-job is retried only when the connection was never established", clauses=("CLIENT-RETRY-2",), fake="n/a", forms=()),
    Rule("3.6", text="error bodies are {message, code} or a detail list of {loc, msg, type}", clauses=("ERR-ENVELOPE-1", "ERR-ENVELOPE-2", "ERR-CODE-1", "ERR-STATUS-1"), fake="yes", forms=("error-forms", "validation-422")),
    Rule("3.6", text="data-plane calls and polls need a running job", clauses=("JOB-RUNNING-1", "JOB-RUNNING-2"), fake="yes", forms=("precondition-status",)),
    Rule("3.6", text="tail-logs is the exception allowed while placing", clauses=("OP-LOGS-2",), fake="yes", forms=("log-cursor",)),
    Rule("4", text="the seventeen routes and methods exist", clauses=("ADDR-ROUTE-1", "ERR-SCHEMA-1"), fake="yes", forms=()),
    Rule("5.1", text="sub_job_configs is a non-empty list", clauses=("JOBV-EMPTY-1",), fake="yes", forms=("error-forms", "validation-422")),
    Rule("5.1", text="create answers {job_id}", clauses=("JOB-CREATE-1", "JOB-CREATE-2"), fake="yes", forms=("id-shape", "success-status")),
    Rule("5.1", text="a top-level debug block is gated by the server", clauses=("JOB-DEBUG-1", "JOB-DEBUG-2"), fake="yes", forms=()),
    Rule("5.2", text="the job object's fields, flat sub-jobs carrying sub_job_id, job_type, status, model_name and config", clauses=("JOB-OBJECT-1", "JOB-OBJECT-2", "JOB-SUBJOB-2", "JOB-SUBJOB-3"), fake="yes", forms=("unknown-fields", "timestamp-form")),
    Rule("5.2", text="image_tag may be empty before placement; submitted_by and owner_role may be absent", clauses=("JOB-OBJECT-1",), fake="yes", forms=("job-optional-fields",)),
    Rule("5.3", text="GET / lists {jobs: [...]}, each with job_id, status, sub_jobs; ?status filters", clauses=("JOB-LIST-1", "JOB-LIST-2", "JOB-LIST-3"), fake="yes", forms=("list-entry-minimal",)),
    Rule("5.4", text="capacity has has_reservation, max_total_gpus, in_use_gpus, available_gpus; proto3 may omit false/zero", clauses=("CAP-FIELDS-1",), fake="yes", forms=("capacity-proto3",)),
    Rule("5.4", text="in_use counts pending/placing/initializing/running jobs; available is floored at 0 and may be capped", clauses=("CAP-COUNT-1", "CAP-COUNT-2", "CANCEL-FREE-1", "CAP-QUEUE-1"), fake="yes", forms=("capacity-capped",)),
    Rule("5.4", text="the account comes from the session, not the caller", clauses=("CAP-ACCOUNT-1",), fake="yes", forms=()),
    Rule("5.5", text="cancel takes no body", clauses=("CANCEL-BODY-1", "CANCEL-BODY-2", "CLIENT-NOBODY-1"), fake="yes", forms=()),
    Rule("5.5", text="pending, placing and running jobs enter cancellation", clauses=("CANCEL-ACTIVE-1", "CANCEL-ACTIVE-2"), fake="yes", forms=("cancelling-visible", "cancel-answer")),
    Rule("5.5", text="cancelling a cancelling or cancelled job is an idempotent success", clauses=("CANCEL-IDEM-1", "CANCEL-ANSWER-1"), fake="yes", forms=("cancel-answer",)),
    Rule("5.5", text="cancelling a terminated or failed job is a precondition/conflict-style error", clauses=("CANCEL-CONFLICT-1", "CANCEL-UNKNOWN-1"), fake="yes", forms=("error-forms",)),
    Rule("5.6", text="experiment-run answers experiment_name and experiment_run_name", clauses=("JOB-EXPRUN-1",), fake="yes", forms=("unknown-fields",)),
    Rule("5.7", text="checkpoint entries carry checkpoint_id, global_steps, avg_loss, created_at, checkpoint_type", clauses=("CKPT-LIST-1", "CKPT-LIST-2"), fake="yes", forms=("timestamp-form",)),
    Rule("5.8", text="export takes no body and answers checkpoint_id, files [{filename, url, size_bytes}], expires_at", clauses=("CKPT-EXPORT-1", "CKPT-EXPORT-2", "CKPT-EXPORT-3", "CKPT-EXPORT-4", "CANCEL-BODY-2"), fake="yes", forms=("unknown-fields",)),
    Rule("5.9", text="delete answers 200/204 with no body", clauses=("CKPT-DELETE-1",), fake="partial: the kit dialect answers 200 {} (the spec and any dialects 204 or no body)", forms=("delete-answer",)),
    Rule("5.9", text="deleting a missing checkpoint is an error (e.g. 404)", clauses=("CKPT-DELETE-2", "ERR-STATUS-1"), fake="yes", forms=("error-forms",)),
    Rule("6.1", text="forward-backward takes a DSSST1 frame, in chunks above 60 MiB", clauses=("CHUNK-ANY-1", "LIMIT-BODY-2"), fake="yes", forms=()),
    Rule("6.1", text="only the last chunk's answer may carry request_id", clauses=("CG-NONFINAL-1", "CG-FINAL-1", "CLIENT-CHUNK-3"), fake="yes", forms=()),
    Rule("6.1", text="its result carries job_id, avg_loss, metrics, post_process_outputs", clauses=("FB-RESULT-1", "FB-RESULT-3"), fake="yes", forms=("unknown-fields", "result-delivery")),
    Rule("6.2", text="step takes an optional learning_rate ({} allowed)", clauses=("STEP-RESULT-1", "STEP-BAD-1"), fake="yes", forms=()),
    Rule("6.2", text="its result carries global_steps and last_lr, a number or a list", clauses=("STEP-RESULT-1", "STEP-COUNT-1", "STEP-LR-1"), fake="yes", forms=("last-lr-list", "last-lr-scheduled")),
    Rule("6.2", text="peak_memory {gpu_peak, cpu_peak} byte counts appear only with step_peak_memory_log", clauses=("STEP-MEM-1",), fake="yes", forms=()),
    Rule("6.3", text="checkpoint_type is resumable or weights-only, resumable by default", clauses=("SAVE-TYPE-1", "SAVE-TYPE-2"), fake="yes", forms=()),
    Rule("6.3", text="the caller's checkpoint_id may be dropped; the result's id is authoritative", clauses=("SAVE-ID-1", "SAVE-ID-2"), fake="yes (the spec and any dialects name the checkpoint themselves)", forms=("save-id-server",)),
    Rule("6.3", text="the result carries checkpoint_id, checkpoint_path, checkpoint_tag where present", clauses=("SAVE-RESULT-1", "SAVE-RESULT-2"), fake="yes", forms=("save-result-fields",)),
    Rule("6.4", text="load needs checkpoint_id", clauses=("SAVE-LOAD-2", "SAVE-LOAD-5"), fake="yes", forms=("error-forms", "validation-422")),
    Rule("6.4", text="source_job_id loads another job's checkpoint", clauses=("SAVE-LOAD-4", "SAVE-LOAD-1"), fake="yes", forms=()),
    Rule("6.4", text="target_sub_job_id: omitted routes to training; foreign is 400; non-training is 501", clauses=("SAVE-LOAD-3",), fake="yes", forms=("error-forms",)),
    Rule("6.4", text="a DP-size change needs load_optimizer_states false", clauses=("SAVE-DP-1",), fake="yes", forms=()),
    Rule("6.5", text="sampling initialisation needs a weights-only checkpoint", clauses=("CKPT-INIT-2",), fake="yes", forms=()),
    Rule("6.5", text="training initialisation across DP sizes needs load_optimizer_states false", clauses=("CKPT-INIT-1",), fake="yes", forms=()),
    Rule("6.5", text="the source job need not be running once the checkpoint is saved", clauses=("CKPT-INIT-4",), fake="yes", forms=()),
    Rule("6.5", text="the server stamps stage_info credentials; clients should not send them", clauses=("CKPT-INIT-5", "CKPT-INIT-7"), fake="yes", forms=()),
    Rule("6.6", text="prompts are strings and/or token lists; one token prompt is [[...]]", clauses=("GEN-PROMPTS-1",), fake="yes", forms=()),
    Rule("6.6", text="sampling_params and routing_key are one value or a list aligned with prompts", clauses=("GEN-ALIGN-1",), fake="yes", forms=("error-forms", "validation-422")),
    Rule("6.6", text="token prompts must leave room for one output token; string prompts are the server's to check", clauses=("CLIENT-PROMPT-1", "GEN-TOOLONG-1", "GEN-SEQLEN-1", "JOB-SUBJOB-3"), fake="yes", forms=()),
    Rule("6.6", text="the result is {job_id, results: [{text, token_ids, finish_reason}, ...]}", clauses=("GEN-RESULT-1", "GEN-COUNT-1", "GEN-TOKENS-1", "GEN-TOKENS-2", "GEN-TOKENS-3", "GEN-FINISH-1", "GEN-LOGPROBS-1"), fake="yes", forms=("unknown-fields", "result-delivery")),
    Rule("6.6", text="generate sends the plain frame when it fits", clauses=("CHUNK-PLAIN-1",), fake="yes", forms=()),
    Rule("6.7", text="generate-stream bodies stay within 60 MiB and are not chunked", clauses=("LIMIT-BODY-1", "LIMIT-BODY-3"), fake="yes", forms=()),
    Rule("6.7", text="generate-stream answers {request_id, job_id, count}", clauses=("GENS-SUBMIT-1",), fake="yes", forms=("id-shape",)),
    Rule("6.7", text="stream events (result, error, done) are drained destructively", clauses=("GENS-EVENTS-1", "GENS-DRAIN-1", "GENS-BAD-1"), fake="yes", forms=("unknown-fields",)),
    Rule("6.8", text="max_events defaults to 16 and is capped at 512", clauses=("POLL-MAXEV-1", "POLL-MAXEV-2", "POLL-MAXEV-3", "POLL-MAXEV-4"), fake="yes", forms=("short-pages",)),
    Rule("6.8", text="cursor is a retry cursor for result chunks", clauses=("POLL-CURSOR-1",), fake="yes", forms=("short-pages",)),
    Rule("6.8", text="a poll carries request_id, status, created_at, updated_at, result, error, events, next_cursor", clauses=("POLL-FIELDS-1", "POLL-FAILED-1"), fake="yes", forms=("poll-empty-fields", "unknown-fields", "timestamp-form")),
    Rule("6.8", text="a successful terminal request without a result reads as {}", clauses=("POLL-EMPTY-1",), fake="yes", forms=("done-result-null", "inflight-result-empty")),
    Rule("7", text="operation_type is required", clauses=("OP-TYPE-1", "OP-UNKNOWN-1"), fake="yes", forms=("error-forms", "validation-422")),
    Rule("7", text="sub_job_id and sub_job_type must resolve to the same target", clauses=("OP-ROUTE-1", "OP-ROUTE-2", "OP-ROUTE-3"), fake="yes", forms=()),
    Rule("7", text="an answer with a request_id is polled, any other is inline", clauses=("OP-WSYNC-1", "OP-ROUTER-1", "OP-ROUTER-2", "OP-RESET-1", "OP-CANCEL-1"), fake="yes", forms=("bootstrap-polled",)),
    Rule("7", text="only tail-logs is allowed while placing; other operations need running", clauses=("OP-RUNNING-1", "OP-LOGS-2"), fake="yes", forms=()),
    Rule("7.1", text="forward takes {payload_b64, content_type}; over 60 MiB it is rejected", clauses=("OP-FORWARD-1",), fake="yes", forms=()),
    Rule("7.2", text="weight-sync is async; weight_format vllm (default) or hf", clauses=("OP-WSYNC-1",), fake="yes", forms=()),
    Rule("7.3", text="LoRA sync needs a matching peft_config on both sub-jobs", clauses=("OP-LORA-1",), fake="yes", forms=()),
    Rule("7.4", text="bootstrap goes from a sampling source to a training target; max_cache_bytes is optional", clauses=("OP-BOOTSTRAP-1", "OP-HINT-1"), fake="yes", forms=()),
    Rule("7.6", text="reset-prefix-cache takes drain, timeout_s, retry_interval_s", clauses=("OP-RESET-1", "OP-RESET-2"), fake="yes", forms=()),
    Rule("7.7", text="cancel-request {request_id} is acknowledged inline; the server finds the sub-job", clauses=("OP-CANCEL-1", "OP-CANCEL-2", "OP-CANCEL-3"), fake="yes", forms=()),
    Rule("7.8", text="tail-logs {cursor?, max_lines?} answers {entries, next_cursor, eof}", clauses=("OP-LOGS-1",), fake="yes", forms=("log-cursor",)),
    Rule("8.1", text="exactly one type-specific config is set", clauses=("JOBV-CONFIG-1",), fake="yes", forms=("error-forms", "validation-422")),
    Rule("8.1", text="job_type is training, sampling or log_probability", clauses=("JOBV-TYPE-1",), fake="yes", forms=("error-forms", "validation-422")),
    Rule("8.1", text="model_name is non-empty", clauses=("JOBV-MODEL-1",), fake="yes", forms=("error-forms", "validation-422")),
    Rule("8.1", text="the optional fields have the types the table gives", clauses=("JOBV-FIELDS-1", "JOBV-UNKNOWN-1"), fake="yes", forms=("error-forms", "validation-422")),
    Rule("8.2", text="training_config needs a non-empty optimizer and positive max_seq_len, train_batch_size, n_gpus", clauses=("JOBV-TRAIN-1",), fake="yes", forms=("error-forms", "validation-422")),
    Rule("8.2", text="open pass-through keys are accepted", clauses=("JOBV-PASSTHRU-1",), fake="yes", forms=()),
    Rule("8.2", text="sp_size divides the world size", clauses=("JOBV-SP-1",), fake="yes", forms=()),
    Rule("8.2", text="activation offload needs mode full", clauses=("JOBV-OFFLOAD-1",), fake="yes", forms=()),
    Rule("8.2", text="peft r and lora_alpha default to 8", clauses=("OP-LORA-1",), fake="yes", forms=()),
    Rule("8.2", text="clients refuse fused_cross_entropy with fp32_lm_head or a token chunk size", clauses=("CLIENT-CONFIG-1",), fake="n/a", forms=()),
    Rule("8.3", text="inference_config needs positive max_seq_len and n_gpus", clauses=("JOBV-INFER-1",), fake="yes", forms=("error-forms", "validation-422")),
    Rule("8.3", text="multiplex_job_id is a complete sub-job id outside the job", clauses=("JOBV-MULTIPLEX-1",), fake="yes", forms=()),
    Rule("8.4", text="source_checkpoint_info needs checkpoint_id", clauses=("CKPT-INIT-2",), fake="yes", forms=()),
    Rule("8.4", text="cross-job initialisation names the owning job", clauses=("CKPT-INIT-6",), fake="yes", forms=()),
    Rule("9.1", text="pickle and torch.save payloads are refused", clauses=("WIRE-PICKLE-1", "WIRE-ZIP-1", "WIRE-LEGACY-1"), fake="yes", forms=("error-forms",)),
    Rule("9.2", text="a frame is u64 length, JSON header, bytes; dss carries the tree and DSSST1; op the metadata", clauses=("WIRE-FORMAT-1", "WIRE-TREE-1", "WIRE-SCALAR-1", "WIRE-EMPTY-1", "WIRE-DTYPE-1", "WIRE-VERSION-1", "WIRE-META-1"), fake="yes", forms=()),
    Rule("9.3", text="a chunk holds the uint8 payload, chunk_idx, total_chunks, chunk_group_id, frame size and sha256, operation", clauses=("CHUNK-FORMAT-1", "CHUNK-DESC-1", "CHUNK-DESC-2", "CHUNK-SIZE-1", "CHUNK-VERIFY-1"), fake="yes", forms=()),
    Rule("9.3", text="forward-backward always sends a chunk envelope", clauses=("CLIENT-CHUNK-1",), fake="n/a", forms=()),
    Rule("9.3", text="accepted chunks live with the job, not the connection", clauses=("CG-CONNECTION-1",), fake="yes", forms=()),
    Rule("9.3", text="an unknown group not at chunk 0 answers 409 chunk_group_restart_required; the client replays once", clauses=("CG-RESTART-1", "CLIENT-CHUNK-2"), fake="yes", forms=()),
    Rule("9.3", text="the same group id and hash resolve to the original execution, never a second", clauses=("CG-IDEM-1", "CG-IDEM-2", "CG-IDEM-3"), fake="yes", forms=()),
    Rule("9.3", text="reusing a group with another hash, count or payload answers 409", clauses=("CG-CONFLICT-1", "CG-CONFLICT-2", "CG-CONFLICT-3", "CG-MISSING-1"), fake="yes", forms=("error-forms",)),
    Rule("9.4", text="an inline result is {content_type, encoding, wire_format, payload_b64}", clauses=("POLL-INLINE-1",), fake="yes", forms=("result-delivery",)),
    Rule("9.5", text="result_chunk events {type, payload_b64, payload_sha256} come with next_cursor", clauses=("POLL-CHUNKS-1", "POLL-CHUNKS-2", "POLL-REASSEMBLE-1", "CLIENT-POLL-1"), fake="yes", forms=("result-delivery", "short-pages")),
    Rule("10.1", text="a batch is {args, kwargs} of model kwargs shaped [batch, sequence]", clauses=("FB-SHAPE-1", "FB-SHAPE-2", "FB-NOINPUT-1"), fake="yes", forms=()),
    Rule("10.4", text="logprobs[:, i] is the log-probability of input_ids[:, i + 1]", clauses=("SEM-SHIFT-1",), fake="yes (the tiny engine)", forms=()),
    Rule("12.1", text="empty non-EOF log pages may come while placing", clauses=("OP-LOGS-2",), fake="yes", forms=("log-cursor",)),
    Rule("12.2", text="logs: experiment-run, then the statements API, then the S3 stage below _logs/{sub_job_id}/", clauses=("JOB-LOGS-1", "JOB-LOGS-2"), fake="yes", forms=()),
)
