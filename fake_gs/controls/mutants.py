"""Named, deliberate contract violations, so the conformance suite can prove it has teeth.

Each mutant is one row of the table below: the clause ids (``contract.clauses``) it breaks,
and the seam points it acts at (``fake_gs/controls/seams.py``: a rule waived, a behaviour
bent, an answer rewritten, the chunk machine's rules and decisions, an engine's numeric
quirk). Production code asks its seam, never a mutant by name. The self-test expects
exactly the declared clauses to turn red when the fake runs with ``--mutant NAME``. A mutant
with an ``engine`` lives in that engine (the semantic ones need ``--engine tiny``: the shape
engine's values are synthetic); the self-test runs it with that engine. Rows are grouped by
the area of the service they break.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from contract.idempotency import CLIENT_MUTANT_KEY_DROPPED


@dataclass(frozen=True)
class Mutant:
    """One row of the table: its name, then each field by name."""

    name: str
    _: KW_ONLY
    #: The clause ids it breaks (for an ``allowed`` form: those that must stay green with it).
    clauses: tuple[str, ...]
    #: The seam points it acts at, each ``seam:point`` (``fake_gs/controls/seams.py``).
    seams: tuple[str, ...] = ()
    description: str
    #: The engine the mutant lives in (None: a check in the fake itself, any engine).
    engine: str | None = None
    #: A mutant of the kit's client, not of the fake: the fake ignores it and the
    #: conformance client properties apply it to the client they drive.
    client: bool = False
    #: A mutant no clause can see (its answer stays within what the spec allows) and only
    #: a parity replay catches, against the recording of the unmutated fake.
    parity: bool = False
    #: Not a violation: a form the spec allows that the kit's fake does not use; its clauses
    #: are those that must stay green with it (the self-test holds the run to exit 0).
    allowed: bool = False


#: Spellings from before the fake called these variations, still accepted (hidden and
#: deprecated): fake-gs's command-line flag, and the admin API's path listing them.
LEGACY_FLAG = "--mutant"
LEGACY_ADMIN_PATH = "/mutants"

#: The mutants, one :class:`Mutant` each, in one block per area of the service.
_TABLE: tuple[Mutant, ...] = (
    # Addressing, content types and the error envelope
    Mutant("no-request-id-header", clauses=("ADDR-REQID-1",), seams=("waive:request-id-header",), description="responses lack x-snowflake-request-id"),
    Mutant("wrong-content-type-accepted", clauses=("ADDR-CT-2", "ADDR-CT-3"), seams=("waive:content-type",), description="415 is not enforced"),
    Mutant("allow-one-route", clauses=("ADDR-ALLOW-1",), seams=("bend:allow-one-route",), description="a 405 lists the methods of one matched route, not of the path (the collection's Allow leaves out GET)"),
    Mutant("body-taken", clauses=("CANCEL-BODY-2",), seams=("waive:bodiless-routes",), description="cancel and export take (and ignore) a body"),
    Mutant("frame-500", clauses=("WIRE-MALFORMED-1", "ERR-NO500-1"), seams=("bend:malformed-frame-500",), description="a malformed frame answers 500"),
    Mutant("bare-400", clauses=("ERR-ENVELOPE-1",), seams=("bend:plain-400",), description="400 answers are plain text without the error envelope"),
    Mutant("job-not-found-miscoded", clauses=("ERR-CODE-1", "JOB-GET-1"), seams=("rewrite:error-envelope",), description="an unknown job answers 404 with the string code job_conflict (a 409 code)"),
    Mutant("validation-unnamed", clauses=("ERR-ENVELOPE-2",), seams=("rewrite:error-envelope",), description="validation failures name no field (no detail list, a generic message)"),
    # Auth and account isolation
    Mutant("auth-ignored", clauses=("AUTH-REQUIRED-1", "AUTH-REQUIRED-2"), seams=("waive:tokens",), description="tokens are not checked"),
    Mutant("cross-token-visible", clauses=("AUTH-ISOLATION-1", "AUTH-ISOLATION-2"), seams=("waive:token-isolation",), description="another token's jobs are visible"),
    Mutant("job-ids-global", clauses=("AUTH-ISOLATION-3",), seams=("waive:job-ids-per-account",), description="job ids are one space for all accounts: creating with another account's job_id answers 409"),
    Mutant("admin-open", clauses=("AUTH-ADMIN-1",), seams=("waive:admin-token",), description="the admin API answers without a token although tokens are set"),
    Mutant("service-token-admin", clauses=("AUTH-ADMIN-2",), seams=("bend:service-token-admin",), description="any service token opens the admin API"),
    # Jobs: create-time rules
    Mutant("create-no-job-id", clauses=("JOB-CREATE-1",), seams=("bend:create-no-job-id",), description="a valid create answers 200 {} (the job is made, its job_id never told): the session job cannot be set up, one root cause"),
    Mutant("job-id-ignored", clauses=("JOB-ID-1",), seams=("waive:caller-job-id",), description="a create body's job_id is replaced by a random one"),
    Mutant("debug-gate-open", clauses=("JOB-DEBUG-2",), seams=("waive:debug-gate",), description="a create body's top-level debug block is ignored"),
    Mutant("sp-size-unchecked", clauses=("JOBV-SP-1",), seams=("waive:sp-size",), description="an sp_size that does not divide n_gpus is accepted"),
    Mutant("inference-model-trains", clauses=("JOB-MODEL-1",), seams=("waive:trainable-model",), description="a training sub-job on an inference-only model is created and runs"),
    Mutant("offload-mode-unchecked", clauses=("JOBV-OFFLOAD-1",), seams=("waive:offload-mode",), description="activation offload is accepted with a mode other than full"),
    Mutant("multiplex-id-unchecked", clauses=("JOBV-MULTIPLEX-1",), seams=("waive:multiplex-id",), description="any multiplex_job_id is accepted"),
    Mutant("multiplex-any-target", clauses=("JOBV-MULTIPLEX-2",), seams=("waive:multiplex-target",), description="a multiplex_job_id naming no running sub-job of the caller's is accepted"),
    Mutant("init-credentials-taken", clauses=("CKPT-INIT-7",), seams=("waive:init-credentials",), description="a source_checkpoint_info carrying stage_info is taken"),
    Mutant("init-any-job", clauses=("CKPT-INIT-6",), seams=("bend:init-any-job",), description="an initialisation without source_job_id finds the checkpoint in any of the caller's jobs"),
    Mutant("sampler-any-checkpoint", clauses=("CKPT-INIT-2",), seams=("waive:sampler-init",), description="a sampler starts from a resumable checkpoint, or fresh from an unknown one"),
    Mutant("dp-mismatch-loads", clauses=("SAVE-DP-1", "CKPT-INIT-1"), seams=("waive:dp-size-change",), description="loads and create-time inits across another n_gpus need no load_optimizer_states false"),
    # Jobs: states, listing and cancel
    Mutant("enum-in-short", clauses=("JOB-STATE-2",), seams=("bend:status-enum-names",), description="the short dialect spells job states as enum names"),
    Mutant("failed-without-reason", clauses=("JOB-STATE-3",), seams=("rewrite:failed-job-reason",), description="failed jobs carry an empty reason"),
    Mutant("status-filter-ignored", clauses=("JOB-LIST-2",), seams=("waive:status-filter",), description="GET /?status= ignores the filter"),
    Mutant("terminated-accepts", clauses=("JOB-RUNNING-2",), seams=("waive:ended-job-refuses", "waive:late-body-refused"), description="cancelled/terminated/failed jobs accept data-plane calls"),
    Mutant("late-body-accepted", clauses=("LIMIT-LATE-1",), seams=("waive:late-body-refused",), description="a call whose job ended while its body arrived is still submitted"),
    Mutant("cancel-twice-409", clauses=("CANCEL-IDEM-1",), seams=("bend:cancelled-cancel-409",), description="cancelling a cancelled job answers 409"),
    Mutant("cancel-cancelling-409", clauses=("CANCEL-IDEM-1",), seams=("bend:cancelling-lingers",), description="a cancelled job lingers in cancelling for a second, and a cancel then answers 409"),
    Mutant("initializing-collapsed", clauses=("JOB-STATE-1",), seams=("bend:initializing-as-placing",), description="a warming-up job is shown placing, never initializing (spec §3.2: not collapsed by the server)"),
    # Capacity
    Mutant("capacity-ignored", clauses=("CAP-QUEUE-1",), seams=("waive:capacity-admission",), description="jobs beyond capacity are admitted and run"),
    Mutant("capacity-global", clauses=("CAP-ACCOUNT-1",), seams=("waive:capacity-per-account",), description="capacity and admission count every account's jobs together"),
    Mutant("capacity-text", clauses=("CAP-FIELDS-1",), seams=("rewrite:capacity",), description="capacity counts are strings"),
    # Training calls and checkpoints
    Mutant("submit-missing-job-id", clauses=("REQ-SUBMIT-1",), seams=("rewrite:submit-answer",), description="submit answers lack job_id"),
    Mutant("logprobs-short", clauses=("PROP-FNG-2", "PROP-SHAPE-1", "OP-FORWARD-2"), seams=("rewrite:forward-outputs",), description="forward logprobs are [B, S-1]"),
    Mutant("entropy-missing", clauses=("PROP-FNG-3",), seams=("rewrite:forward-outputs",), description="entropy is omitted even when asked for"),
    Mutant("fb-metrics-missing", clauses=("PROP-METRICS-1",), seams=("waive:proposed-metrics",), description="forward-backward results carry no metrics in the proposed profile"),
    Mutant("seq-len-unchecked", clauses=("FB-SEQLEN-1",), seams=("waive:seq-len",), description="forward-backward frames longer than max_seq_len are accepted"),
    Mutant("steps-not-incremented", clauses=("STEP-COUNT-1",), seams=("waive:step-counts",), description="step does not bump global_steps"),
    Mutant("last-lr-text", clauses=("STEP-RESULT-1", "STEP-LR-1"), seams=("rewrite:step-answer",), description="step results carry last_lr as a string"),
    Mutant("saved-id-unloadable", clauses=("SAVE-ID-1", "CKPT-LIST-2"), seams=("rewrite:saved-checkpoint-id",), description="a save's result names a checkpoint id that was not stored"),
    Mutant("load-keeps-steps", clauses=("SAVE-LOAD-1",), seams=("waive:load-restores-steps",), description="load does not restore the checkpoint's global_steps"),
    Mutant("deleted-checkpoint-listed", clauses=("CKPT-DELETE-1",), seams=("waive:checkpoint-delete",), description="a deleted checkpoint stays listed"),
    Mutant("traversal-accepted", clauses=("CKPT-PATH-1",), seams=("bend:export-name-from-id",), description="export file names are built from the checkpoint id"),
    # Sampling
    Mutant("generate-drops-one", clauses=("GEN-COUNT-1",), seams=("rewrite:generate-results",), description="generate answers one result fewer than prompts"),
    Mutant("generate-results-empty", clauses=("GEN-TOKENS-1", "GEN-TOKENS-3"), seams=("rewrite:generate-results",), description="every generate result is an empty object: no text, no token ids"),
    Mutant("generate-on-trainer", clauses=("GEN-SAMPLER-1",), seams=("waive:sampler-generates",), description="a job without a sampling sub-job generates with its trainer"),
    Mutant("generation-overruns", clauses=("GEN-SEQLEN-1",), seams=("engine:generation-overruns",), description="the shape engine generates max_tokens whatever max_seq_len leaves", engine="shape"),
    # Operations
    Mutant("unknown-op-accepted", clauses=("OP-UNKNOWN-1",), seams=("bend:unknown-op-runs",), description="unknown operation types answer an empty inline result"),
    Mutant("routing-conflict-ignored", clauses=("OP-ROUTE-1",), seams=("waive:routing-conflict",), description="conflicting routing hints are not refused"),
    Mutant("routing-hint-optional", clauses=("OP-HINT-1",), seams=("waive:routing-hint",), description="weight-sync, bootstrap and discard without a routing hint are routed silently"),
    Mutant("lora-unchecked", clauses=("OP-LORA-1",), seams=("waive:lora-peft",), description="LoRA weight-sync needs no peft_config on the sub-jobs"),
    Mutant("bootstrap-any-direction", clauses=("OP-BOOTSTRAP-1",), seams=("waive:bootstrap-direction",), description="bootstrap-router-replay accepts any source and target types"),
    Mutant("reset-any-sub-job", clauses=("OP-RESET-2",), seams=("waive:reset-sampler-only",), description="reset-prefix-cache runs on a training sub-job"),
    Mutant("cancel-request-lies", clauses=("OP-CANCEL-2",), seams=("waive:cancel-request-truth",), description="cancel-request answers cancelled true for a running request, which still runs"),
    Mutant("tail-logs-no-eof", clauses=("OP-LOGS-1",), seams=("rewrite:tail-logs-page",), description="tail-logs pages carry no eof"),
    # Chunk groups (the chunk-group machine's rules and decisions, fake_gs/chunking/hooks.py)
    Mutant("nonfinal-chunk-request-id", clauses=("CG-NONFINAL-1",), seams=("chunk:ack-leaks-request-id",), description="a non-final chunk's answer carries a request_id"),
    Mutant("chunk-sha-unchecked", clauses=("CHUNK-VERIFY-1",), seams=("chunk:sha-unverified",), description="reassembled frames are not checked against frame_sha256"),
    Mutant("replay-double-exec", clauses=("CG-IDEM-1", "CG-IDEM-3"), seams=("chunk:replay-executes",), description="a replayed final chunk executes forward-backward again"),
    Mutant("final-chunk-reruns-quietly", clauses=("CG-IDEM-1",), seams=("chunk:replay-reruns-quietly",), description="a repeated final chunk runs forward-backward again but answers the original request: only the next step's micro-batch count shows it"),
    Mutant("restart-not-required", clauses=("CG-RESTART-1",), seams=("chunk:restart",), description="a first-seen group not starting at chunk 0 is accepted"),
    Mutant("missing-chunks-accepted", clauses=("CG-MISSING-1",), seams=("chunk:missing",), description="a final chunk with chunks missing executes"),
    Mutant("groups-uncapped", clauses=("LIMIT-GROUPS-1",), seams=("chunk:caps",), description="open chunk groups and buffered bytes are not capped"),
    Mutant("account-caps-ignored", clauses=("LIMIT-ACCOUNT-1",), seams=("chunk:account-caps",), description="chunk-group caps are per job and per server only, not per account"),
    Mutant("group-bytes-kept", clauses=("LIMIT-RELEASE-1",), seams=("chunk:bytes-kept",), description="finished chunk groups keep their chunk bytes"),
    Mutant("chunked-limits-skipped", clauses=("LIMIT-FRAME-2",), seams=("chunk:frame-limits-skipped",), description="frames reassembled from chunks skip the frame limits"),
    Mutant("group-never-expires", clauses=("LIMIT-EXPIRE-1", "LIMIT-EXPIRE-2"), seams=("waive:group-expiry",), description="abandoned chunk groups never expire"),
    # Limits and hostile input
    Mutant("oversize-accepted", clauses=("LIMIT-BODY-1", "LIMIT-BODY-3", "OP-FORWARD-1"), seams=("waive:body-limit",), description="bodies over 60 MiB are accepted"),
    Mutant("pickle-accepted", clauses=("WIRE-PICKLE-1",), seams=("waive:payload-refused",), description="pickle payloads are accepted"),
    Mutant("deep-tree-500", clauses=("LIMIT-FRAME-1",), seams=("bend:deep-frame-500",), description="a frame nested past the depth limit answers 500"),
    Mutant("refusal-wedges-job", clauses=("LIMIT-RECOVER-1",), seams=("bend:refusal-wedges-job",), description="a job refusing a malformed frame stops serving (503)"),
    Mutant("retry-after-missing", clauses=("LIMIT-RETRYAFTER-1", "LIMIT-RETRYAFTER-2"), seams=("waive:retry-after",), description="429 and 503 answers carry no Retry-After"),
    # Polling and results
    Mutant("unstable-cursor", clauses=("POLL-CURSOR-1",), seams=("bend:cursor-shifts",), description="re-reading a cursor returns a shifted page"),
    Mutant("cursor-page-consumed", clauses=("POLL-CURSOR-1",), seams=("bend:cursor-page-consumed",), description="a result page, once read, is gone: re-asking its cursor answers no events and no next_cursor"),
    Mutant("stream-events-repeated", clauses=("GENS-DRAIN-1",), seams=("bend:stream-events-repeated",), description="stream events are returned again by later polls"),
    Mutant("max-events-uncapped", clauses=("POLL-MAXEV-2",), seams=("waive:max-events-cap",), description="max_events is not capped at 512"),
    Mutant("poll-next-cursor-missing", clauses=("POLL-FIELDS-1",), seams=("rewrite:poll-tail",), description="poll answers leave out next_cursor when there is none"),
    Mutant("failed-error-empty", clauses=("POLL-FAILED-1",), seams=("rewrite:failed-request-error",), description="failed requests carry an empty error"),
    Mutant("results-never-freed", clauses=("POLL-EXPIRE-1",), seams=("waive:results-freed",), description="results read to the end are kept and served again past their grace"),
    # At most once: Idempotency-Key
    Mutant("idempotency-repeats-execute", clauses=("IDEM-KEY-1", "IDEM-KEY-2"), seams=("waive:key-replays",), description="a repeat of an Idempotency-Key executes the call again"),
    Mutant("idempotency-crossed-answer", clauses=("IDEM-KEY-2",), seams=("bend:key-crossed-answer",), description="a repeat of a key answers the account's latest stored answer, not its own"),
    Mutant(CLIENT_MUTANT_KEY_DROPPED, clauses=("CLIENT-ONCE-3",), seams=("client:before-send",), description="the kit's client leaves the Idempotency-Key off its resends", client=True),
    # Execution logs
    Mutant("logs-stage-empty", clauses=("JOB-LOGS-2",), seams=("bend:stage-logs-unwritten",), description="stage credentials are answered but no execution log is ever written to the stage"),
    # Load: violations that show only while other requests are in flight
    Mutant("concurrent-step-twice", clauses=("REQ-ONCE-1", "STEP-COUNT-1"), seams=("bend:crowded-step-twice",), description="a step submitted while another request is in flight on the server executes twice (global_steps goes up by two)"),
    Mutant("concurrent-500", clauses=("ERR-NO500-1",), seams=("bend:crowded-500",), description="one in three steps and saves submitted while another request is in flight on the server answers 500 (and runs nothing)"),
    # Semantics: numeric bugs only a real model shows, in the tiny engine
    Mutant("tiny-logprobs-shifted", clauses=("SEM-SHIFT-1", "SEM-KL-1", "SEM-PPOKL-1"), seams=("engine:logprobs-unshifted",), description="forward log-probs are unshifted: logprobs[:, i] = log p(input_ids[:, i])", engine="tiny"),
    Mutant("tiny-stale-sampler", clauses=("SEM-KL-1",), seams=("engine:sampler-not-synced",), description="weight-sync does not update the sampler", engine="tiny"),
    Mutant("tiny-sampler-drifts", clauses=("SEM-STALE-1",), seams=("engine:sampler-drifts",), description="the sampler follows the training weights at every step, without a sync", engine="tiny"),
    Mutant("tiny-advantages-flipped", clauses=("SEM-SIGN-1",), seams=("engine:advantages-flipped",), description="the policy loss negates the advantages", engine="tiny"),
    Mutant("tiny-step-ascends", clauses=("SEM-LEARN-1", "SEM-SIGN-1"), seams=("engine:step-ascends",), description="step moves the weights up the gradient (maximises the loss)", engine="tiny"),
    Mutant("tiny-load-partial", clauses=("SEM-RESTORE-1",), seams=("engine:load-partial",), description="load restores the weights but starts a fresh optimizer", engine="tiny"),
    Mutant("tiny-fwd-ignores-temperature", clauses=("SEM-PPOKL-1",), seams=("engine:forward-ignores-temperature",), description="forward(-no-grad) ignores meta.temperature while forward-backward applies it", engine="tiny"),
    Mutant("tiny-sampler-fresh", clauses=("CKPT-INIT-3",), seams=("engine:sampler-init-fresh",), description="a sampler created from a checkpoint keeps fresh weights", engine="tiny"),
    # Allowed forms: the spec allows them, so the run stays green (the clauses listed among them)
    Mutant("create-201", clauses=("JOB-CREATE-1", "JOB-OBJECT-1", "AUTH-REQUIRED-1", "ADDR-ROUTE-1", "ERR-ENVELOPE-1", "STEP-RESULT-1"), seams=("bend:create-201",), description="a create answers 201 Created with its {job_id}", allowed=True),
    Mutant("running-pages-empty-result", clauses=("POLL-FIELDS-1", "STEP-RESULT-1", "STEP-COUNT-1", "SAVE-RESULT-1", "SAVE-LOAD-1", "REQ-ORDER-1"), seams=("bend:inflight-result-empty",), description="a page of a request still in flight carries result {} (spec §6.8's empty form)", allowed=True),
    # Parity: no clause breaks, only a replay against the unmutated fake's recording sees it
    Mutant("avg-loss-flipped-large", clauses=(), seams=("bend:large-batch-loss-flipped",), description="forward-backward batches of more than 1 MiB of tensors answer their avg_loss with the sign flipped", parity=True),
)

MUTANTS: dict[str, Mutant] = {m.name: m for m in _TABLE}

#: The table by name, as the fake names its rows: variations (``fake-gs --variation NAME``).
VARIATIONS = MUTANTS
#: A row of the table, as the fake names it.
Variation = Mutant
