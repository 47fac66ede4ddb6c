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

from typing import NamedTuple


class Rule(NamedTuple):
    section: str
    text: str
    clauses: tuple[str, ...]
    fake: str
    forms: tuple[str, ...]


#: ``§ | rule | clauses | fake | forms`` (``-`` for none).
_TABLE = """
1.1 | a job without a sampling sub-job cannot generate | GEN-SAMPLER-1 | yes | -
1.2 | sub-job ids are {job_id}:{training|sampling|log_prob}:{index}, the index counting each type from 0 | JOB-SUBJOB-1 | yes | id-shape
1.4 | inference-only and coming-soon models are not trainable | JOB-MODEL-1 | yes | error-forms validation-422
1.4 | cached training models serve training and inference | JOB-MODEL-2 | yes | -
2.1 | routes live under /api/v2/databases/{db}/schemas/{schema}/{endpoint} | ADDR-PREFIX-1 ADDR-PREFIX-2 | yes | -
2.1 | the statements API sits outside the prefix | JOB-LOGS-1 | yes | -
2.2 | calls authenticate with a bearer PAT and the PROGRAMMATIC_ACCESS_TOKEN type header | AUTH-HEADERS-1 AUTH-REQUIRED-1 AUTH-REQUIRED-2 ERR-STATUS-1 | partial: only with --token (tokens off by default) | error-forms
2.3 | control-plane, step, save, load and operation bodies are JSON; frames are octet; generate-stream JSON under octet | ADDR-CT-4 ADDR-CT-1 ADDR-CT-2 ADDR-CT-3 GENS-SUBMIT-1 | yes | -
2.4 | answers may carry x-snowflake-request-id | ADDR-REQID-1 CLIENT-ERR-1 | yes | request-id-header
3.1 | a scheduling call answers {request_id, job_id}, then is polled | REQ-SUBMIT-1 REQ-SUBMIT-2 | yes | id-shape unknown-fields success-status
3.2 | job states pending, placing, initializing, running, cancelled, terminated, failed; initializing is visible | JOB-STATE-1 JOB-STATE-2 | yes (start-up is instant by default: placing and initializing are seen with --startup) | job-state-spelling
3.2 | a failed job explains itself in reason | JOB-STATE-3 | yes | -
3.2 | clients fold legacy done/unknown and JOB_STATE_ names | CLIENT-STATE-1 | n/a | job-state-spelling
3.3 | request states include the synonyms completed, succeeded, canceled and raw enum names | POLL-STATE-1 POLL-STATE-2 POLL-TERMINAL-1 CLIENT-STATE-1 | yes | request-state-spelling
3.4 | clients poll from 0.5 s, x1.25, capped at 6 s, for 1800 s | CLIENT-POLL-2 | n/a | -
3.5 | clients retry connection failures and 404/409/429/5xx ten times with jitter | CLIENT-RETRY-1 CLIENT-ONCE-1 CLIENT-ONCE-2 | n/a | -
3.5 | create-job is retried only when the connection was never established | CLIENT-RETRY-2 | n/a | -
3.6 | error bodies are {message, code} or a detail list of {loc, msg, type} | ERR-ENVELOPE-1 ERR-ENVELOPE-2 ERR-CODE-1 ERR-STATUS-1 | yes | error-forms validation-422
3.6 | data-plane calls and polls need a running job | JOB-RUNNING-1 JOB-RUNNING-2 | yes | precondition-status
3.6 | tail-logs is the exception allowed while placing | OP-LOGS-2 | yes | log-cursor
4 | the seventeen routes and methods exist | ADDR-ROUTE-1 ERR-SCHEMA-1 | yes | -
5.1 | sub_job_configs is a non-empty list | JOBV-EMPTY-1 | yes | error-forms validation-422
5.1 | create answers {job_id} | JOB-CREATE-1 JOB-CREATE-2 | yes | id-shape success-status
5.1 | a top-level debug block is gated by the server | JOB-DEBUG-1 JOB-DEBUG-2 | yes | -
5.2 | the job object's fields, flat sub-jobs carrying sub_job_id, job_type, status, model_name and config | JOB-OBJECT-1 JOB-OBJECT-2 JOB-SUBJOB-2 JOB-SUBJOB-3 | yes | unknown-fields timestamp-form
5.2 | image_tag may be empty before placement; submitted_by and owner_role may be absent | JOB-OBJECT-1 | yes | job-optional-fields
5.3 | GET / lists {jobs: [...]}, each with job_id, status, sub_jobs; ?status filters | JOB-LIST-1 JOB-LIST-2 JOB-LIST-3 | yes | list-entry-minimal
5.4 | capacity has has_reservation, max_total_gpus, in_use_gpus, available_gpus; proto3 may omit false/zero | CAP-FIELDS-1 | yes | capacity-proto3
5.4 | in_use counts pending/placing/initializing/running jobs; available is floored at 0 and may be capped | CAP-COUNT-1 CAP-COUNT-2 CANCEL-FREE-1 CAP-QUEUE-1 | yes | capacity-capped
5.4 | the account comes from the session, not the caller | CAP-ACCOUNT-1 | yes | -
5.5 | cancel takes no body | CANCEL-BODY-1 CANCEL-BODY-2 CLIENT-NOBODY-1 | yes | -
5.5 | pending, placing and running jobs enter cancellation | CANCEL-ACTIVE-1 CANCEL-ACTIVE-2 | yes | cancelling-visible cancel-answer
5.5 | cancelling a cancelling or cancelled job is an idempotent success | CANCEL-IDEM-1 CANCEL-ANSWER-1 | yes | cancel-answer
5.5 | cancelling a terminated or failed job is a precondition/conflict-style error | CANCEL-CONFLICT-1 CANCEL-UNKNOWN-1 | yes | error-forms
5.6 | experiment-run answers experiment_name and experiment_run_name | JOB-EXPRUN-1 | yes | unknown-fields
5.7 | checkpoint entries carry checkpoint_id, global_steps, avg_loss, created_at, checkpoint_type | CKPT-LIST-1 CKPT-LIST-2 | yes | timestamp-form
5.8 | export takes no body and answers checkpoint_id, files [{filename, url, size_bytes}], expires_at | CKPT-EXPORT-1 CKPT-EXPORT-2 CKPT-EXPORT-3 CKPT-EXPORT-4 CANCEL-BODY-2 | yes | unknown-fields
5.9 | delete answers 200/204 with no body | CKPT-DELETE-1 | partial: the kit dialect answers 200 {} (the spec and any dialects 204 or no body) | delete-answer
5.9 | deleting a missing checkpoint is an error (e.g. 404) | CKPT-DELETE-2 ERR-STATUS-1 | yes | error-forms
6.1 | forward-backward takes a DSSST1 frame, in chunks above 60 MiB | CHUNK-ANY-1 LIMIT-BODY-2 | yes | -
6.1 | only the last chunk's answer may carry request_id | CG-NONFINAL-1 CG-FINAL-1 CLIENT-CHUNK-3 | yes | -
6.1 | its result carries job_id, avg_loss, metrics, post_process_outputs | FB-RESULT-1 FB-RESULT-3 | yes | unknown-fields result-delivery
6.2 | step takes an optional learning_rate ({} allowed) | STEP-RESULT-1 STEP-BAD-1 | yes | -
6.2 | its result carries global_steps and last_lr, a number or a list | STEP-RESULT-1 STEP-COUNT-1 STEP-LR-1 | yes | last-lr-list last-lr-scheduled
6.2 | peak_memory {gpu_peak, cpu_peak} byte counts appear only with step_peak_memory_log | STEP-MEM-1 | yes | -
6.3 | checkpoint_type is resumable or weights-only, resumable by default | SAVE-TYPE-1 SAVE-TYPE-2 | yes | -
6.3 | the caller's checkpoint_id may be dropped; the result's id is authoritative | SAVE-ID-1 SAVE-ID-2 | yes (the spec and any dialects name the checkpoint themselves) | save-id-server
6.3 | the result carries checkpoint_id, checkpoint_path, checkpoint_tag where present | SAVE-RESULT-1 SAVE-RESULT-2 | yes | save-result-fields
6.4 | load needs checkpoint_id | SAVE-LOAD-2 SAVE-LOAD-5 | yes | error-forms validation-422
6.4 | source_job_id loads another job's checkpoint | SAVE-LOAD-4 SAVE-LOAD-1 | yes | -
6.4 | target_sub_job_id: omitted routes to training; foreign is 400; non-training is 501 | SAVE-LOAD-3 | yes | error-forms
6.4 | a DP-size change needs load_optimizer_states false | SAVE-DP-1 | yes | -
6.5 | sampling initialisation needs a weights-only checkpoint | CKPT-INIT-2 | yes | -
6.5 | training initialisation across DP sizes needs load_optimizer_states false | CKPT-INIT-1 | yes | -
6.5 | the source job need not be running once the checkpoint is saved | CKPT-INIT-4 | yes | -
6.5 | the server stamps stage_info credentials; clients should not send them | CKPT-INIT-5 CKPT-INIT-7 | yes | -
6.6 | prompts are strings and/or token lists; one token prompt is [[...]] | GEN-PROMPTS-1 | yes | -
6.6 | sampling_params and routing_key are one value or a list aligned with prompts | GEN-ALIGN-1 | yes | error-forms validation-422
6.6 | token prompts must leave room for one output token; string prompts are the server's to check | CLIENT-PROMPT-1 GEN-TOOLONG-1 GEN-SEQLEN-1 JOB-SUBJOB-3 | yes | -
6.6 | the result is {job_id, results: [{text, token_ids, finish_reason}, ...]} | GEN-RESULT-1 GEN-COUNT-1 GEN-TOKENS-1 GEN-TOKENS-2 GEN-FINISH-1 GEN-LOGPROBS-1 | yes | unknown-fields result-delivery
6.6 | generate sends the plain frame when it fits | CHUNK-PLAIN-1 | yes | -
6.7 | generate-stream bodies stay within 60 MiB and are not chunked | LIMIT-BODY-1 LIMIT-BODY-3 | yes | -
6.7 | generate-stream answers {request_id, job_id, count} | GENS-SUBMIT-1 | yes | id-shape
6.7 | stream events (result, error, done) are drained destructively | GENS-EVENTS-1 GENS-DRAIN-1 GENS-BAD-1 | yes | unknown-fields
6.8 | max_events defaults to 16 and is capped at 512 | POLL-MAXEV-1 POLL-MAXEV-2 POLL-MAXEV-3 POLL-MAXEV-4 | yes | short-pages
6.8 | cursor is a retry cursor for result chunks | POLL-CURSOR-1 | yes | short-pages
6.8 | a poll carries request_id, status, created_at, updated_at, result, error, events, next_cursor | POLL-FIELDS-1 POLL-FAILED-1 | yes | poll-empty-fields unknown-fields timestamp-form
6.8 | a successful terminal request without a result reads as {} | POLL-EMPTY-1 | yes | done-result-null inflight-result-empty
7 | operation_type is required | OP-TYPE-1 OP-UNKNOWN-1 | yes | error-forms validation-422
7 | sub_job_id and sub_job_type must resolve to the same target | OP-ROUTE-1 OP-ROUTE-2 OP-ROUTE-3 | yes | -
7 | an answer with a request_id is polled, any other is inline | OP-WSYNC-1 OP-ROUTER-1 OP-ROUTER-2 OP-RESET-1 OP-CANCEL-1 | yes | bootstrap-polled
7 | only tail-logs is allowed while placing; other operations need running | OP-RUNNING-1 OP-LOGS-2 | yes | -
7.1 | forward takes {payload_b64, content_type}; over 60 MiB it is rejected | OP-FORWARD-1 | yes | -
7.2 | weight-sync is async; weight_format vllm (default) or hf | OP-WSYNC-1 | yes | -
7.3 | LoRA sync needs a matching peft_config on both sub-jobs | OP-LORA-1 | yes | -
7.4 | bootstrap goes from a sampling source to a training target; max_cache_bytes is optional | OP-BOOTSTRAP-1 OP-HINT-1 | yes | -
7.6 | reset-prefix-cache takes drain, timeout_s, retry_interval_s | OP-RESET-1 OP-RESET-2 | yes | -
7.7 | cancel-request {request_id} is acknowledged inline; the server finds the sub-job | OP-CANCEL-1 OP-CANCEL-2 OP-CANCEL-3 | yes | -
7.8 | tail-logs {cursor?, max_lines?} answers {entries, next_cursor, eof} | OP-LOGS-1 | yes | log-cursor
8.1 | exactly one type-specific config is set | JOBV-CONFIG-1 | yes | error-forms validation-422
8.1 | job_type is training, sampling or log_probability | JOBV-TYPE-1 | yes | error-forms validation-422
8.1 | model_name is non-empty | JOBV-MODEL-1 | yes | error-forms validation-422
8.1 | the optional fields have the types the table gives | JOBV-FIELDS-1 JOBV-UNKNOWN-1 | yes | error-forms validation-422
8.2 | training_config needs a non-empty optimizer and positive max_seq_len, train_batch_size, n_gpus | JOBV-TRAIN-1 | yes | error-forms validation-422
8.2 | open pass-through keys are accepted | JOBV-PASSTHRU-1 | yes | -
8.2 | sp_size divides the world size | JOBV-SP-1 | yes | -
8.2 | activation offload needs mode full | JOBV-OFFLOAD-1 | yes | -
8.2 | peft r and lora_alpha default to 8 | OP-LORA-1 | yes | -
8.2 | clients refuse fused_cross_entropy with fp32_lm_head or a token chunk size | CLIENT-CONFIG-1 | n/a | -
8.3 | inference_config needs positive max_seq_len and n_gpus | JOBV-INFER-1 | yes | error-forms validation-422
8.3 | multiplex_job_id is a complete sub-job id outside the job | JOBV-MULTIPLEX-1 | yes | -
8.4 | source_checkpoint_info needs checkpoint_id | CKPT-INIT-2 | yes | -
8.4 | cross-job initialisation names the owning job | CKPT-INIT-6 | yes | -
9.1 | pickle and torch.save payloads are refused | WIRE-PICKLE-1 WIRE-ZIP-1 WIRE-LEGACY-1 | yes | error-forms
9.2 | a frame is u64 length, JSON header, bytes; dss carries the tree and DSSST1; op the metadata | WIRE-FORMAT-1 WIRE-TREE-1 WIRE-SCALAR-1 WIRE-EMPTY-1 WIRE-DTYPE-1 WIRE-VERSION-1 WIRE-META-1 | yes | -
9.3 | a chunk holds the uint8 payload, chunk_idx, total_chunks, chunk_group_id, frame size and sha256, operation | CHUNK-FORMAT-1 CHUNK-DESC-1 CHUNK-DESC-2 CHUNK-SIZE-1 CHUNK-VERIFY-1 | yes | -
9.3 | forward-backward always sends a chunk envelope | CLIENT-CHUNK-1 | n/a | -
9.3 | accepted chunks live with the job, not the connection | CG-CONNECTION-1 | yes | -
9.3 | an unknown group not at chunk 0 answers 409 chunk_group_restart_required; the client replays once | CG-RESTART-1 CLIENT-CHUNK-2 | yes | -
9.3 | the same group id and hash resolve to the original execution, never a second | CG-IDEM-1 CG-IDEM-2 CG-IDEM-3 | yes | -
9.3 | reusing a group with another hash, count or payload answers 409 | CG-CONFLICT-1 CG-CONFLICT-2 CG-CONFLICT-3 CG-MISSING-1 | yes | error-forms
9.4 | an inline result is {content_type, encoding, wire_format, payload_b64} | POLL-INLINE-1 | yes | result-delivery
9.5 | result_chunk events {type, payload_b64, payload_sha256} come with next_cursor | POLL-CHUNKS-1 POLL-CHUNKS-2 POLL-REASSEMBLE-1 CLIENT-POLL-1 | yes | result-delivery short-pages
10.1 | a batch is {args, kwargs} of model kwargs shaped [batch, sequence] | FB-SHAPE-1 FB-SHAPE-2 FB-NOINPUT-1 | yes | -
10.4 | logprobs[:, i] is the log-probability of input_ids[:, i + 1] | SEM-SHIFT-1 | yes (the tiny engine) | -
12.1 | empty non-EOF log pages may come while placing | OP-LOGS-2 | yes | log-cursor
12.2 | logs: experiment-run, then the statements API, then the S3 stage below _logs/{sub_job_id}/ | JOB-LOGS-1 JOB-LOGS-2 | yes | -
"""


def _parse(table: str) -> tuple[Rule, ...]:
    rows = []
    for line in table.strip().splitlines():
        section, text, clauses, fake, forms = (cell.strip() for cell in line.split(" | "))
        rows.append(Rule(section, text, tuple(clauses.split()), fake,
                         () if forms == "-" else tuple(forms.split())))
    return tuple(rows)


RULES: tuple[Rule, ...] = _parse(_TABLE)
