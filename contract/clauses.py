"""The clause registry: every checkable promise of the contract, numbered.

Each clause has an id (``AREA-TOPIC-N``), a level (MUST/SHOULD), a profile (``current``
is today's documented surface, ``proposed`` what the seed asks the server to add,
``semantic`` the numeric behaviour a real model must show), who must keep it (server or
client), its source (a section of the published spec, the client, a kit decision or a
proposal: :mod:`contract.specification.sections` lists the sections) and one sentence. Tests declare what they check with :func:`checks`; the
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
    #: Where the rule comes from: ``spec §N.N`` (a section of the published specification),
    #: ``client`` (reference-client behaviour servers rely on), ``decided`` (the kit's choice
    #: where the spec is silent) or ``proposed`` (what the kit asks the server team to add).
    source: str

    @property
    def spec_section(self) -> str | None:
        """The section number a ``spec §N.N`` source names (None for the other sources)."""
        return self.source.removeprefix(SPEC_PREFIX) if self.source.startswith(SPEC_PREFIX) else None

    @property
    def terms(self) -> tuple[str, ...]:
        """The spec's terms a ``spec §N`` clause rests on (``contract.specification.clause_terms``)."""
        from contract.specification.clause_terms import TERMS

        return TERMS.get(self.id, ())

    @property
    def statuses(self) -> tuple[int, ...]:
        """The statuses the cited section names for what this clause judges (empty: the
        spec names none, and a refusal is judged as a 4xx with a spec §3.6 body)."""
        from contract.specification.clause_terms import STATUSES

        return STATUSES.get(self.id, ())

    @property
    def can_fail_a_url(self) -> bool:
        """Only rules the server team signed up to (the spec, the client they serve, the
        proposals when asked for) fail a run against a real server; ``decided`` never does."""
        return self.source != "decided"


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
    "IDEM": "Idempotency keys",
    "INTEG": "Integration surface (SkyRL, verl)",
}

_M: Level = "MUST"
_S: Level = "SHOULD"

#: A row is (id, level, profile, subject, source, sentence).
_Row = tuple[str, Level, ClauseProfile, Subject, str, str]

#: How a source naming the published specification starts: ``spec §6.3``.
SPEC_PREFIX = "spec §"
#: The sources that are not a spec section.
OTHER_SOURCES = ("client", "decided", "proposed")

