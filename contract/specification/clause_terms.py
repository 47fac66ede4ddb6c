"""The key terms of the spec each ``spec §N`` clause rests on, and the statuses it names.

A clause states what its cited section states, no more; the terms (field names, state
words, status codes, literals) are the evidence: each occurs in that section's code or
names a status its text gives (``contract.specification.index``, checked by a test). ``STATUSES``
lists, for the clauses whose section fixes a status (spec §5.5, §5.9, §6.4, §9.3), the
statuses a refusal or an answer must have; every other refusal is judged only as a 4xx
with a spec §3.6 body (``conformance.judging.checks.refused``). Read through ``Clause.terms`` and
``Clause.statuses``.
"""

from __future__ import annotations

#: clause id -> the spec terms it rests on (one line each: ``ID term term ...``).
_TERMS = """
ADDR-PREFIX-1 api v2 databases schemas endpoint cortex-training
ADDR-CT-4 application/json application/octet-stream forward-backward generate generate-stream step save load operation
AUTH-REQUIRED-1 Authorization Bearer PAT
AUTH-REQUIRED-2 Authorization Bearer PAT
AUTH-HEADERS-1 Authorization Bearer X-Snowflake-Authorization-Token-Type PROGRAMMATIC_ACCESS_TOKEN
ERR-ENVELOPE-1 message code detail loc msg type
JOB-CREATE-1 sub_job_configs job_id
JOB-OBJECT-1 job_id status reason created_at updated_at image_tag sub_jobs submitted_by owner_role
JOB-OBJECT-2 created_at updated_at
JOB-SUBJOB-1 job_id sub_job_type index training sampling log_prob
JOB-SUBJOB-2 sub_job_id job_type status model_name training_config
JOB-SUBJOB-3 inference_config max_seq_len
JOB-STATE-1 pending placing initializing running
JOB-STATE-3 failed reason
JOB-LIST-1 jobs job_id status sub_jobs
JOB-LIST-2 status running
JOB-EXPRUN-1 experiment_name experiment_run_name
JOB-RUNNING-2 running
JOB-MODEL-1 openai/gpt-oss-120b zai-org/GLM-5.2
JOB-MODEL-2 Qwen/Qwen3-0.6B Qwen/Qwen3-8B
JOB-DEBUG-1 debug create_job_from_body
JOBV-EMPTY-1 sub_job_configs
JOBV-TYPE-1 job_type training sampling log_probability
JOBV-MODEL-1 model_name
JOBV-CONFIG-1 training_config inference_config
JOBV-FIELDS-1 global_batch_size dtype seed model_post_init source_checkpoint_info
JOBV-PASSTHRU-1 extra_training ds_config
JOBV-SP-1 sp_size world_size
JOBV-OFFLOAD-1 ac_config offload_config.enabled mode
JOBV-MULTIPLEX-1 multiplex_job_id job_id sub_job_type index
CAP-FIELDS-1 has_reservation max_total_gpus in_use_gpus available_gpus
CAP-COUNT-1 in_use_gpus available_gpus pending placing initializing running
CAP-ACCOUNT-1 capacity
CANCEL-FREE-1 in_use_gpus running
CANCEL-ACTIVE-1 cancel cancel_job
CANCEL-IDEM-1 cancel cancel_job
CANCEL-CONFLICT-1 cancel cancel_job
CANCEL-BODY-1 cancel cancel_job
CKPT-LIST-1 checkpoints checkpoint_id global_steps avg_loss created_at checkpoint_type resumable
CKPT-LIST-2 checkpoints list_checkpoints
CKPT-DELETE-1 DELETE 200 204
CKPT-DELETE-2 DELETE 404
CKPT-EXPORT-1 checkpoint_id files filename url size_bytes expires_at
CKPT-EXPORT-2 url size_bytes
REQ-SUBMIT-1 request_id job_id
REQ-SUBMIT-2 request_id
POLL-FIELDS-1 request_id status created_at updated_at result error events next_cursor
POLL-STATE-1 pending running streaming done completed succeeded failed cancelled canceled REQUEST_STATE_DONE
POLL-TERMINAL-1 done failed cancelled
POLL-INLINE-1 content_type encoding wire_format payload_b64 application/octet-stream base64 DSSST1
POLL-CHUNKS-1 type result_chunk payload_b64 payload_sha256
POLL-CHUNKS-2 next_cursor
POLL-CURSOR-1 cursor next_cursor
POLL-MAXEV-1 max_events
POLL-MAXEV-2 max_events 512
POLL-REASSEMBLE-1 result_chunk decode_result_chunks
WIRE-FORMAT-1 dss DSSST1
WIRE-PICKLE-1 wire.loads
WIRE-ZIP-1 torch.save wire.loads
WIRE-VERSION-1 dss DSSST1
WIRE-META-1 response_options format dssst1 delivery chunked
CHUNK-ANY-1 chunk_idx total_chunks
CHUNK-PLAIN-1 generate
CG-NONFINAL-1 request_id
CG-FINAL-1 request_id
CG-CONNECTION-1 chunk_group_id
CG-RESTART-1 409 chunk_group_restart_required
CG-CONFLICT-1 409 frame_sha256
CG-CONFLICT-2 409 chunk_group_id
CG-CONFLICT-3 409 chunk_group_id
CG-IDEM-1 chunk_group_id frame_sha256
CG-IDEM-2 chunk_group_id frame_sha256
CG-IDEM-3 chunk_group_id frame_sha256
FB-RESULT-1 job_id avg_loss metrics post_process_outputs
FB-SHAPE-1 args kwargs input_ids attention_mask position_ids labels
STEP-RESULT-1 global_steps last_lr
STEP-MEM-1 peak_memory gpu_peak cpu_peak
SAVE-RESULT-1 checkpoint_id checkpoint_path checkpoint_tag
SAVE-TYPE-1 resumable weights-only checkpoint_type
SAVE-ID-1 checkpoint_id SaveRequest
SAVE-LOAD-1 checkpoint_id
SAVE-LOAD-2 checkpoint_id
SAVE-LOAD-3 target_sub_job_id 400 501
SAVE-LOAD-4 source_job_id
SAVE-DP-1 n_gpus load_optimizer_states
SEM-RESTORE-1 checkpoint_id
CKPT-INIT-1 load_optimizer_states resumable
CKPT-INIT-2 weights-only source_checkpoint_info checkpoint_id
CKPT-INIT-4 weights-only source_checkpoint_info
CKPT-INIT-5 stage_info
CKPT-INIT-6 checkpoint_id source_job_id
CKPT-INIT-3 weights-only source_checkpoint_info
GEN-COUNT-1 prompts results
GEN-TOKENS-1 text token_ids
GEN-PROMPTS-1 prompts
GEN-ALIGN-1 sampling_params routing_key prompts
GEN-RESULT-1 job_id results
GEN-SEQLEN-1 max_seq_len
GEN-SAMPLER-1 sampling
GENS-SUBMIT-1 application/octet-stream request_id job_id count
GENS-DRAIN-1 max_events
OP-TYPE-1 operation_type
OP-ROUTE-1 sub_job_id sub_job_type
OP-ROUTE-2 sub_job_type
OP-ROUTER-1 router-replay-discard bootstrap-router-replay request_id
OP-RESET-1 reset-prefix-cache sub_job_type
OP-CANCEL-1 cancel-request
OP-CANCEL-3 request_id
OP-LOGS-1 entries next_cursor eof cursor
OP-LOGS-2 tail-logs placing
OP-RUNNING-1 tail-logs placing running
OP-FORWARD-1 forward payload_b64
OP-WSYNC-1 weight-sync request_id
OP-LORA-1 weight_format lora peft_config r lora_alpha target_modules
OP-BOOTSTRAP-1 source_sub_job_id target_sub_job_id
LIMIT-BODY-1 generate_stream
LIMIT-BODY-2 forward_backward
JOB-LOGS-1 experiment-run SYSTEM$GET_VSTAGE_WRITE_CREDS
JOB-LOGS-2 _logs sub_job_id
SEM-SHIFT-1 input_ids
CLIENT-RETRY-1 404 409 429 500 502 503 504
CLIENT-RETRY-2 404
CLIENT-CHUNK-1 forward_backward
CLIENT-CHUNK-2 chunk_group_restart_required
CLIENT-POLL-1 result_chunk payload_sha256 next_cursor
CLIENT-POLL-2 0.5 1.25 6 1800
CLIENT-STATE-1 JOB_STATE_RUNNING done unknown
CLIENT-PROMPT-1 max_seq_len
CLIENT-NOBODY-1 cancel_job
CLIENT-CONFIG-1 fused_cross_entropy fp32_lm_head fused_lm_head_token_chunk_size
"""

TERMS: dict[str, tuple[str, ...]] = {
    line.split()[0]: tuple(line.split()[1:]) for line in _TERMS.strip().splitlines()
}

#: clause id -> the statuses its section names for the answer it judges.
STATUSES: dict[str, tuple[int, ...]] = {
    "CKPT-DELETE-1": (200, 204),
    "SAVE-LOAD-3": (400, 501),
    "CG-RESTART-1": (409,),
    "CG-CONFLICT-1": (409,),
    "CG-CONFLICT-2": (409,),
    "CG-CONFLICT-3": (409,),
    # "a precondition/conflict-style error" (spec §5.5): 409 Conflict, 412 Precondition
    # Failed, or 400 as failed-precondition maps to HTTP.
    "CANCEL-CONFLICT-1": (409, 412, 400),
}
#: Clauses whose statuses are read from the section's words, not named as numbers in it.
INTERPRETED: frozenset[str] = frozenset({"CANCEL-CONFLICT-1"})
