"""The clauses: every checkable promise of the contract, numbered, and the table of them.

Each clause has an id (``AREA-TOPIC-N``), a level (MUST/SHOULD), a profile (``current``
is today's documented surface, ``proposed`` what the seed asks the server to add,
``semantic`` the numeric behaviour a real model must show), who must keep it (server or
client), its source (a section of the published spec, the client, a kit decision or a
proposal: :mod:`contract.specification.sections` lists the sections) and one sentence. Tests declare what they check with :func:`checks`; the
conformance report is per clause.

The rows are :data:`_TABLE` at the end of this module, one :class:`Clause` each, in one
block per area in the order of :data:`AREAS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass
from typing import Literal, TypeVar, get_args

F = TypeVar("F", bound=Callable[..., object])

Level = Literal["MUST", "SHOULD"]
#: The route profiles plus ``semantic`` (numeric behaviour: the tiny engine or a real model).
ClauseProfile = Literal["current", "proposed", "semantic"]
CLAUSE_PROFILES: tuple[ClauseProfile, ...] = get_args(ClauseProfile)
Subject = Literal["server", "client"]


@dataclass(frozen=True)
class Clause:
    """One row of the table: its id, then each field by name."""

    id: str
    _: KW_ONLY
    level: Level
    profile: ClauseProfile
    subject: Subject
    #: Where the rule comes from: ``spec §N.N`` (a section of the published specification),
    #: ``client`` (reference-client behaviour servers rely on), ``decided`` (the kit's choice
    #: where the spec is silent) or ``proposed`` (what the kit asks the server team to add).
    source: str
    text: str
    #: The id's prefix (``CG`` of ``CG-IDEM-1``), a key of :data:`AREAS` (derived when not given).
    area: str = ""

    def __post_init__(self) -> None:
        if not self.area:
            object.__setattr__(self, "area", self.id.split("-", 1)[0])

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

#: How a source naming the published specification starts: ``spec §6.3``.
SPEC_PREFIX = "spec §"
#: The sources that are not a spec section.
OTHER_SOURCES = ("client", "decided", "proposed")


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


# --- the table: one row per clause, in blocks by area (the order of AREAS) ------------------

_TABLE: tuple[Clause, ...] = (
    # Addressing and framing
    Clause("ADDR-PREFIX-1", level="MUST", profile="current", subject="server", source="spec §2.1", text="Routes are served under /api/v2/databases/{database}/schemas/{schema}/{endpoint} (the endpoint is cortex-training by default)."),
    Clause("ADDR-REQID-1", level="MUST", profile="current", subject="server", source="decided", text="Every response carries an x-snowflake-request-id header."),
    Clause("ADDR-CT-1", level="MUST", profile="current", subject="server", source="decided", text="Control-plane, step, save, load and operation calls answer with content type application/json (the spec shows JSON answers but names no answer content type)."),
    Clause("ADDR-CT-2", level="MUST", profile="current", subject="server", source="decided", text="A JSON route given a body that is not application/json answers 415 with code unsupported_media_type."),
    Clause("ADDR-CT-3", level="MUST", profile="current", subject="server", source="decided", text="forward-backward and generate given a body that is not application/octet-stream answer 415 with code unsupported_media_type."),
    Clause("ADDR-ROUTE-1", level="MUST", profile="current", subject="server", source="decided", text="An unknown path under the prefix answers 404 with the error envelope."),
    Clause("ADDR-ALLOW-1", level="SHOULD", profile="proposed", subject="server", source="proposed", text="A method a path does not serve answers 405 with an Allow header listing exactly the methods the OpenAPI document gives that path (HEAD beside GET allowed), as RFC 9110 asks of a 405."),
    Clause("ADDR-PREFIX-2", level="MUST", profile="current", subject="server", source="decided", text="The fake serves the routes under any database, schema and endpoint name."),
    Clause("ADDR-CT-4", level="MUST", profile="current", subject="server", source="spec §2.3", text="Control-plane, step, save, load and operation calls take application/json bodies, forward-backward and generate application/octet-stream DSSST1 frames, generate-stream UTF-8 JSON sent as application/octet-stream."),
    # Auth
    Clause("AUTH-REQUIRED-1", level="MUST", profile="current", subject="server", source="spec §2.2", text="With auth on, a service call without the Authorization bearer token is refused (a 4xx with a spec §3.6 body; the kit: 401 unauthenticated)."),
    Clause("AUTH-REQUIRED-2", level="MUST", profile="current", subject="server", source="spec §2.2", text="With auth on, a service call with a wrong token is refused (a 4xx with a spec §3.6 body; the kit: 401 unauthenticated)."),
    Clause("AUTH-HEADERS-1", level="MUST", profile="current", subject="server", source="spec §2.2", text="A call with Authorization: Bearer <PAT> and X-Snowflake-Authorization-Token-Type: PROGRAMMATIC_ACCESS_TOKEN is accepted."),
    Clause("AUTH-ISOLATION-1", level="MUST", profile="current", subject="server", source="decided", text="A job created with one token is invisible (404) to another token, by id and in the job list."),
    Clause("AUTH-ISOLATION-2", level="MUST", profile="current", subject="server", source="decided", text="Data-plane calls and request polls on another token's job answer 404."),
    Clause("AUTH-ADMIN-1", level="MUST", profile="current", subject="server", source="decided", text="With tokens configured, the fake's admin API (/_fake/..., export downloads excepted) answers 401 to calls without a valid bearer token."),
    Clause("AUTH-ADMIN-2", level="MUST", profile="current", subject="server", source="decided", text="With service tokens and an admin token configured, the fake's admin API answers 403 to every service token and 200 to the admin token only."),
    Clause("AUTH-ISOLATION-3", level="MUST", profile="current", subject="server", source="decided", text="A create whose job_id another token's job holds answers as a create with a free id of that shape does (never a 409 for it), and leaves that job untouched."),
    # Error envelopes
    Clause("ERR-ENVELOPE-1", level="MUST", profile="current", subject="server", source="spec §3.6", text="Every 4xx/5xx JSON error body takes a form spec §3.6 allows: {message, code} with a non-empty string or an integer code, or a detail list of {loc, msg, type}."),
    Clause("ERR-ENVELOPE-2", level="MUST", profile="current", subject="server", source="decided", text="A validation failure names each bad field: by a detail entry {loc, msg, type} (loc may start with \"body\") or, without a detail list, in its message."),
    Clause("ERR-NO500-1", level="MUST", profile="current", subject="server", source="decided", text="No input, however malformed, produces a 5xx answer."),
    Clause("ERR-NOSTATE-1", level="MUST", profile="current", subject="server", source="decided", text="A refused call changes no server state (no job, request, checkpoint or step created)."),
    Clause("ERR-CODE-1", level="MUST", profile="current", subject="server", source="decided", text="A refusal carrying a string code uses the code the contract assigns and that code's status (contract.errors.STATUS_OF); integer codes and bare detail lists carry no string code to judge."),
    Clause("ERR-SCHEMA-1", level="MUST", profile="current", subject="server", source="decided", text="Every answer matches the OpenAPI document (contract.openapi) for its route and status, body and content type."),
    Clause("ERR-REJECT-1", level="MUST", profile="current", subject="server", source="decided", text="Input that violates the OpenAPI document's request schema is refused with a 4xx, never accepted."),
    Clause("ERR-STATUS-1", level="MUST", profile="current", subject="server", source="decided", text="A refusal answers the status the kit gives its kind: 400 for invalid input, 401 without a valid token, 404 for an unknown id, 409 for a state conflict, 413 for a body too large, 415 for a wrong content type (the spec fixes a status only in §5.9, §6.4 and §9.3)."),
    # Job life
    Clause("JOB-CREATE-1", level="MUST", profile="current", subject="server", source="spec §5.1", text="A valid create body answers a 2xx {job_id} whose job_id is a non-empty string."),
    Clause("JOB-OBJECT-1", level="MUST", profile="current", subject="server", source="spec §5.2", text="A job object carries job_id, status, reason, created_at, updated_at, image_tag and sub_jobs (submitted_by and owner_role may be absent)."),
    Clause("JOB-OBJECT-2", level="MUST", profile="current", subject="server", source="spec §5.2", text="created_at and updated_at are RFC 3339 timestamp strings."),
    Clause("JOB-SUBJOB-1", level="MUST", profile="current", subject="server", source="spec §1.2", text="Sub-job ids are {job_id}:{training|sampling|log_prob}:{index}, index counting occurrences of the type from 0."),
    Clause("JOB-SUBJOB-2", level="MUST", profile="current", subject="server", source="spec §5.2", text="Each sub-job carries sub_job_id, job_type, status, model_name and, for a training sub-job, its training_config; the sub-jobs are the ones the create body asked for."),
    Clause("JOB-STATE-1", level="MUST", profile="current", subject="server", source="spec §3.2", text="A job moves pending -> placing -> initializing -> running and never backwards; initializing is a state of its own, shown while the job warms up (not collapsed into placing)."),
    Clause("JOB-STATE-2", level="MUST", profile="current", subject="server", source="decided", text="Job statuses are spelled in one dialect: short (running) or enum (JOB_STATE_RUNNING), never mixed."),
    Clause("JOB-STATE-3", level="MUST", profile="current", subject="server", source="spec §3.2", text="A failed job carries a non-empty reason."),
    Clause("JOB-LIST-1", level="MUST", profile="current", subject="server", source="spec §5.3", text="GET / answers {jobs: [...]} listing the caller's jobs, each entry carrying job_id, status and sub_jobs."),
    Clause("JOB-LIST-2", level="MUST", profile="current", subject="server", source="spec §5.3", text="GET /?status=S lists only jobs whose normalised status is S."),
    Clause("JOB-GET-1", level="MUST", profile="current", subject="server", source="decided", text="GET of an unknown job id answers 404 (with code job_not_found when the code is a string)."),
    Clause("JOB-EXPRUN-1", level="MUST", profile="current", subject="server", source="spec §5.6", text="GET /{job_id}/experiment-run answers experiment_name and experiment_run_name."),
    Clause("JOB-RUNNING-1", level="MUST", profile="current", subject="server", source="decided", text="Data-plane calls on a job that is not running answer 409 with code job_not_running."),
    Clause("JOB-RUNNING-2", level="MUST", profile="current", subject="server", source="spec §3.6", text="A cancelled, terminated or failed job refuses data-plane calls (a 4xx)."),
    Clause("JOB-MODEL-1", level="MUST", profile="current", subject="server", source="spec §1.4", text="A model the cache serves for inference only (or lists as coming soon for training) is refused for a training sub-job (a 4xx at create, or a job that ends failed)."),
    Clause("JOB-MODEL-2", level="SHOULD", profile="current", subject="server", source="spec §1.4", text="Every model the service caches for training is accepted for training, sampling and log_probability."),
    Clause("JOB-ID-1", level="MUST", profile="current", subject="server", source="decided", text="A create body's job_id (a UUID) names the job within the caller's account when the caller holds no job of that id; creating again with an id the caller holds answers 409 (a server that ignores the field is conformant)."),
    Clause("JOB-LOGS-1", level="MUST", profile="current", subject="server", source="spec §12.2", text="POST /api/v2/statements (outside the service prefix) answers the SYSTEM$GET_VSTAGE_WRITE_CREDS statement for the run GET /{job_id}/experiment-run names with scoped S3 credentials that list that run's stage (in the row form the reference client reads)."),
    Clause("JOB-LOGS-2", level="SHOULD", profile="current", subject="server", source="spec §12.2", text="A running job's stage holds its logs below _logs/{sub_job_id}/ for sub-jobs of that job, and only for them."),
    Clause("JOB-CREATE-2", level="MUST", profile="current", subject="server", source="decided", text="The kit's create answers 200 with a UUID job_id."),
    Clause("JOB-SUBJOB-3", level="MUST", profile="current", subject="server", source="spec §6.6", text="A sampling sub-job carries its inference_config with max_seq_len (the client reads it to check token prompts)."),
    Clause("JOB-LIST-3", level="MUST", profile="current", subject="server", source="decided", text="The kit lists each job as the full job object GET /{job_id} answers."),
    Clause("JOB-DEBUG-1", level="MUST", profile="current", subject="server", source="spec §5.1", text="A create body with a top-level debug block is refused (a 4xx) or taken, as the server's own debug gate decides; never a 5xx."),
    Clause("JOB-DEBUG-2", level="MUST", profile="current", subject="server", source="decided", text="The fake's debug gate is closed: a create body with a top-level debug block is refused naming debug."),
    # Job validation
    Clause("JOBV-EMPTY-1", level="MUST", profile="current", subject="server", source="spec §5.1", text="A create body whose sub_job_configs is empty or missing is refused (a 4xx at create, or a job that ends failed)."),
    Clause("JOBV-TYPE-1", level="MUST", profile="current", subject="server", source="spec §8.1", text="A job_type other than training, sampling or log_probability is refused (a 4xx at create, or a job that ends failed)."),
    Clause("JOBV-MODEL-1", level="MUST", profile="current", subject="server", source="spec §8.1", text="An empty or missing model_name is refused (a 4xx at create, or a job that ends failed)."),
    Clause("JOBV-CONFIG-1", level="MUST", profile="current", subject="server", source="spec §8.1", text="A sub-job must carry exactly one of training_config (training) or inference_config (sampling, log_probability); otherwise it is refused (a 4xx at create, or a job that ends failed)."),
    Clause("JOBV-TRAIN-1", level="MUST", profile="current", subject="server", source="decided", text="training_config requires a non-empty optimizer, max_seq_len > 0, train_batch_size > 0 and n_gpus > 0 (spec §8.2 has the client check them); otherwise it is refused naming the field."),
    Clause("JOBV-INFER-1", level="MUST", profile="current", subject="server", source="decided", text="inference_config requires max_seq_len > 0 and n_gpus > 0 (spec §8.3 has the client check them); otherwise it is refused naming the field."),
    Clause("JOBV-PASSTHRU-1", level="MUST", profile="current", subject="server", source="spec §8.2", text="Open pass-through keys in training_config/inference_config (ds_config, vllm_config, ...) are accepted."),
    Clause("JOBV-UNKNOWN-1", level="MUST", profile="current", subject="server", source="decided", text="Unknown JSON fields are ignored by default (decided)."),
    Clause("JOBV-JSON-1", level="MUST", profile="current", subject="server", source="decided", text="A body that is not valid JSON is refused with code malformed_json."),
    Clause("JOBV-SP-1", level="MUST", profile="current", subject="server", source="spec §8.2", text="training_config.sp_size must be a positive integer dividing the world size (n_gpus); otherwise create is refused (or the job fails)."),
    Clause("JOBV-OFFLOAD-1", level="MUST", profile="current", subject="server", source="spec §8.2", text="Activation offload (ac_config.offload_config.enabled true) needs ac_config mode full; otherwise create is refused (or the job fails)."),
    Clause("JOBV-MULTIPLEX-1", level="MUST", profile="current", subject="server", source="spec §8.3", text="multiplex_job_id must be a complete {job_id}:{training|sampling|log_prob}:{index} id of another job; otherwise create is refused (or the job fails)."),
    Clause("JOBV-MULTIPLEX-2", level="MUST", profile="current", subject="server", source="decided", text="multiplex_job_id names a running sub-job of a job the caller holds; one naming a missing sub-job, another account's or a missing job, or a job not running (cancelled, ended, pending) is refused at create with a 4xx, and a multiplexed sub-job's GPUs are its host's, counted once in in_use_gpus."),
    Clause("JOBV-FIELDS-1", level="MUST", profile="current", subject="server", source="spec §8.1", text="SubJobConfig's optional fields take the types spec §8.1 gives (global_batch_size and seed integers, dtype a string, model_post_init a list of strings, source_checkpoint_info an object); another type is refused (a 4xx at create, or a job that ends failed)."),
    # Capacity
    Clause("CAP-FIELDS-1", level="MUST", profile="current", subject="server", source="spec §5.4", text="GET /capacity answers has_reservation, max_total_gpus, in_use_gpus and available_gpus (proto3 may omit zero/false)."),
    Clause("CAP-COUNT-1", level="MUST", profile="current", subject="server", source="spec §5.4", text="in_use_gpus counts the GPUs of pending, placing, initializing and running jobs; available_gpus is at most max_total_gpus - in_use_gpus and never below 0 (schedulable capacity may cap it lower)."),
    Clause("CAP-QUEUE-1", level="MUST", profile="current", subject="server", source="decided", text="A job that does not fit the free GPUs stays pending until enough GPUs are freed."),
    Clause("CAP-ACCOUNT-1", level="MUST", profile="current", subject="server", source="spec §5.4", text="Capacity is per account: another account's jobs count neither in the caller's in_use_gpus nor against the caller's max_total_gpus."),
    Clause("CAP-COUNT-2", level="MUST", profile="current", subject="server", source="decided", text="The kit's available_gpus is exactly max(0, max_total_gpus - in_use_gpus)."),
    # Cancel
    Clause("CANCEL-ACTIVE-1", level="MUST", profile="current", subject="server", source="spec §5.5", text="Cancelling a pending, placing or running job succeeds (2xx) and the job enters cancellation (cancelling, then cancelled)."),
    Clause("CANCEL-IDEM-1", level="MUST", profile="current", subject="server", source="spec §5.5", text="Cancelling a cancelling or cancelled job again is an idempotent success (2xx)."),
    Clause("CANCEL-CONFLICT-1", level="MUST", profile="current", subject="server", source="spec §5.5", text="Cancelling a terminated or failed job answers a conflict-style refusal (409; 400 or 412 for a failed precondition)."),
    Clause("CANCEL-UNKNOWN-1", level="MUST", profile="current", subject="server", source="decided", text="Cancelling an unknown job answers 404."),
    Clause("CANCEL-FREE-1", level="MUST", profile="current", subject="server", source="spec §5.4", text="A cancelled job's GPUs are released from in_use_gpus."),
    Clause("CANCEL-ACTIVE-2", level="MUST", profile="current", subject="server", source="decided", text="An initializing job can be cancelled too: 2xx, and it enters cancellation."),
    Clause("CANCEL-ANSWER-1", level="MUST", profile="current", subject="server", source="decided", text="The kit answers a cancel 200 with {}."),
    Clause("CANCEL-BODY-1", level="MUST", profile="current", subject="server", source="spec §5.5", text="A cancel sent with no body and no content type is taken."),
    Clause("CANCEL-BODY-2", level="MUST", profile="current", subject="server", source="decided", text="The fake refuses a cancel or an export that carries a body (spec §5.5 and §5.8: no body); a server may take the call as if it carried none, answering as that call does."),
    # Checkpoints
    Clause("CKPT-LIST-1", level="MUST", profile="current", subject="server", source="spec §5.7", text="A checkpoint list entry carries checkpoint_id, global_steps, avg_loss, created_at and checkpoint_type (resumable | weights-only)."),
    Clause("CKPT-LIST-2", level="MUST", profile="current", subject="server", source="spec §5.7", text="A saved checkpoint appears in the list until it is deleted."),
    Clause("CKPT-DELETE-1", level="MUST", profile="current", subject="server", source="spec §5.9", text="Deleting a checkpoint answers 200 or 204 with no body (an empty JSON object counts as none) and removes it from the list."),
    Clause("CKPT-DELETE-2", level="MUST", profile="current", subject="server", source="spec §5.9", text="Deleting a missing checkpoint is an error, never a success (a 4xx; the spec's example is 404)."),
    Clause("CKPT-EXPORT-1", level="MUST", profile="current", subject="server", source="spec §5.8", text="Export answers checkpoint_id, files [{filename, url, size_bytes}] and expires_at."),
    Clause("CKPT-EXPORT-2", level="SHOULD", profile="current", subject="server", source="spec §5.8", text="Each exported file URL downloads size_bytes bytes."),
    Clause("CKPT-PATH-1", level="MUST", profile="current", subject="server", source="decided", text="Checkpoint ids and export file names are never used as file-system paths; traversal ids are refused or treated as opaque."),
    Clause("CKPT-INIT-1", level="MUST", profile="current", subject="server", source="spec §6.5", text="A training sub-job initialised from a checkpoint of a sub-job with another n_gpus is refused (a 4xx at create, or a job that ends failed) unless its training_config sets load_optimizer_states false."),
    Clause("CKPT-INIT-2", level="MUST", profile="current", subject="server", source="spec §6.5", text="A sampling sub-job initialised from a checkpoint needs source_checkpoint_info.checkpoint_id naming a weights-only checkpoint that exists; a resumable, unknown or missing one is refused (a 4xx at create, or a job that ends failed)."),
    Clause("CKPT-INIT-3", level="SHOULD", profile="semantic", subject="server", source="spec §13.4", text="A sampling sub-job initialised from a weights-only checkpoint serves those weights: it generates what the trained model generates, not what a fresh one does."),
    Clause("CKPT-ID-1", level="SHOULD", profile="current", subject="server", source="decided", text="A checkpoint id a URL path cannot carry (., .., /, control characters, not UTF-8) is refused at save with 400, so no checkpoint exists that cannot be exported or deleted."),
    Clause("CKPT-EXPORT-3", level="MUST", profile="current", subject="server", source="decided", text="Exporting a missing checkpoint is refused (404)."),
    Clause("CKPT-EXPORT-4", level="SHOULD", profile="current", subject="server", source="decided", text="An exported .safetensors file is a valid safetensors file."),
    Clause("CKPT-INIT-4", level="MUST", profile="current", subject="server", source="spec §6.5", text="A sampling sub-job can start from a weights-only checkpoint of a job that is no longer running (cancelled after the save)."),
    Clause("CKPT-INIT-5", level="MUST", profile="current", subject="server", source="spec §6.5", text="A create-time initialisation sent without credentials (no stage_info) is taken: the server stamps them itself."),
    Clause("CKPT-INIT-6", level="MUST", profile="current", subject="server", source="spec §8.4", text="A create-time initialisation from another job's checkpoint without source_job_id is refused (or the job fails): it must name the job owning the checkpoint."),
    Clause("CKPT-INIT-7", level="MUST", profile="current", subject="server", source="decided", text="The fake refuses a source_checkpoint_info carrying stage_info credentials (spec §6.5: clients should not send them)."),
    # Asynchronous submission
    Clause("REQ-SUBMIT-1", level="MUST", profile="current", subject="server", source="spec §3.1", text="An async call answers {request_id, job_id} with the caller's job_id."),
    Clause("REQ-SUBMIT-2", level="MUST", profile="current", subject="server", source="spec §3.1", text="Request ids are unique per submission."),
    Clause("REQ-ORDER-1", level="MUST", profile="current", subject="server", source="decided", text="Async requests of one job execute in submit order, so their state effects happen in order."),
    Clause("REQ-UNKNOWN-1", level="MUST", profile="current", subject="server", source="decided", text="Polling an unknown request id answers 404 with code request_not_found."),
    Clause("REQ-ONCE-1", level="MUST", profile="current", subject="server", source="decided", text="An accepted async call (answered a request_id) executes exactly once, also while many calls of one or many jobs are in flight: it runs (its poll never answers request_not_found) and no submission runs twice."),
    # Polling and delivery
    Clause("POLL-FIELDS-1", level="MUST", profile="current", subject="server", source="spec §6.8", text="A poll answer carries request_id, status, created_at, updated_at, result, error, events and next_cursor; an empty error or next_cursor may be null or \"\"."),
    Clause("POLL-STATE-1", level="MUST", profile="current", subject="server", source="spec §3.3", text="Request statuses are spelled as spec §3.3 lists them: pending, running, streaming, done, completed, succeeded, failed, cancelled or canceled, or a raw enum name (REQUEST_STATE_DONE, ...)."),
    Clause("POLL-TERMINAL-1", level="MUST", profile="current", subject="server", source="spec §3.3", text="Once terminal, a request's status (normalised) and result never change."),
    Clause("POLL-EMPTY-1", level="MUST", profile="current", subject="server", source="decided", text="A done request's result is an object, or null when there is none to show (spec §6.8 has the client read a missing result as {})."),
    Clause("POLL-INLINE-1", level="MUST", profile="current", subject="server", source="spec §9.4", text="An inline tensor result is {content_type: application/octet-stream, encoding: base64, wire_format: DSSST1, payload_b64}."),
    Clause("POLL-CHUNKS-1", level="MUST", profile="current", subject="server", source="spec §9.5", text="A chunked result arrives as result_chunk events {type, payload_b64, payload_sha256} whose sha256 matches the chunk bytes."),
    Clause("POLL-CHUNKS-2", level="MUST", profile="current", subject="server", source="spec §9.5", text="While result chunks remain the answer carries next_cursor; the last page carries none (absent, null or \"\")."),
    Clause("POLL-CURSOR-1", level="MUST", profile="current", subject="server", source="spec §6.8", text="Re-asking the same cursor returns the same page (retry-safe)."),
    Clause("POLL-MAXEV-1", level="MUST", profile="current", subject="server", source="spec §6.8", text="max_events defaults to 16: without it a page carries at most 16 events."),
    Clause("POLL-MAXEV-2", level="MUST", profile="current", subject="server", source="spec §6.8", text="max_events is capped at 512: asking for more gets a page of at most 512 events, not a refusal."),
    Clause("POLL-MAXEV-3", level="MUST", profile="current", subject="server", source="decided", text="An invalid max_events (not a positive integer) is refused with 400 (the kit's), or taken as the default (a page of at most 16 events); never a 5xx."),
    Clause("POLL-REASSEMBLE-1", level="MUST", profile="current", subject="server", source="spec §9.5", text="Reassembled result chunks decode to the same result the inline form would carry."),
    Clause("POLL-FAILED-1", level="MUST", profile="current", subject="server", source="decided", text="A failed request carries a non-empty error: a message string or an object with a message."),
    Clause("POLL-EXPIRE-1", level="MUST", profile="proposed", subject="server", source="decided", text="A result the server has freed (read to the end past its grace, or pushed out by newer unread results) answers 410 with code result_expired, never another result or an empty one."),
    Clause("POLL-STATE-2", level="MUST", profile="current", subject="server", source="decided", text="The kit spells request statuses pending, running, streaming, done, failed or cancelled (their REQUEST_STATE_ names in the enum dialect)."),
    Clause("POLL-MAXEV-4", level="MUST", profile="current", subject="server", source="decided", text="The kit's result-chunk pages are full: min(max_events, the events left) events each."),
    # DSSST1
    Clause("WIRE-FORMAT-1", level="MUST", profile="current", subject="server", source="spec §9.2", text="Tensor results are DSSST1 frames: one safetensors blob (u64 header length, JSON header, tensor bytes) whose metadata carries dss with the structure and the version DSSST1."),
    Clause("WIRE-TREE-1", level="MUST", profile="current", subject="server", source="client", text="Tree nodes use the t/j/d/l/u tags; tuples are always u; tensor keys are dotted paths (__root__ at the root)."),
    Clause("WIRE-SCALAR-1", level="MUST", profile="current", subject="server", source="client", text="0-d tensors are stored reshaped to [1] with {scalar: true} and come back 0-d."),
    Clause("WIRE-EMPTY-1", level="MUST", profile="current", subject="server", source="client", text="A frame without tensors carries the 1-element uint8 __dss_empty__ tensor, dropped on decode."),
    Clause("WIRE-DTYPE-1", level="MUST", profile="current", subject="server", source="client", text="Every dtype torch and safetensors share round-trips exactly (bool, uint8, int8..int64, float16, bfloat16, float32, float64)."),
    Clause("WIRE-PICKLE-1", level="MUST", profile="current", subject="server", source="spec §9.1", text="A payload starting like pickle (0x80 0x02..0x05) is refused (a 4xx at submit, or a request that ends failed)."),
    Clause("WIRE-ZIP-1", level="MUST", profile="current", subject="server", source="spec §9.1", text="A payload starting like a zip (torch.save) is refused (a 4xx at submit, or a request that ends failed)."),
    Clause("WIRE-VERSION-1", level="MUST", profile="current", subject="server", source="spec §9.2", text="A frame whose dss version is not DSSST1 is refused (a 4xx at submit, or a request that ends failed)."),
    Clause("WIRE-HEADER-1", level="MUST", profile="current", subject="server", source="decided", text="A header length over 64 MiB or beyond the body is refused without allocating it."),
    Clause("WIRE-MALFORMED-1", level="MUST", profile="current", subject="server", source="decided", text="A malformed frame is refused with code malformed_frame (never 5xx)."),
    Clause("WIRE-META-1", level="SHOULD", profile="current", subject="server", source="spec §6.1", text="Tensor-op requests carry op metadata {response_options: {format: dssst1, delivery: chunked}}."),
    Clause("WIRE-DUPKEY-1", level="MUST", profile="current", subject="server", source="decided", text="A frame whose safetensors header names a key twice (anywhere, __metadata__ included) is refused with 400, as safetensors refuses it."),
    Clause("WIRE-LEGACY-1", level="MUST", profile="current", subject="server", source="decided", text="The kit's refusal of a pickle or torch.save payload says so in its message (legacy pickle / torch.save payloads are refused)."),
    # Byte chunking
    Clause("CHUNK-FORMAT-1", level="MUST", profile="current", subject="server", source="client", text="A chunk is a DSSST1 frame whose tree is {payload: 1-D uint8} and whose op metadata has one key request_chunk or result_chunk."),
    Clause("CHUNK-DESC-1", level="MUST", profile="current", subject="server", source="client", text="A chunk descriptor carries chunk_idx, total_chunks, frame_sha256, frame_size_bytes (and chunk_group_id on request chunks)."),
    Clause("CHUNK-SIZE-1", level="MUST", profile="current", subject="server", source="decided", text="Frames split at max_bytes - 8192 byte ranges (half of a max_bytes at or under 8192), halved until every chunk fits max_bytes."),
    Clause("CHUNK-ANY-1", level="MUST", profile="current", subject="server", source="spec §9.3", text="forward-backward accepts a frame split into any number of chunks of any valid size."),
    Clause("CHUNK-VERIFY-1", level="MUST", profile="current", subject="server", source="decided", text="Reassembly checks total size and sha256 and refuses a mismatch with a 4xx."),
    Clause("CHUNK-DESC-2", level="MUST", profile="current", subject="server", source="decided", text="Chunks whose descriptors disagree (total_chunks, frame_sha256, frame_size_bytes, operation) or whose index is out of range are refused with a 4xx."),
    Clause("CHUNK-KIND-1", level="MUST", profile="current", subject="server", source="decided", text="A result_chunk sent as a request chunk is refused with a 4xx."),
    Clause("CHUNK-PLAIN-1", level="MUST", profile="current", subject="server", source="spec §9.3", text="generate accepts a plain frame that fits, without a chunk envelope."),
    # Chunk groups
    Clause("CG-NONFINAL-1", level="MUST", profile="current", subject="server", source="spec §6.1", text="A non-final chunk's answer carries no request_id."),
    Clause("CG-FINAL-1", level="MUST", profile="current", subject="server", source="spec §9.3", text="The final chunk's answer carries the request_id to poll."),
    Clause("CG-CONNECTION-1", level="MUST", profile="current", subject="server", source="spec §9.3", text="Accepted chunks are kept with the training job: a group's chunks may arrive on different connections."),
    Clause("CG-RESTART-1", level="MUST", profile="current", subject="server", source="spec §9.3", text="A first-seen group starting at a chunk other than 0 answers 409 with code chunk_group_restart_required."),
    Clause("CG-CONFLICT-1", level="MUST", profile="current", subject="server", source="spec §9.3", text="Reusing a group id with another frame_sha256 answers 409 (the kit's code: chunk_group_conflict)."),
    Clause("CG-CONFLICT-2", level="MUST", profile="current", subject="server", source="spec §9.3", text="Reusing a group id with another total_chunks answers 409 (the kit's code: chunk_group_conflict)."),
    Clause("CG-CONFLICT-3", level="MUST", profile="current", subject="server", source="spec §9.3", text="Re-sending a chunk index of a group with a different payload answers 409 (the kit's code: chunk_group_conflict)."),
    Clause("CG-MISSING-1", level="MUST", profile="current", subject="server", source="decided", text="A final chunk arriving while chunks are missing is refused with 409: code chunk_group_missing_chunks (the kit's) or chunk_group_restart_required (the code spec §9.3 names for a group to replay)."),
    Clause("CG-IDEM-1", level="MUST", profile="current", subject="server", source="spec §9.3", text="Repeating a group's final chunk resolves to the original execution: forward-backward never runs twice for one group."),
    Clause("CG-IDEM-2", level="MUST", profile="current", subject="server", source="spec §9.3", text="A repeated non-final chunk with the same payload is accepted without effect."),
    Clause("CG-IDEM-3", level="MUST", profile="current", subject="server", source="spec §9.3", text="A replayed whole group after completion resolves to the same single execution and result."),
    # Forward-backward
    Clause("FB-RESULT-1", level="MUST", profile="current", subject="server", source="spec §6.1", text="forward-backward resolves to an object carrying job_id and a finite avg_loss; metrics and post_process_outputs, where it carries them, are objects; it may carry more (spec §11: conventional results, not closed schemas)."),
    Clause("FB-RESULT-3", level="MUST", profile="current", subject="server", source="decided", text="The kit's forward-backward result carries all four fields of spec §6.1's typical result: job_id, avg_loss, metrics and post_process_outputs (spec §11 lists them as common, not required)."),
    Clause("FB-SHAPE-1", level="MUST", profile="current", subject="server", source="spec §10.1", text="forward-backward accepts {args, kwargs} batches of int64 input_ids and labels (spec §10.1's minimal shape), with attention_mask and position_ids or without, shaped [batch, sequence], for any batch and sequence size."),
    Clause("FB-VERL-1", level="MUST", profile="current", subject="server", source="client", text="forward-backward accepts the verl-GRPO kwargs (input_ids, attention_mask, position_ids, prompts, responses, response_mask, advantages, old_log_probs, ref_log_prob): the batch resolves to a result FB-RESULT-1 describes."),
    Clause("FB-NOINPUT-1", level="MUST", profile="current", subject="server", source="decided", text="A forward-backward frame without input_ids is refused (or fails as a request with an error), never 5xx."),
    Clause("FB-SEQLEN-1", level="MUST", profile="current", subject="server", source="decided", text="A forward-backward frame whose sequences are longer than the training sub-job's max_seq_len is refused (4xx at submit or a failed request)."),
    Clause("FB-SHAPE-2", level="MUST", profile="current", subject="server", source="decided", text="forward-backward also accepts batches without labels, model kwargs of the other integer and float dtypes, extra tensors beside them and a processing block (spec §10.3 leaves those to the backend)."),
    # Step
    Clause("STEP-RESULT-1", level="MUST", profile="current", subject="server", source="spec §6.2", text="step resolves to {global_steps, last_lr} with an integer global_steps and last_lr a number or a list of numbers."),
    Clause("STEP-COUNT-1", level="MUST", profile="current", subject="server", source="decided", text="global_steps goes up by exactly one per step."),
    Clause("STEP-LR-1", level="MUST", profile="current", subject="server", source="decided", text="A step's learning_rate is reported back as last_lr (as every entry, when last_lr is a list)."),
    Clause("STEP-MEM-1", level="SHOULD", profile="current", subject="server", source="spec §6.2", text="peak_memory {gpu_peak, cpu_peak}, integer byte counts, is reported when step_peak_memory_log was set on the training config."),
    Clause("STEP-BAD-1", level="MUST", profile="current", subject="server", source="decided", text="A negative or non-numeric learning_rate is refused."),
    # Save / load
    Clause("SAVE-RESULT-1", level="MUST", profile="current", subject="server", source="spec §6.3", text="save resolves to a result carrying checkpoint_id (checkpoint_path and checkpoint_tag where present); the id in the result is authoritative."),
    Clause("SAVE-TYPE-1", level="MUST", profile="current", subject="server", source="spec §6.3", text="A save without checkpoint_type makes a resumable checkpoint, one with weights-only a weights-only one."),
    Clause("SAVE-ID-1", level="MUST", profile="current", subject="server", source="spec §6.3", text="The checkpoint_id in a save's result names the saved checkpoint (a load of it succeeds), whether or not the server kept the id the caller asked for."),
    Clause("SAVE-LOAD-1", level="MUST", profile="current", subject="server", source="spec §6.4", text="load of a saved checkpoint restores its global_steps."),
    Clause("SAVE-LOAD-2", level="MUST", profile="current", subject="server", source="spec §6.4", text="load without checkpoint_id is refused (a 4xx at submit, or a request that ends failed)."),
    Clause("SAVE-LOAD-3", level="MUST", profile="current", subject="server", source="spec §6.4", text="load with a target_sub_job_id not of this job answers 400; a sampling target answers 501."),
    Clause("SAVE-LOAD-4", level="MUST", profile="current", subject="server", source="spec §6.4", text="load with source_job_id loads another of the caller's jobs' checkpoint."),
    Clause("SAVE-DP-1", level="MUST", profile="current", subject="server", source="spec §6.4", text="A runtime load whose checkpoint came from a sub-job with another n_gpus is refused (a 4xx at submit, or a failed request) unless the target training sub-job was created with load_optimizer_states false; then it loads the weights."),
    Clause("SAVE-RESULT-2", level="MUST", profile="current", subject="server", source="decided", text="The kit's save result carries checkpoint_id, checkpoint_path and checkpoint_tag."),
    Clause("SAVE-TYPE-2", level="MUST", profile="current", subject="server", source="decided", text="checkpoint_type is case-insensitive; a type other than resumable or weights-only is refused."),
    Clause("SAVE-ID-2", level="MUST", profile="current", subject="server", source="decided", text="The kit's fake names a checkpoint as the caller's checkpoint_id asked."),
    Clause("SAVE-LOAD-5", level="MUST", profile="current", subject="server", source="decided", text="load of an unknown checkpoint or from an unknown source_job_id is refused (404) or fails as a request naming it."),
    # Generate
    Clause("GEN-COUNT-1", level="MUST", profile="current", subject="server", source="spec §6.6", text="generate answers exactly one result per prompt."),
    Clause("GEN-TOKENS-1", level="MUST", profile="current", subject="server", source="spec §6.6", text="Each result is an object carrying what was generated: its text or its token_ids (spec §6.6 shows both and finish_reason in a typical result; spec §11 leaves the fields of generation results open)."),
    Clause("GEN-FINISH-1", level="MUST", profile="current", subject="server", source="decided", text="finish_reason is stop or length."),
    Clause("GEN-LOGPROBS-1", level="MUST", profile="current", subject="server", source="decided", text="With sampling_params.logprobs set, per-token logprobs align with token_ids."),
    Clause("GEN-PROMPTS-1", level="MUST", profile="current", subject="server", source="spec §6.6", text="generate accepts string prompts and pre-tokenised prompts ([[1, 2, 3]])."),
    Clause("GEN-ALIGN-1", level="MUST", profile="current", subject="server", source="spec §6.6", text="sampling_params and routing_key lists must align with prompts; a misaligned list is refused (a 4xx at submit, or a request that ends failed)."),
    Clause("GEN-TOOLONG-1", level="MUST", profile="current", subject="server", source="decided", text="A token prompt with len >= the sampling sub-job's max_seq_len is refused."),
    Clause("GEN-RESULT-1", level="MUST", profile="current", subject="server", source="spec §6.6", text="The generate result is {job_id, results: [...]} DSSST1-encoded."),
    Clause("GEN-SAMPLER-1", level="MUST", profile="current", subject="server", source="spec §1.1", text="generate and generate-stream on a job without a sampling sub-job are refused (a 4xx at submit, or a request that ends failed)."),
    Clause("GEN-SEQLEN-1", level="MUST", profile="current", subject="server", source="spec §6.6", text="A token prompt plus its generated tokens never exceed the sampling sub-job's max_seq_len, whatever max_tokens asks."),
    Clause("GEN-TOKENS-2", level="MUST", profile="current", subject="server", source="decided", text="Each generate result has 1 <= len(token_ids) <= max_tokens (default 16)."),
    Clause("GEN-PARAMS-1", level="MUST", profile="current", subject="server", source="decided", text="generate takes sampling_params beyond the max_tokens and temperature spec §6.6 shows (logprobs, seed) and answers as for any request."),
    Clause("GEN-TOKENS-3", level="MUST", profile="current", subject="server", source="decided", text="The kit's generate results carry all three fields of spec §6.6's typical result: text, token_ids and finish_reason (spec §11 leaves generation results' fields open)."),
    # Generate-stream
    Clause("GENS-SUBMIT-1", level="MUST", profile="current", subject="server", source="spec §6.7", text="generate-stream takes JSON bytes as application/octet-stream and answers {request_id, job_id, count} with count = number of prompts."),
    Clause("GENS-EVENTS-1", level="MUST", profile="current", subject="server", source="decided", text="Stream events are {type: result, index, result}, {type: error, index, error} and a final {type: done, completed, failed} (spec §6.7 calls them opaque and shows these as the common shapes)."),
    Clause("GENS-DRAIN-1", level="MUST", profile="current", subject="server", source="spec §6.7", text="Stream events are drained destructively: each event is returned by exactly one poll."),
    Clause("GENS-BAD-1", level="MUST", profile="current", subject="server", source="decided", text="generate-stream given bytes that are not UTF-8 JSON is refused."),
    # Operations
    Clause("OP-UNKNOWN-1", level="MUST", profile="current", subject="server", source="decided", text="An unknown operation_type is refused with code unknown_operation_type."),
    Clause("OP-ROUTE-1", level="MUST", profile="current", subject="server", source="spec §7", text="When sub_job_id and sub_job_type are both given and name different sub-jobs, the operation is refused (the kit's code: routing_conflict)."),
    Clause("OP-ROUTE-2", level="MUST", profile="current", subject="server", source="spec §7", text="sub_job_type alone routes an operation when the job has exactly one sub-job of that type."),
    Clause("OP-ROUTE-3", level="MUST", profile="current", subject="server", source="decided", text="An unknown sub_job_id answers 400 or 404 with an error envelope."),
    Clause("OP-FORWARD-1", level="MUST", profile="current", subject="server", source="spec §7.1", text="A forward operation whose frame is over 60 MiB is refused with a 4xx and never runs (today's forward needs nothing more: spec §7.1 calls it not end-to-end)."),
    Clause("OP-WSYNC-1", level="MUST", profile="current", subject="server", source="spec §7.2", text="weight-sync answers a request_id and resolves to completion metadata."),
    Clause("OP-ROUTER-1", level="MUST", profile="current", subject="server", source="spec §7", text="router-replay-discard answers inline; bootstrap-router-replay answers inline or a request_id that is then polled."),
    Clause("OP-RESET-1", level="MUST", profile="current", subject="server", source="spec §7", text="reset-prefix-cache answers inline (routed by sub_job_type sampling alone)."),
    Clause("OP-CANCEL-1", level="MUST", profile="current", subject="server", source="spec §7", text="cancel-request answers an inline acknowledgement (no request_id to poll)."),
    Clause("OP-LOGS-1", level="MUST", profile="current", subject="server", source="spec §7.8", text="tail-logs answers {entries, next_cursor, eof} inline; cursors are opaque strings."),
    Clause("OP-PAYLOAD-1", level="MUST", profile="current", subject="server", source="decided", text="An operation payload missing a required field is refused naming it."),
    Clause("OP-FORWARD-2", level="MUST", profile="proposed", subject="server", source="proposed", text="The forward operation takes a base64 DSSST1 frame, answers a request_id and resolves to model_outputs.logprobs [B, S] (a log-prob API the spec does not promise today)."),
    Clause("OP-LORA-1", level="MUST", profile="current", subject="server", source="spec §7.3", text="weight-sync with weight_format lora is refused (4xx at submit or a failed request) unless the source and every target sub-job were created with a peft_config agreeing on r, lora_alpha and target_modules."),
    Clause("OP-HINT-1", level="MUST", profile="current", subject="server", source="decided", text="The fake refuses weight-sync, bootstrap-router-replay and router-replay-discard naming no receiver (no sub_job_id or sub_job_type) on a job with several sub-jobs (spec §7.4 tells clients to name it); a server may route them to a default receiver instead (spec §7: the hints are optional)."),
    Clause("OP-BOOTSTRAP-1", level="MUST", profile="current", subject="server", source="spec §7.4", text="bootstrap-router-replay goes from a sampling source to a training target; any other direction is refused (a 4xx, or a request_id whose request ends failed)."),
    Clause("OP-RESET-2", level="MUST", profile="current", subject="server", source="decided", text="reset-prefix-cache routed to a sub-job that is not a sampling one is refused: a 4xx, or 501 Not Implemented, with a spec §3.6 body."),
    Clause("OP-CANCEL-2", level="MUST", profile="current", subject="server", source="decided", text="cancel-request of a request that has not started answers cancelled true and the request never runs (its poll says cancelled); of one running or done it answers cancelled false and the request completes."),
    Clause("OP-TYPE-1", level="MUST", profile="current", subject="server", source="spec §7", text="An operation without operation_type is refused."),
    Clause("OP-ROUTER-2", level="MUST", profile="current", subject="server", source="decided", text="The kit's bootstrap-router-replay answers inline."),
    Clause("OP-CANCEL-3", level="MUST", profile="current", subject="server", source="spec §7.7", text="cancel-request naming only the request_id (no sub-job hint) is taken: the server finds the request's sub-job."),
    Clause("OP-LOGS-2", level="MUST", profile="current", subject="server", source="spec §7", text="tail-logs is taken while the job is placing (its pages may then be empty and not EOF, spec §12.1)."),
    Clause("OP-RUNNING-1", level="MUST", profile="current", subject="server", source="spec §7", text="Every operation but tail-logs on a job that is not running yet is refused."),
    # Limits and bad input
    Clause("LIMIT-BODY-1", level="MUST", profile="current", subject="server", source="spec §6.7", text="A generate-stream body over 60 MiB is refused."),
    Clause("LIMIT-BODY-2", level="MUST", profile="current", subject="server", source="spec §6.1", text="A body of exactly the 60 MiB limit or less is accepted by forward-backward."),
    Clause("LIMIT-FRAME-1", level="MUST", profile="current", subject="server", source="decided", text="Frames over the tree depth, tensor count or JSON size limits are refused with a code, in bounded time and memory."),
    Clause("LIMIT-GROUPS-1", level="MUST", profile="current", subject="server", source="decided", text="Open chunk groups and buffered bytes per job are capped; excess answers 429 or 413 with a code."),
    Clause("LIMIT-RETRYAFTER-1", level="SHOULD", profile="current", subject="server", source="decided", text="429 and 503 answers carry Retry-After."),
    Clause("LIMIT-EXPIRE-1", level="SHOULD", profile="current", subject="server", source="decided", text="Abandoned chunk groups expire after an idle time and release their bytes."),
    Clause("LIMIT-FRAME-2", level="MUST", profile="current", subject="server", source="decided", text="The frame limits apply to frames reassembled from request chunks: an over-limit frame sent in chunks is refused with a 4xx and a code, and nothing executes."),
    Clause("LIMIT-RELEASE-1", level="MUST", profile="current", subject="server", source="decided", text="A finished chunk group releases its buffered chunk bytes; only what a replay needs is kept."),
    Clause("LIMIT-RECOVER-1", level="MUST", profile="current", subject="server", source="decided", text="After refusing hostile input (malformed frames, bad chunk sequences, limit breaches) the server keeps serving normal traffic on the same job."),
    Clause("LIMIT-RETRYAFTER-2", level="MUST", profile="current", subject="server", source="decided", text="A refusal for a server limit (429 chunk_group_limit or rate_limited) carries Retry-After (decided), so clients back off instead of spinning."),
    Clause("LIMIT-EXPIRE-2", level="MUST", profile="current", subject="server", source="decided", text="An abandoned chunk group stops counting against the open-group and buffered-byte caps once the server's idle time has passed (decided)."),
    Clause("LIMIT-ACCOUNT-1", level="MUST", profile="current", subject="server", source="decided", text="Chunk-group caps apply per account (token) as well as per job and per server: one account at its caps does not stop another account's chunked upload."),
    Clause("LIMIT-IDLE-1", level="SHOULD", profile="current", subject="server", source="decided", text="A request body that stops arriving is answered 408 (or the connection closed) after the server's idle time and its bytes freed, never held until the client gives up."),
    Clause("LIMIT-LATE-1", level="MUST", profile="current", subject="server", source="decided", text="A call whose job ended while its body was still arriving answers 409 and leaves no request behind."),
    Clause("LIMIT-BOUNDS-1", level="SHOULD", profile="proposed", subject="server", source="decided", text="top_k, max_tokens, n and the prompt count have bounds: a call over one answers 400 naming the limit, in bounded time and memory."),
    Clause("LIMIT-BODY-3", level="MUST", profile="current", subject="server", source="decided", text="Any request body over 60 MiB answers 413 with code payload_too_large."),
    # Proposed
    Clause("PROP-FNG-1", level="MUST", profile="proposed", subject="server", source="proposed", text="POST /{job_id}/forward-no-grad accepts DSSST1 request chunks and answers {request_id, job_id}."),
    Clause("PROP-FNG-2", level="MUST", profile="proposed", subject="server", source="proposed", text="forward-no-grad resolves to {model_outputs: {logprobs [B, S] float32, entropy?}, metrics} as DSSST1."),
    Clause("PROP-FNG-3", level="MUST", profile="proposed", subject="server", source="proposed", text="forward-no-grad returns entropy [B, S] when meta.calculate_entropy is set."),
    Clause("PROP-FNG-4", level="MUST", profile="proposed", subject="server", source="proposed", text="forward-no-grad accepts the verl envelope kwargs and reference_model."),
    Clause("PROP-LOGPROBS-1", level="MUST", profile="proposed", subject="server", source="proposed", text="POST /{job_id}/log-probs takes JSON {prompts, completions?, top_k?} and resolves to a DSSST1 result."),
    Clause("PROP-METRICS-1", level="MUST", profile="proposed", subject="server", source="proposed", text="forward-backward results carry metrics {grad_norm, ppo_kl, pg_clipfrac_lower, pg_loss, kl_loss, kl_coef}."),
    Clause("PROP-METRICS-2", level="MUST", profile="proposed", subject="server", source="proposed", text="step results carry a metrics block with grad_norm."),
    Clause("PROP-SHAPE-1", level="MUST", profile="proposed", subject="server", source="proposed", text="forward-no-grad logprobs follow the shape rule for any batch shape."),
    # Client behaviour
    Clause("CLIENT-RETRY-1", level="MUST", profile="current", subject="client", source="spec §3.5", text="The client retries connection errors, time-outs and 404/409/429/500/502/503/504 up to ten times with back-off (a call that is not idempotent only as CLIENT-ONCE-1 allows)."),
    Clause("CLIENT-RETRY-2", level="MUST", profile="current", subject="client", source="spec §3.5", text="create-job is retried only when the request provably never reached the server."),
    Clause("CLIENT-RETRY-3", level="SHOULD", profile="current", subject="client", source="client", text="The client honours Retry-After, bounded by its back-off cap."),
    Clause("CLIENT-CHUNK-1", level="MUST", profile="current", subject="client", source="spec §9.3", text="forward-backward always sends the chunk envelope, even for a single chunk."),
    Clause("CLIENT-CHUNK-2", level="MUST", profile="current", subject="client", source="spec §9.3", text="On chunk_group_restart_required the client replays the whole group once from chunk 0."),
    Clause("CLIENT-CHUNK-3", level="MUST", profile="current", subject="client", source="decided", text="A non-final chunk answered with a request_id is a protocol error."),
    Clause("CLIENT-POLL-1", level="MUST", profile="current", subject="client", source="spec §9.5", text="The client drains result chunks by cursor without back-off and verifies each sha256."),
    Clause("CLIENT-STATE-1", level="MUST", profile="current", subject="client", source="spec §3.2", text="The client normalises job and request states (lower case, enum prefixes stripped, synonyms folded)."),
    Clause("CLIENT-ERR-1", level="MUST", profile="current", subject="client", source="client", text="Every client failure is a typed error naming the route, status, code and the x-snowflake-request-id the answer carried."),
    Clause("CLIENT-PROMPT-1", level="MUST", profile="current", subject="client", source="spec §6.6", text="Pre-tokenised prompts too long for the sampling sub-job fail before sending."),
    Clause("CLIENT-SHAPE-1", level="MUST", profile="current", subject="client", source="client", text="Client results agree with the server's: where a result carries model_outputs or generation results, their shapes follow the shape rules through every delivery form and status dialect (spec §11 leaves a forward result backend-specific, so one without model_outputs is not judged)."),
    Clause("CLIENT-ONCE-1", level="MUST", profile="current", subject="client", source="decided", text="After an ambiguous failure of a call that is not idempotent (read time-out, connection cut after sending, 500/502/504, 503 without Retry-After), the client does not resend it without idempotency keys: it raises AmbiguousOutcome naming the route, the attempt and the x-snowflake-request-id."),
    Clause("CLIENT-ONCE-2", level="MUST", profile="current", subject="client", source="decided", text="Idempotent calls (reads, polls, cancel, chunk-group uploads) and failures that prove a call never ran (refused connection, a 4xx refusal, 429, 503 with Retry-After) are still retried."),
    Clause("CLIENT-ONCE-3", level="MUST", profile="proposed", subject="client", source="proposed", text="The client sends an Idempotency-Key on every data-plane POST and, against a server that honours keys, resends an ambiguously failed call with the same key, so the call executes at most once."),
    Clause("CLIENT-POLL-2", level="MUST", profile="current", subject="client", source="spec §3.4", text="The client polls by default from 0.5 s, backing off x1.25 up to 6 s, and gives up after 1800 s."),
    Clause("CLIENT-NOBODY-1", level="MUST", profile="current", subject="client", source="spec §5.5", text="The client sends cancel (and export, spec §5.8) without a body."),
    Clause("CLIENT-CONFIG-1", level="MUST", profile="current", subject="client", source="spec §8.2", text="The client refuses, before sending, a PrimeRL config combining an enabled (or default) fused_cross_entropy with fp32_lm_head true or an integer fused_lm_head_token_chunk_size."),
    # Semantics
    Clause("SEM-KL-1", level="SHOULD", profile="semantic", subject="server", source="proposed", text="After weight-sync, forward-no-grad log-probs of sampled tokens agree with generate's log-probs (k3 KL <= 0.05)."),
    Clause("SEM-PPOKL-1", level="SHOULD", profile="semantic", subject="server", source="proposed", text="Before any step, old and new log-probs agree so ppo_kl == 0."),
    Clause("SEM-LEARN-1", level="SHOULD", profile="semantic", subject="server", source="decided", text="A step with lr > 0 on a repeated batch lowers its loss."),
    Clause("SEM-RESTORE-1", level="SHOULD", profile="semantic", subject="server", source="spec §6.4", text="A load restores the losses a batch had at save time exactly."),
    Clause("SEM-STALE-1", level="SHOULD", profile="semantic", subject="server", source="decided", text="A sampler not synced keeps its outputs for a fixed seed."),
    Clause("SEM-SHIFT-1", level="SHOULD", profile="semantic", subject="server", source="spec §10.4", text="logprobs[:, i] is the log-probability of input_ids[:, i + 1] (the shifted convention)."),
    Clause("SEM-SIGN-1", level="SHOULD", profile="semantic", subject="server", source="decided", text="A policy-gradient step raises the log-probability of positive-advantage responses."),
    # Idempotency keys
    Clause("IDEM-KEY-1", level="MUST", profile="proposed", subject="server", source="proposed", text="A data-plane POST repeated with the same Idempotency-Key, method, path and body in the same account executes once: the repeat runs nothing again."),
    Clause("IDEM-KEY-2", level="MUST", profile="proposed", subject="server", source="proposed", text="A repeat of an Idempotency-Key answers the original call's answer (its request_id, or its inline result), never another call's, also after other keyed calls."),
    Clause("IDEM-KEY-3", level="MUST", profile="proposed", subject="server", source="proposed", text="A repeat of an Idempotency-Key with another method, path or body answers 409 with code idempotency_conflict and executes nothing."),
    Clause("IDEM-KEY-4", level="MUST", profile="proposed", subject="server", source="proposed", text="Idempotency keys are scoped per account: another account's call with the same key is a call of its own and never gets the first account's answer."),
    Clause("IDEM-KEY-5", level="SHOULD", profile="proposed", subject="server", source="proposed", text="The answer to a keyed call echoes its Idempotency-Key header, so a client can tell that the server honours keys (it keeps them for the documented window, 24 hours)."),
    # Integration surface (SkyRL, verl)
    Clause("INTEG-JOB-1", level="MUST", profile="current", subject="client", source="client", text="create_arctic_rl_client(config) returns with its job running; reconnect_config() carries the job and sub-job ids, and a client built from that config reattaches to the same job instead of creating one."),
    Clause("INTEG-JOB-2", level="MUST", profile="current", subject="client", source="client", text="shutdown(), called plainly or awaited, never cancels a job the client reattached to: the job keeps running for its owner."),
    Clause("INTEG-GEN-1", level="MUST", profile="current", subject="client", source="client", text="generate(prompts=, sampling_params=) answers the list of outputs, one per prompt in order, each with its token_ids and finish_reason."),
    Clause("INTEG-FB-1", level="MUST", profile="current", subject="client", source="client", text="A fwd_bwd answer carries metrics with a float loss (the service's, else its avg_loss) and a float grad_norm (NaN when the service reports none)."),
    Clause("INTEG-STEP-1", level="MUST", profile="current", subject="client", source="client", text="A step answer carries a metrics block with a float grad_norm (NaN when the service reports none) and the step's last_lr."),
    Clause("INTEG-FWD-1", level="MUST", profile="proposed", subject="client", source="client", text="fwd_no_grad(payload, reference_model=) answers per-token log-probs shaped like input_ids under batch.logprobs and batch.log_probs."),
)

CLAUSES: dict[str, Clause] = {c.id: c for c in _TABLE}