_TABLE: tuple[_Row, ...] = (
    # Addressing and framing
    ("ADDR-PREFIX-1", _M, "current", "server", "spec §2.1", "Routes are served under /api/v2/databases/{database}/schemas/{schema}/{endpoint} (the endpoint is cortex-training by default)."),
    ("ADDR-REQID-1", _M, "current", "server", "decided", "Every response carries an x-snowflake-request-id header."),
    ("ADDR-CT-1", _M, "current", "server", "decided", "Control-plane, step, save, load and operation calls answer with content type application/json (the spec shows JSON answers but names no answer content type)."),
    ("ADDR-CT-2", _M, "current", "server", "decided", "A JSON route given a body that is not application/json answers 415 with code unsupported_media_type."),
    ("ADDR-CT-3", _M, "current", "server", "decided", "forward-backward and generate given a body that is not application/octet-stream answer 415 with code unsupported_media_type."),
    ("ADDR-ROUTE-1", _M, "current", "server", "decided", "An unknown path under the prefix answers 404 with the error envelope."),
    ("ADDR-ALLOW-1", _S, "proposed", "server", "proposed", "A method a path does not serve answers 405 with an Allow header listing exactly the methods the OpenAPI document gives that path (HEAD beside GET allowed), as RFC 9110 asks of a 405."),
    ("ADDR-PREFIX-2", _M, "current", "server", "decided", "The fake serves the routes under any database, schema and endpoint name."),
    ("ADDR-CT-4", _M, "current", "server", "spec §2.3", "Control-plane, step, save, load and operation calls take application/json bodies, forward-backward and generate application/octet-stream DSSST1 frames, generate-stream UTF-8 JSON sent as application/octet-stream."),
    # Auth
    ("AUTH-REQUIRED-1", _M, "current", "server", "spec §2.2", "With auth on, a service call without the Authorization bearer token is refused (a 4xx with a spec §3.6 body; the kit: 401 unauthenticated)."),
    ("AUTH-REQUIRED-2", _M, "current", "server", "spec §2.2", "With auth on, a service call with a wrong token is refused (a 4xx with a spec §3.6 body; the kit: 401 unauthenticated)."),
    ("AUTH-HEADERS-1", _M, "current", "server", "spec §2.2", "A call with Authorization: Bearer <PAT> and X-Snowflake-Authorization-Token-Type: PROGRAMMATIC_ACCESS_TOKEN is accepted."),
    ("AUTH-ISOLATION-1", _M, "current", "server", "decided", "A job created with one token is invisible (404) to another token, by id and in the job list."),
    ("AUTH-ISOLATION-2", _M, "current", "server", "decided", "Data-plane calls and request polls on another token's job answer 404."),
    ("AUTH-ADMIN-1", _M, "current", "server", "decided", "With tokens configured, the fake's admin API (/_fake/..., export downloads excepted) answers 401 to calls without a valid bearer token."),
    ("AUTH-ADMIN-2", _M, "current", "server", "decided", "With service tokens and an admin token configured, the fake's admin API answers 403 to every service token and 200 to the admin token only."),
    ("AUTH-ISOLATION-3", _M, "current", "server", "decided", "A create whose job_id another token's job holds answers as a create with a free id of that shape does (never a 409 for it), and leaves that job untouched."),
    # Error envelopes
    ("ERR-ENVELOPE-1", _M, "current", "server", "spec §3.6", "Every 4xx/5xx JSON error body takes a form spec §3.6 allows: {message, code} with a non-empty string or an integer code, or a detail list of {loc, msg, type}."),
    ("ERR-ENVELOPE-2", _M, "current", "server", "decided", "A validation failure names each bad field: by a detail entry {loc, msg, type} (loc may start with \"body\") or, without a detail list, in its message."),
    ("ERR-NO500-1", _M, "current", "server", "decided", "No input, however malformed, produces a 5xx answer."),
    ("ERR-NOSTATE-1", _M, "current", "server", "decided", "A refused call changes no server state (no job, request, checkpoint or step created)."),
    ("ERR-CODE-1", _M, "current", "server", "decided", "A refusal carrying a string code uses the code the contract assigns and that code's status (contract.errors.STATUS_OF); integer codes and bare detail lists carry no string code to judge."),
    ("ERR-SCHEMA-1", _M, "current", "server", "decided", "Every answer matches the OpenAPI document (contract.openapi) for its route and status, body and content type."),
    ("ERR-REJECT-1", _M, "current", "server", "decided", "Input that violates the OpenAPI document's request schema is refused with a 4xx, never accepted."),
    ("ERR-STATUS-1", _M, "current", "server", "decided", "A refusal answers the status the kit gives its kind: 400 for invalid input, 401 without a valid token, 404 for an unknown id, 409 for a state conflict, 413 for a body too large, 415 for a wrong content type (the spec fixes a status only in §5.9, §6.4 and §9.3)."),
    # Job life
    ("JOB-CREATE-1", _M, "current", "server", "spec §5.1", "A valid create body answers a 2xx {job_id} whose job_id is a non-empty string."),
    ("JOB-OBJECT-1", _M, "current", "server", "spec §5.2", "A job object carries job_id, status, reason, created_at, updated_at, image_tag and sub_jobs (submitted_by and owner_role may be absent)."),
    ("JOB-OBJECT-2", _M, "current", "server", "spec §5.2", "created_at and updated_at are RFC 3339 timestamp strings."),
    ("JOB-SUBJOB-1", _M, "current", "server", "spec §1.2", "Sub-job ids are {job_id}:{training|sampling|log_prob}:{index}, index counting occurrences of the type from 0."),
    ("JOB-SUBJOB-2", _M, "current", "server", "spec §5.2", "Each sub-job carries sub_job_id, job_type, status, model_name and, for a training sub-job, its training_config; the sub-jobs are the ones the create body asked for."),
    ("JOB-STATE-1", _M, "current", "server", "spec §3.2", "A job moves pending -> placing -> initializing -> running and never backwards."),
    ("JOB-STATE-2", _M, "current", "server", "decided", "Job statuses are spelled in one dialect: short (running) or enum (JOB_STATE_RUNNING), never mixed."),
    ("JOB-STATE-3", _M, "current", "server", "spec §3.2", "A failed job carries a non-empty reason."),
    ("JOB-LIST-1", _M, "current", "server", "spec §5.3", "GET / answers {jobs: [...]} listing the caller's jobs, each entry carrying job_id, status and sub_jobs."),
    ("JOB-LIST-2", _M, "current", "server", "spec §5.3", "GET /?status=S lists only jobs whose normalised status is S."),
    ("JOB-GET-1", _M, "current", "server", "decided", "GET of an unknown job id answers 404 (with code job_not_found when the code is a string)."),
    ("JOB-EXPRUN-1", _M, "current", "server", "spec §5.6", "GET /{job_id}/experiment-run answers experiment_name and experiment_run_name."),
    ("JOB-RUNNING-1", _M, "current", "server", "decided", "Data-plane calls on a job that is not running answer 409 with code job_not_running."),
    ("JOB-RUNNING-2", _M, "current", "server", "spec §3.6", "A cancelled, terminated or failed job refuses data-plane calls (a 4xx)."),
    ("JOB-MODEL-1", _M, "current", "server", "spec §1.4", "A model the cache serves for inference only (or lists as coming soon for training) is refused for a training sub-job."),
    ("JOB-MODEL-2", _S, "current", "server", "spec §1.4", "Every model the service caches for training is accepted for training, sampling and log_probability."),
    ("JOB-ID-1", _M, "current", "server", "decided", "A create body's job_id (a UUID) names the job within the caller's account when the caller holds no job of that id; creating again with an id the caller holds answers 409 (a server that ignores the field is conformant)."),
    ("JOB-LOGS-1", _M, "current", "server", "spec §12.2", "POST /api/v2/statements (outside the service prefix) answers the SYSTEM$GET_VSTAGE_WRITE_CREDS statement for the run GET /{job_id}/experiment-run names with scoped S3 credentials that list that run's stage (in the row form the reference client reads)."),
    ("JOB-LOGS-2", _S, "current", "server", "spec §12.2", "A running job's stage holds its logs below _logs/{sub_job_id}/ for sub-jobs of that job, and only for them."),
    ("JOB-CREATE-2", _M, "current", "server", "decided", "The kit's create answers 200 with a UUID job_id."),
    ("JOB-SUBJOB-3", _M, "current", "server", "spec §6.6", "A sampling sub-job carries its inference_config with max_seq_len (the client reads it to check token prompts)."),
    ("JOB-LIST-3", _M, "current", "server", "decided", "The kit lists each job as the full job object GET /{job_id} answers."),
    ("JOB-DEBUG-1", _M, "current", "server", "spec §5.1", "A create body with a top-level debug block is refused (a 4xx) or taken, as the server's own debug gate decides; never a 5xx."),
    ("JOB-DEBUG-2", _M, "current", "server", "decided", "The fake's debug gate is closed: a create body with a top-level debug block is refused naming debug."),
    # Job validation
    ("JOBV-EMPTY-1", _M, "current", "server", "spec §5.1", "A create body whose sub_job_configs is empty or missing is refused."),
    ("JOBV-TYPE-1", _M, "current", "server", "spec §8.1", "A job_type other than training, sampling or log_probability is refused."),
    ("JOBV-MODEL-1", _M, "current", "server", "spec §8.1", "An empty or missing model_name is refused."),
    ("JOBV-CONFIG-1", _M, "current", "server", "spec §8.1", "A sub-job must carry exactly one of training_config (training) or inference_config (sampling, log_probability); otherwise it is refused."),
    ("JOBV-TRAIN-1", _M, "current", "server", "decided", "training_config requires a non-empty optimizer, max_seq_len > 0, train_batch_size > 0 and n_gpus > 0 (spec §8.2 has the client check them); otherwise it is refused naming the field."),
    ("JOBV-INFER-1", _M, "current", "server", "decided", "inference_config requires max_seq_len > 0 and n_gpus > 0 (spec §8.3 has the client check them); otherwise it is refused naming the field."),
    ("JOBV-PASSTHRU-1", _M, "current", "server", "spec §8.2", "Open pass-through keys in training_config/inference_config (ds_config, vllm_config, ...) are accepted."),
    ("JOBV-UNKNOWN-1", _M, "current", "server", "decided", "Unknown JSON fields are ignored by default (decided)."),
    ("JOBV-JSON-1", _M, "current", "server", "decided", "A body that is not valid JSON is refused with code malformed_json."),
    ("JOBV-SP-1", _M, "current", "server", "spec §8.2", "training_config.sp_size must be a positive integer dividing the world size (n_gpus); otherwise create is refused (or the job fails)."),
    ("JOBV-OFFLOAD-1", _M, "current", "server", "spec §8.2", "Activation offload (ac_config.offload_config.enabled true) needs ac_config mode full; otherwise create is refused (or the job fails)."),
    ("JOBV-MULTIPLEX-1", _M, "current", "server", "spec §8.3", "multiplex_job_id must be a complete {job_id}:{training|sampling|log_prob}:{index} id of another job; otherwise create is refused (or the job fails)."),
    ("JOBV-FIELDS-1", _M, "current", "server", "spec §8.1", "SubJobConfig's optional fields take the types spec §8.1 gives (global_batch_size and seed integers, dtype a string, model_post_init a list of strings, source_checkpoint_info an object); another type is refused."),
    # Capacity
    ("CAP-FIELDS-1", _M, "current", "server", "spec §5.4", "GET /capacity answers has_reservation, max_total_gpus, in_use_gpus and available_gpus (proto3 may omit zero/false)."),
    ("CAP-COUNT-1", _M, "current", "server", "spec §5.4", "in_use_gpus counts the GPUs of pending, placing, initializing and running jobs; available_gpus is at most max_total_gpus - in_use_gpus and never below 0 (schedulable capacity may cap it lower)."),
    ("CAP-QUEUE-1", _M, "current", "server", "decided", "A job that does not fit the free GPUs stays pending until enough GPUs are freed."),
    ("CAP-ACCOUNT-1", _M, "current", "server", "spec §5.4", "Capacity is per account: another account's jobs count neither in the caller's in_use_gpus nor against the caller's max_total_gpus."),
    ("CAP-COUNT-2", _M, "current", "server", "decided", "The kit's available_gpus is exactly max(0, max_total_gpus - in_use_gpus)."),
    # Cancel
    ("CANCEL-ACTIVE-1", _M, "current", "server", "spec §5.5", "Cancelling a pending, placing or running job succeeds (2xx) and the job enters cancellation (cancelling, then cancelled)."),
    ("CANCEL-IDEM-1", _M, "current", "server", "spec §5.5", "Cancelling a cancelling or cancelled job again is an idempotent success (2xx)."),
    ("CANCEL-CONFLICT-1", _M, "current", "server", "spec §5.5", "Cancelling a terminated or failed job answers a conflict-style refusal (409; 400 or 412 for a failed precondition)."),
    ("CANCEL-UNKNOWN-1", _M, "current", "server", "decided", "Cancelling an unknown job answers 404."),
    ("CANCEL-FREE-1", _M, "current", "server", "spec §5.4", "A cancelled job's GPUs are released from in_use_gpus."),
    ("CANCEL-ACTIVE-2", _M, "current", "server", "decided", "An initializing job can be cancelled too: 2xx, and it enters cancellation."),
    ("CANCEL-ANSWER-1", _M, "current", "server", "decided", "The kit answers a cancel 200 with {}."),
    ("CANCEL-BODY-1", _M, "current", "server", "spec §5.5", "A cancel sent with no body and no content type is taken."),
    ("CANCEL-BODY-2", _M, "current", "server", "decided", "The fake refuses a cancel or an export that carries a body (spec §5.5 and §5.8: no body)."),
    # Checkpoints
    ("CKPT-LIST-1", _M, "current", "server", "spec §5.7", "A checkpoint list entry carries checkpoint_id, global_steps, avg_loss, created_at and checkpoint_type (resumable | weights-only)."),
    ("CKPT-LIST-2", _M, "current", "server", "spec §5.7", "A saved checkpoint appears in the list until it is deleted."),
    ("CKPT-DELETE-1", _M, "current", "server", "spec §5.9", "Deleting a checkpoint answers 200 or 204 with no body (an empty JSON object counts as none) and removes it from the list."),
    ("CKPT-DELETE-2", _M, "current", "server", "spec §5.9", "Deleting a missing checkpoint is an error, never a success (a 4xx; the spec's example is 404)."),
    ("CKPT-EXPORT-1", _M, "current", "server", "spec §5.8", "Export answers checkpoint_id, files [{filename, url, size_bytes}] and expires_at."),
    ("CKPT-EXPORT-2", _S, "current", "server", "spec §5.8", "Each exported file URL downloads size_bytes bytes."),
    ("CKPT-PATH-1", _M, "current", "server", "decided", "Checkpoint ids and export file names are never used as file-system paths; traversal ids are refused or treated as opaque."),
    ("CKPT-INIT-1", _M, "current", "server", "spec §6.5", "A training sub-job initialised from a checkpoint of a sub-job with another n_gpus is refused at create (4xx) unless its training_config sets load_optimizer_states false."),
    ("CKPT-INIT-2", _M, "current", "server", "spec §6.5", "A sampling sub-job initialised from a checkpoint needs source_checkpoint_info.checkpoint_id naming a weights-only checkpoint that exists; a resumable, unknown or missing one is refused at create (4xx)."),
    ("CKPT-INIT-3", _S, "semantic", "server", "spec §13.4", "A sampling sub-job initialised from a weights-only checkpoint serves those weights: it generates what the trained model generates, not what a fresh one does."),
    ("CKPT-ID-1", _S, "current", "server", "decided", "A checkpoint id a URL path cannot carry (., .., /, control characters, not UTF-8) is refused at save with 400, so no checkpoint exists that cannot be exported or deleted."),
    ("CKPT-EXPORT-3", _M, "current", "server", "decided", "Exporting a missing checkpoint is refused (404)."),
    ("CKPT-EXPORT-4", _S, "current", "server", "decided", "An exported .safetensors file is a valid safetensors file."),
    ("CKPT-INIT-4", _M, "current", "server", "spec §6.5", "A sampling sub-job can start from a weights-only checkpoint of a job that is no longer running (cancelled after the save)."),
    ("CKPT-INIT-5", _M, "current", "server", "spec §6.5", "A create-time initialisation sent without credentials (no stage_info) is taken: the server stamps them itself."),
    ("CKPT-INIT-6", _M, "current", "server", "spec §8.4", "A create-time initialisation from another job's checkpoint without source_job_id is refused (or the job fails): it must name the job owning the checkpoint."),
    ("CKPT-INIT-7", _M, "current", "server", "decided", "The fake refuses a source_checkpoint_info carrying stage_info credentials (spec §6.5: clients should not send them)."),
    # Asynchronous submission
    ("REQ-SUBMIT-1", _M, "current", "server", "spec §3.1", "An async call answers {request_id, job_id} with the caller's job_id."),
    ("REQ-SUBMIT-2", _M, "current", "server", "spec §3.1", "Request ids are unique per submission."),
    ("REQ-ORDER-1", _M, "current", "server", "decided", "Async requests of one job execute in submit order, so their state effects happen in order."),
    ("REQ-UNKNOWN-1", _M, "current", "server", "decided", "Polling an unknown request id answers 404 with code request_not_found."),
    ("REQ-ONCE-1", _M, "current", "server", "decided", "An accepted async call (answered a request_id) executes exactly once, also while many calls of one or many jobs are in flight: it runs (its poll never answers request_not_found) and no submission runs twice."),
    # Polling and delivery
    ("POLL-FIELDS-1", _M, "current", "server", "spec §6.8", "A poll answer carries request_id, status, created_at, updated_at, result, error, events and next_cursor; an empty error or next_cursor may be null or \"\"."),
    ("POLL-STATE-1", _M, "current", "server", "spec §3.3", "Request statuses are spelled as spec §3.3 lists them: pending, running, streaming, done, completed, succeeded, failed, cancelled or canceled, or a raw enum name (REQUEST_STATE_DONE, ...)."),
    ("POLL-TERMINAL-1", _M, "current", "server", "spec §3.3", "Once terminal, a request's status (normalised) and result never change."),
    ("POLL-EMPTY-1", _M, "current", "server", "decided", "A done request's result is an object, or null when there is none to show (spec §6.8 has the client read a missing result as {})."),
    ("POLL-INLINE-1", _M, "current", "server", "spec §9.4", "An inline tensor result is {content_type: application/octet-stream, encoding: base64, wire_format: DSSST1, payload_b64}."),
    ("POLL-CHUNKS-1", _M, "current", "server", "spec §9.5", "A chunked result arrives as result_chunk events {type, payload_b64, payload_sha256} whose sha256 matches the chunk bytes."),
    ("POLL-CHUNKS-2", _M, "current", "server", "spec §9.5", "While result chunks remain the answer carries next_cursor; the last page carries none (absent, null or \"\")."),
    ("POLL-CURSOR-1", _M, "current", "server", "spec §6.8", "Re-asking the same cursor returns the same page (retry-safe)."),
    ("POLL-MAXEV-1", _M, "current", "server", "spec §6.8", "max_events defaults to 16: without it a page carries at most 16 events."),
    ("POLL-MAXEV-2", _M, "current", "server", "spec §6.8", "max_events is capped at 512: asking for more gets a page of at most 512 events, not a refusal."),
    ("POLL-MAXEV-3", _M, "current", "server", "decided", "An invalid max_events (not a positive integer) is refused."),
    ("POLL-REASSEMBLE-1", _M, "current", "server", "spec §9.5", "Reassembled result chunks decode to the same result the inline form would carry."),
    ("POLL-FAILED-1", _M, "current", "server", "decided", "A failed request carries a non-empty error: a message string or an object with a message."),
    ("POLL-EXPIRE-1", _M, "proposed", "server", "decided", "A result the server has freed (read to the end past its grace, or pushed out by newer unread results) answers 410 with code result_expired, never another result or an empty one."),
    ("POLL-STATE-2", _M, "current", "server", "decided", "The kit spells request statuses pending, running, streaming, done, failed or cancelled (their REQUEST_STATE_ names in the enum dialect)."),
    ("POLL-MAXEV-4", _M, "current", "server", "decided", "The kit's result-chunk pages are full: min(max_events, the events left) events each."),
    # DSSST1
    ("WIRE-FORMAT-1", _M, "current", "server", "spec §9.2", "Tensor results are DSSST1 frames: one safetensors blob (u64 header length, JSON header, tensor bytes) whose metadata carries dss with the structure and the version DSSST1."),
    ("WIRE-TREE-1", _M, "current", "server", "client", "Tree nodes use the t/j/d/l/u tags; tuples are always u; tensor keys are dotted paths (__root__ at the root)."),
    ("WIRE-SCALAR-1", _M, "current", "server", "client", "0-d tensors are stored reshaped to [1] with {scalar: true} and come back 0-d."),
    ("WIRE-EMPTY-1", _M, "current", "server", "client", "A frame without tensors carries the 1-element uint8 __dss_empty__ tensor, dropped on decode."),
    ("WIRE-DTYPE-1", _M, "current", "server", "client", "Every dtype torch and safetensors share round-trips exactly (bool, uint8, int8..int64, float16, bfloat16, float32, float64)."),
    ("WIRE-PICKLE-1", _M, "current", "server", "spec §9.1", "A payload starting like pickle (0x80 0x02..0x05) is refused."),
    ("WIRE-ZIP-1", _M, "current", "server", "spec §9.1", "A payload starting like a zip (torch.save) is refused."),
    ("WIRE-VERSION-1", _M, "current", "server", "spec §9.2", "A frame whose dss version is not DSSST1 is refused."),
    ("WIRE-HEADER-1", _M, "current", "server", "decided", "A header length over 64 MiB or beyond the body is refused without allocating it."),
    ("WIRE-MALFORMED-1", _M, "current", "server", "decided", "A malformed frame is refused with code malformed_frame (never 5xx)."),
    ("WIRE-META-1", _S, "current", "server", "spec §6.1", "Tensor-op requests carry op metadata {response_options: {format: dssst1, delivery: chunked}}."),
    ("WIRE-DUPKEY-1", _M, "current", "server", "decided", "A frame whose safetensors header names a key twice (anywhere, __metadata__ included) is refused with 400, as safetensors refuses it."),
    ("WIRE-LEGACY-1", _M, "current", "server", "decided", "The kit's refusal of a pickle or torch.save payload says so in its message (legacy pickle / torch.save payloads are refused)."),
    # Byte chunking
    ("CHUNK-FORMAT-1", _M, "current", "server", "client", "A chunk is a DSSST1 frame whose tree is {payload: 1-D uint8} and whose op metadata has one key request_chunk or result_chunk."),
    ("CHUNK-DESC-1", _M, "current", "server", "client", "A chunk descriptor carries chunk_idx, total_chunks, frame_sha256, frame_size_bytes (and chunk_group_id on request chunks)."),
    ("CHUNK-SIZE-1", _M, "current", "server", "decided", "Frames split at max_bytes - 8192 byte ranges (half of a max_bytes at or under 8192), halved until every chunk fits max_bytes."),
    ("CHUNK-ANY-1", _M, "current", "server", "spec §9.3", "forward-backward accepts a frame split into any number of chunks of any valid size."),
    ("CHUNK-VERIFY-1", _M, "current", "server", "decided", "Reassembly checks total size and sha256 and refuses a mismatch with a 4xx."),
    ("CHUNK-DESC-2", _M, "current", "server", "decided", "Chunks whose descriptors disagree (total_chunks, frame_sha256, frame_size_bytes, operation) or whose index is out of range are refused with a 4xx."),
    ("CHUNK-KIND-1", _M, "current", "server", "decided", "A result_chunk sent as a request chunk is refused with a 4xx."),
    ("CHUNK-PLAIN-1", _M, "current", "server", "spec §9.3", "generate accepts a plain frame that fits, without a chunk envelope."),
    # Chunk groups
    ("CG-NONFINAL-1", _M, "current", "server", "spec §6.1", "A non-final chunk's answer carries no request_id."),
    ("CG-FINAL-1", _M, "current", "server", "spec §9.3", "The final chunk's answer carries the request_id to poll."),
    ("CG-CONNECTION-1", _M, "current", "server", "spec §9.3", "Accepted chunks are kept with the training job: a group's chunks may arrive on different connections."),
    ("CG-RESTART-1", _M, "current", "server", "spec §9.3", "A first-seen group starting at a chunk other than 0 answers 409 with code chunk_group_restart_required."),
    ("CG-CONFLICT-1", _M, "current", "server", "spec §9.3", "Reusing a group id with another frame_sha256 answers 409 (the kit's code: chunk_group_conflict)."),
    ("CG-CONFLICT-2", _M, "current", "server", "spec §9.3", "Reusing a group id with another total_chunks answers 409 (the kit's code: chunk_group_conflict)."),
    ("CG-CONFLICT-3", _M, "current", "server", "spec §9.3", "Re-sending a chunk index of a group with a different payload answers 409 (the kit's code: chunk_group_conflict)."),
    ("CG-MISSING-1", _M, "current", "server", "decided", "A final chunk arriving while chunks are missing answers 409 with code chunk_group_missing_chunks."),
    ("CG-IDEM-1", _M, "current", "server", "spec §9.3", "Repeating a group's final chunk resolves to the original execution: forward-backward never runs twice for one group."),
    ("CG-IDEM-2", _M, "current", "server", "spec §9.3", "A repeated non-final chunk with the same payload is accepted without effect."),
    ("CG-IDEM-3", _M, "current", "server", "spec §9.3", "A replayed whole group after completion resolves to the same single execution and result."),
    # Forward-backward
    ("FB-RESULT-1", _M, "current", "server", "spec §6.1", "forward-backward resolves to an object carrying job_id, a finite avg_loss, metrics and post_process_outputs; it may carry more (spec §11)."),
    ("FB-SHAPE-1", _M, "current", "server", "spec §10.1", "forward-backward accepts {args, kwargs} batches of int64 input_ids, attention_mask, position_ids and labels shaped [batch, sequence], for any batch and sequence size."),
    ("FB-VERL-1", _M, "current", "server", "client", "forward-backward accepts the verl-GRPO kwargs (input_ids, attention_mask, position_ids, prompts, responses, response_mask, advantages, old_log_probs, ref_log_prob)."),
    ("FB-NOINPUT-1", _M, "current", "server", "decided", "A forward-backward frame without input_ids is refused (or fails as a request with an error), never 5xx."),
    ("FB-SEQLEN-1", _M, "current", "server", "decided", "A forward-backward frame whose sequences are longer than the training sub-job's max_seq_len is refused (4xx at submit or a failed request)."),
    ("FB-SHAPE-2", _M, "current", "server", "decided", "forward-backward also accepts model kwargs of the other integer and float dtypes, extra tensors beside them and a processing block (spec §10.3 leaves those to the backend)."),
    # Step
    ("STEP-RESULT-1", _M, "current", "server", "spec §6.2", "step resolves to {global_steps, last_lr} with an integer global_steps and last_lr a number or a list of numbers."),
    ("STEP-COUNT-1", _M, "current", "server", "decided", "global_steps goes up by exactly one per step."),
    ("STEP-LR-1", _M, "current", "server", "decided", "A step's learning_rate is reported back as last_lr (as every entry, when last_lr is a list)."),
    ("STEP-MEM-1", _S, "current", "server", "spec §6.2", "peak_memory {gpu_peak, cpu_peak}, integer byte counts, is reported when step_peak_memory_log was set on the training config."),
    ("STEP-BAD-1", _M, "current", "server", "decided", "A negative or non-numeric learning_rate is refused."),
    # Save / load
    ("SAVE-RESULT-1", _M, "current", "server", "spec §6.3", "save resolves to a result carrying checkpoint_id (checkpoint_path and checkpoint_tag where present); the id in the result is authoritative."),
    ("SAVE-TYPE-1", _M, "current", "server", "spec §6.3", "A save without checkpoint_type makes a resumable checkpoint, one with weights-only a weights-only one."),
    ("SAVE-ID-1", _M, "current", "server", "spec §6.3", "The checkpoint_id in a save's result names the saved checkpoint (a load of it succeeds), whether or not the server kept the id the caller asked for."),
    ("SAVE-LOAD-1", _M, "current", "server", "spec §6.4", "load of a saved checkpoint restores its global_steps."),
    ("SAVE-LOAD-2", _M, "current", "server", "spec §6.4", "load without checkpoint_id is refused."),
    ("SAVE-LOAD-3", _M, "current", "server", "spec §6.4", "load with a target_sub_job_id not of this job answers 400; a sampling target answers 501."),
    ("SAVE-LOAD-4", _M, "current", "server", "spec §6.4", "load with source_job_id loads another of the caller's jobs' checkpoint."),
    ("SAVE-DP-1", _M, "current", "server", "spec §6.4", "A runtime load whose checkpoint came from a sub-job with another n_gpus is refused (a 4xx at submit, or a failed request) unless the target training sub-job was created with load_optimizer_states false; then it loads the weights."),
    ("SAVE-RESULT-2", _M, "current", "server", "decided", "The kit's save result carries checkpoint_id, checkpoint_path and checkpoint_tag."),
    ("SAVE-TYPE-2", _M, "current", "server", "decided", "checkpoint_type is case-insensitive; a type other than resumable or weights-only is refused."),
    ("SAVE-ID-2", _M, "current", "server", "decided", "The kit's fake names a checkpoint as the caller's checkpoint_id asked."),
    ("SAVE-LOAD-5", _M, "current", "server", "decided", "load of an unknown checkpoint is refused (404) or fails as a request naming it."),
    # Generate
    ("GEN-COUNT-1", _M, "current", "server", "spec §6.6", "generate answers exactly one result per prompt."),
    ("GEN-TOKENS-1", _M, "current", "server", "spec §6.6", "Each result carries text, token_ids and finish_reason."),
    ("GEN-FINISH-1", _M, "current", "server", "decided", "finish_reason is stop or length."),
    ("GEN-LOGPROBS-1", _M, "current", "server", "decided", "With sampling_params.logprobs set, per-token logprobs align with token_ids."),
    ("GEN-PROMPTS-1", _M, "current", "server", "spec §6.6", "generate accepts string prompts and pre-tokenised prompts ([[1, 2, 3]])."),
    ("GEN-ALIGN-1", _M, "current", "server", "spec §6.6", "sampling_params and routing_key lists must align with prompts; a misaligned list is refused."),
    ("GEN-TOOLONG-1", _M, "current", "server", "decided", "A token prompt with len >= the sampling sub-job's max_seq_len is refused."),
    ("GEN-RESULT-1", _M, "current", "server", "spec §6.6", "The generate result is {job_id, results: [...]} DSSST1-encoded."),
    ("GEN-SAMPLER-1", _M, "current", "server", "spec §1.1", "generate and generate-stream on a job without a sampling sub-job are refused."),
    ("GEN-SEQLEN-1", _M, "current", "server", "spec §6.6", "A token prompt plus its generated tokens never exceed the sampling sub-job's max_seq_len, whatever max_tokens asks."),
    ("GEN-TOKENS-2", _M, "current", "server", "decided", "Each generate result has 1 <= len(token_ids) <= max_tokens (default 16)."),
    # Generate-stream
    ("GENS-SUBMIT-1", _M, "current", "server", "spec §6.7", "generate-stream takes JSON bytes as application/octet-stream and answers {request_id, job_id, count} with count = number of prompts."),
    ("GENS-EVENTS-1", _M, "current", "server", "decided", "Stream events are {type: result, index, result}, {type: error, index, error} and a final {type: done, completed, failed} (spec §6.7 calls them opaque and shows these as the common shapes)."),
    ("GENS-DRAIN-1", _M, "current", "server", "spec §6.7", "Stream events are drained destructively: each event is returned by exactly one poll."),
    ("GENS-BAD-1", _M, "current", "server", "decided", "generate-stream given bytes that are not UTF-8 JSON is refused."),
    # Operations
    ("OP-UNKNOWN-1", _M, "current", "server", "decided", "An unknown operation_type is refused with code unknown_operation_type."),
    ("OP-ROUTE-1", _M, "current", "server", "spec §7", "When sub_job_id and sub_job_type are both given and name different sub-jobs, the operation is refused (the kit's code: routing_conflict)."),
    ("OP-ROUTE-2", _M, "current", "server", "spec §7", "sub_job_type alone routes an operation when the job has exactly one sub-job of that type."),
    ("OP-ROUTE-3", _M, "current", "server", "decided", "An unknown sub_job_id answers 400 or 404 with an error envelope."),
    ("OP-FORWARD-1", _M, "current", "server", "spec §7.1", "A forward operation whose frame is over 60 MiB is refused with a 4xx and never runs (today's forward needs nothing more: spec §7.1 calls it not end-to-end)."),
    ("OP-WSYNC-1", _M, "current", "server", "spec §7.2", "weight-sync answers a request_id and resolves to completion metadata."),
    ("OP-ROUTER-1", _M, "current", "server", "spec §7", "router-replay-discard answers inline; bootstrap-router-replay answers inline or a request_id that is then polled."),
    ("OP-RESET-1", _M, "current", "server", "spec §7", "reset-prefix-cache answers inline (routed by sub_job_type sampling alone)."),
    ("OP-CANCEL-1", _M, "current", "server", "spec §7", "cancel-request answers an inline acknowledgement (no request_id to poll)."),
    ("OP-LOGS-1", _M, "current", "server", "spec §7.8", "tail-logs answers {entries, next_cursor, eof} inline; cursors are opaque strings."),
    ("OP-PAYLOAD-1", _M, "current", "server", "decided", "An operation payload missing a required field is refused naming it."),
    ("OP-FORWARD-2", _M, "proposed", "server", "proposed", "The forward operation takes a base64 DSSST1 frame, answers a request_id and resolves to model_outputs.logprobs [B, S] (a log-prob API the spec does not promise today)."),
    ("OP-LORA-1", _M, "current", "server", "spec §7.3", "weight-sync with weight_format lora is refused (4xx at submit or a failed request) unless the source and every target sub-job were created with a peft_config agreeing on r, lora_alpha and target_modules."),
    ("OP-HINT-1", _M, "current", "server", "decided", "weight-sync, bootstrap-router-replay and router-replay-discard naming no receiver (no sub_job_id or sub_job_type) on a job with several sub-jobs are refused, not routed silently (spec §7.4 tells clients to name it)."),
    ("OP-BOOTSTRAP-1", _M, "current", "server", "spec §7.4", "bootstrap-router-replay goes from a sampling source to a training target; any other direction is refused."),
    ("OP-RESET-2", _M, "current", "server", "decided", "reset-prefix-cache routed to a sub-job that is not a sampling one is refused."),
    ("OP-CANCEL-2", _M, "current", "server", "decided", "cancel-request of a request that has not started answers cancelled true and the request never runs (its poll says cancelled); of one running or done it answers cancelled false and the request completes."),
    ("OP-TYPE-1", _M, "current", "server", "spec §7", "An operation without operation_type is refused."),
    ("OP-ROUTER-2", _M, "current", "server", "decided", "The kit's bootstrap-router-replay answers inline."),
    ("OP-CANCEL-3", _M, "current", "server", "spec §7.7", "cancel-request naming only the request_id (no sub-job hint) is taken: the server finds the request's sub-job."),
    ("OP-LOGS-2", _M, "current", "server", "spec §7", "tail-logs is taken while the job is placing (its pages may then be empty and not EOF, spec §12.1)."),
    ("OP-RUNNING-1", _M, "current", "server", "spec §7", "Every operation but tail-logs on a job that is not running yet is refused."),
    # Limits and bad input
    ("LIMIT-BODY-1", _M, "current", "server", "spec §6.7", "A generate-stream body over 60 MiB is refused."),
    ("LIMIT-BODY-2", _M, "current", "server", "spec §6.1", "A body of exactly the 60 MiB limit or less is accepted by forward-backward."),
    ("LIMIT-FRAME-1", _M, "current", "server", "decided", "Frames over the tree depth, tensor count or JSON size limits are refused with a code, in bounded time and memory."),
    ("LIMIT-GROUPS-1", _M, "current", "server", "decided", "Open chunk groups and buffered bytes per job are capped; excess answers 429 or 413 with a code."),
    ("LIMIT-RETRYAFTER-1", _S, "current", "server", "decided", "429 and 503 answers carry Retry-After."),
    ("LIMIT-EXPIRE-1", _S, "current", "server", "decided", "Abandoned chunk groups expire after an idle time and release their bytes."),
    ("LIMIT-FRAME-2", _M, "current", "server", "decided", "The frame limits apply to frames reassembled from request chunks: an over-limit frame sent in chunks is refused with a 4xx and a code, and nothing executes."),
    ("LIMIT-RELEASE-1", _M, "current", "server", "decided", "A finished chunk group releases its buffered chunk bytes; only what a replay needs is kept."),
    ("LIMIT-RECOVER-1", _M, "current", "server", "decided", "After refusing hostile input (malformed frames, bad chunk sequences, limit breaches) the server keeps serving normal traffic on the same job."),
    ("LIMIT-RETRYAFTER-2", _M, "current", "server", "decided", "A refusal for a server limit (429 chunk_group_limit or rate_limited) carries Retry-After (decided), so clients back off instead of spinning."),
    ("LIMIT-EXPIRE-2", _M, "current", "server", "decided", "An abandoned chunk group stops counting against the open-group and buffered-byte caps once the server's idle time has passed (decided)."),
    ("LIMIT-ACCOUNT-1", _M, "current", "server", "decided", "Chunk-group caps apply per account (token) as well as per job and per server: one account at its caps does not stop another account's chunked upload."),
    ("LIMIT-IDLE-1", _S, "current", "server", "decided", "A request body that stops arriving is answered 408 (or the connection closed) after the server's idle time and its bytes freed, never held until the client gives up."),
    ("LIMIT-LATE-1", _M, "current", "server", "decided", "A call whose job ended while its body was still arriving answers 409 and leaves no request behind."),
    ("LIMIT-BOUNDS-1", _S, "proposed", "server", "decided", "top_k, max_tokens, n and the prompt count have bounds: a call over one answers 400 naming the limit, in bounded time and memory."),
    ("LIMIT-BODY-3", _M, "current", "server", "decided", "Any request body over 60 MiB answers 413 with code payload_too_large."),
    # Proposed
    ("PROP-FNG-1", _M, "proposed", "server", "proposed", "POST /{job_id}/forward-no-grad accepts DSSST1 request chunks and answers {request_id, job_id}."),
    ("PROP-FNG-2", _M, "proposed", "server", "proposed", "forward-no-grad resolves to {model_outputs: {logprobs [B, S] float32, entropy?}, metrics} as DSSST1."),
    ("PROP-FNG-3", _M, "proposed", "server", "proposed", "forward-no-grad returns entropy [B, S] when meta.calculate_entropy is set."),
    ("PROP-FNG-4", _M, "proposed", "server", "proposed", "forward-no-grad accepts the verl envelope kwargs and reference_model."),
    ("PROP-LOGPROBS-1", _M, "proposed", "server", "proposed", "POST /{job_id}/log-probs takes JSON {prompts, completions?, top_k?} and resolves to a DSSST1 result."),
    ("PROP-METRICS-1", _M, "proposed", "server", "proposed", "forward-backward results carry metrics {grad_norm, ppo_kl, pg_clipfrac_lower, pg_loss, kl_loss, kl_coef}."),
    ("PROP-METRICS-2", _M, "proposed", "server", "proposed", "step results carry a metrics block with grad_norm."),
    ("PROP-SHAPE-1", _M, "proposed", "server", "proposed", "forward-no-grad logprobs follow the shape rule for any batch shape."),
    # Client behaviour
    ("CLIENT-RETRY-1", _M, "current", "client", "spec §3.5", "The client retries connection errors, time-outs and 404/409/429/500/502/503/504 up to ten times with back-off (a call that is not idempotent only as CLIENT-ONCE-1 allows)."),
    ("CLIENT-RETRY-2", _M, "current", "client", "spec §3.5", "create-job is retried only when the request provably never reached the server."),
    ("CLIENT-RETRY-3", _S, "current", "client", "client", "The client honours Retry-After, bounded by its back-off cap."),
    ("CLIENT-CHUNK-1", _M, "current", "client", "spec §9.3", "forward-backward always sends the chunk envelope, even for a single chunk."),
    ("CLIENT-CHUNK-2", _M, "current", "client", "spec §9.3", "On chunk_group_restart_required the client replays the whole group once from chunk 0."),
    ("CLIENT-CHUNK-3", _M, "current", "client", "decided", "A non-final chunk answered with a request_id is a protocol error."),
    ("CLIENT-POLL-1", _M, "current", "client", "spec §9.5", "The client drains result chunks by cursor without back-off and verifies each sha256."),
    ("CLIENT-STATE-1", _M, "current", "client", "spec §3.2", "The client normalises job and request states (lower case, enum prefixes stripped, synonyms folded)."),
    ("CLIENT-ERR-1", _M, "current", "client", "client", "Every client failure is a typed error naming the route, status, code and the x-snowflake-request-id the answer carried."),
    ("CLIENT-PROMPT-1", _M, "current", "client", "spec §6.6", "Pre-tokenised prompts too long for the sampling sub-job fail before sending."),
    ("CLIENT-SHAPE-1", _M, "current", "client", "client", "Client results agree with the server's: shapes per the shape rules through every delivery form and status dialect."),
    ("CLIENT-ONCE-1", _M, "current", "client", "decided", "After an ambiguous failure of a call that is not idempotent (read time-out, connection cut after sending, 500/502/504, 503 without Retry-After), the client does not resend it without idempotency keys: it raises AmbiguousOutcome naming the route, the attempt and the x-snowflake-request-id."),
    ("CLIENT-ONCE-2", _M, "current", "client", "decided", "Idempotent calls (reads, polls, cancel, chunk-group uploads) and failures that prove a call never ran (refused connection, a 4xx refusal, 429, 503 with Retry-After) are still retried."),
    ("CLIENT-ONCE-3", _M, "proposed", "client", "proposed", "The client sends an Idempotency-Key on every data-plane POST and, against a server that honours keys, resends an ambiguously failed call with the same key, so the call executes at most once."),
    ("CLIENT-POLL-2", _M, "current", "client", "spec §3.4", "The client polls by default from 0.5 s, backing off x1.25 up to 6 s, and gives up after 1800 s."),
    ("CLIENT-NOBODY-1", _M, "current", "client", "spec §5.5", "The client sends cancel (and export, spec §5.8) without a body."),
    ("CLIENT-CONFIG-1", _M, "current", "client", "spec §8.2", "The client refuses, before sending, a PrimeRL config combining an enabled (or default) fused_cross_entropy with fp32_lm_head true or an integer fused_lm_head_token_chunk_size."),
    # Semantics
    ("SEM-KL-1", _S, "semantic", "server", "proposed", "After weight-sync, forward-no-grad log-probs of sampled tokens agree with generate's log-probs (k3 KL <= 0.05)."),
    ("SEM-PPOKL-1", _S, "semantic", "server", "proposed", "Before any step, old and new log-probs agree so ppo_kl == 0."),
    ("SEM-LEARN-1", _S, "semantic", "server", "decided", "A step with lr > 0 on a repeated batch lowers its loss."),
    ("SEM-RESTORE-1", _S, "semantic", "server", "spec §6.4", "A load restores the losses a batch had at save time exactly."),
    ("SEM-STALE-1", _S, "semantic", "server", "decided", "A sampler not synced keeps its outputs for a fixed seed."),
    ("SEM-SHIFT-1", _S, "semantic", "server", "spec §10.4", "logprobs[:, i] is the log-probability of input_ids[:, i + 1] (the shifted convention)."),
    ("SEM-SIGN-1", _S, "semantic", "server", "decided", "A policy-gradient step raises the log-probability of positive-advantage responses."),
    # Idempotency keys
    ("IDEM-KEY-1", _M, "proposed", "server", "proposed", "A data-plane POST repeated with the same Idempotency-Key, method, path and body in the same account executes once: the repeat runs nothing again."),
    ("IDEM-KEY-2", _M, "proposed", "server", "proposed", "A repeat of an Idempotency-Key answers the original call's answer (its request_id, or its inline result), never another call's, also after other keyed calls."),
    ("IDEM-KEY-3", _M, "proposed", "server", "proposed", "A repeat of an Idempotency-Key with another method, path or body answers 409 with code idempotency_conflict and executes nothing."),
    ("IDEM-KEY-4", _M, "proposed", "server", "proposed", "Idempotency keys are scoped per account: another account's call with the same key is a call of its own and never gets the first account's answer."),
    ("IDEM-KEY-5", _S, "proposed", "server", "proposed", "The answer to a keyed call echoes its Idempotency-Key header, so a client can tell that the server honours keys (it keeps them for the documented window, 24 hours)."),
    # Integration surface (SkyRL, verl)
    ("INTEG-JOB-1", _M, "current", "client", "client", "create_arctic_rl_client(config) returns with its job running; reconnect_config() carries the job and sub-job ids, and a client built from that config reattaches to the same job instead of creating one."),
    ("INTEG-JOB-2", _M, "current", "client", "client", "shutdown(), called plainly or awaited, never cancels a job the client reattached to: the job keeps running for its owner."),
    ("INTEG-GEN-1", _M, "current", "client", "client", "generate(prompts=, sampling_params=) answers the list of outputs, one per prompt in order, each with its token_ids and finish_reason."),
    ("INTEG-FB-1", _M, "current", "client", "client", "A fwd_bwd answer carries metrics with a float loss (the service's, else its avg_loss) and a float grad_norm (NaN when the service reports none)."),
    ("INTEG-STEP-1", _M, "current", "client", "client", "A step answer carries a metrics block with a float grad_norm (NaN when the service reports none) and the step's last_lr."),
    ("INTEG-FWD-1", _M, "proposed", "client", "client", "fwd_no_grad(payload, reference_model=) answers per-token log-probs shaped like input_ids under batch.logprobs and batch.log_probs."),
)


def _clause(row: _Row) -> Clause:
    cid, level, profile, subject, source, text = row
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
