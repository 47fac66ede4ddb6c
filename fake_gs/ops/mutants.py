"""Named, deliberate contract violations, so the conformance suite can prove it has teeth.

Each mutant is one row of the table below: the clause ids (``contract.clauses``) it breaks,
and the seam points it acts at (``fake_gs/ops/seams.py``: a rule waived, a behaviour
bent, an answer rewritten, the chunk machine's rules and decisions, an engine's numeric
quirk). Production code asks its seam, never a mutant by name. The self-test expects
exactly the declared clauses to turn red when the fake runs with ``--mutant NAME``. A mutant
with an ``engine`` lives in that engine (the semantic ones need ``--engine tiny``: the shape
engine's values are synthetic); the self-test runs it with that engine. Rows are grouped by
the area of the service they break.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.idempotency import CLIENT_MUTANT_KEY_DROPPED


@dataclass(frozen=True)
class Mutant:
    name: str
    clauses: tuple[str, ...]
    description: str
    #: The seam points it acts at, each ``seam:point`` (``fake_gs/ops/seams.py``).
    seams: tuple[str, ...] = ()
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


#: The mutants, one a line: ``name | clause ids it breaks | seam points | description``, and
#: for a mutant that does not live in the fake itself a fifth column: the engine it lives in
#: (``tiny``, ``shape``) or ``client`` (a mutant of the kit's client); ``parity`` marks one
#: that breaks no clause (only a parity replay sees it); ``allowed`` one that breaks nothing
#: (a form the spec allows) and lists the clauses that must stay green with it. ``#`` lines
#: head an area.
_TABLE = f"""
# Addressing, content types and the error envelope
no-request-id-header | ADDR-REQID-1 | waive:request-id-header | responses lack x-snowflake-request-id
wrong-content-type-accepted | ADDR-CT-2 ADDR-CT-3 | waive:content-type | 415 is not enforced
allow-one-route | ADDR-ALLOW-1 | bend:allow-one-route | a 405 lists the methods of one matched route, not of the path (the collection's Allow leaves out GET)
body-taken | CANCEL-BODY-2 | waive:bodiless-routes | cancel and export take (and ignore) a body
frame-500 | WIRE-MALFORMED-1 ERR-NO500-1 | bend:malformed-frame-500 | a malformed frame answers 500
bare-400 | ERR-ENVELOPE-1 | bend:plain-400 | 400 answers are plain text without the error envelope
job-not-found-miscoded | ERR-CODE-1 JOB-GET-1 | rewrite:error-envelope | an unknown job answers 404 with the string code job_conflict (a 409 code)
validation-unnamed | ERR-ENVELOPE-2 | rewrite:error-envelope | validation failures name no field (no detail list, a generic message)
# Auth and account isolation
auth-ignored | AUTH-REQUIRED-1 AUTH-REQUIRED-2 | waive:tokens | tokens are not checked
cross-token-visible | AUTH-ISOLATION-1 AUTH-ISOLATION-2 | waive:token-isolation | another token's jobs are visible
job-ids-global | AUTH-ISOLATION-3 | waive:job-ids-per-account | job ids are one space for all accounts: creating with another account's job_id answers 409
admin-open | AUTH-ADMIN-1 | waive:admin-token | the admin API answers without a token although tokens are set
service-token-admin | AUTH-ADMIN-2 | bend:service-token-admin | any service token opens the admin API
# Jobs: create-time rules
create-no-job-id | JOB-CREATE-1 | bend:create-no-job-id | a valid create answers 200 {{}} (the job is made, its job_id never told): the session job cannot be set up, one root cause
job-id-ignored | JOB-ID-1 | waive:caller-job-id | a create body's job_id is replaced by a random one
debug-gate-open | JOB-DEBUG-2 | waive:debug-gate | a create body's top-level debug block is ignored
sp-size-unchecked | JOBV-SP-1 | waive:sp-size | an sp_size that does not divide n_gpus is accepted
inference-model-trains | JOB-MODEL-1 | waive:trainable-model | a training sub-job on an inference-only model is created and runs
offload-mode-unchecked | JOBV-OFFLOAD-1 | waive:offload-mode | activation offload is accepted with a mode other than full
multiplex-id-unchecked | JOBV-MULTIPLEX-1 | waive:multiplex-id | any multiplex_job_id is accepted
multiplex-any-target | JOBV-MULTIPLEX-2 | waive:multiplex-target | a multiplex_job_id naming no running sub-job of the caller's is accepted
init-credentials-taken | CKPT-INIT-7 | waive:init-credentials | a source_checkpoint_info carrying stage_info is taken
init-any-job | CKPT-INIT-6 | bend:init-any-job | an initialisation without source_job_id finds the checkpoint in any of the caller's jobs
sampler-any-checkpoint | CKPT-INIT-2 | waive:sampler-init | a sampler starts from a resumable checkpoint, or fresh from an unknown one
dp-mismatch-loads | SAVE-DP-1 CKPT-INIT-1 | waive:dp-size-change | loads and create-time inits across another n_gpus need no load_optimizer_states false
# Jobs: states, listing and cancel
enum-in-short | JOB-STATE-2 | bend:status-enum-names | the short dialect spells job states as enum names
failed-without-reason | JOB-STATE-3 | rewrite:failed-job-reason | failed jobs carry an empty reason
status-filter-ignored | JOB-LIST-2 | waive:status-filter | GET /?status= ignores the filter
terminated-accepts | JOB-RUNNING-2 | waive:ended-job-refuses waive:late-body-refused | cancelled/terminated/failed jobs accept data-plane calls
late-body-accepted | LIMIT-LATE-1 | waive:late-body-refused | a call whose job ended while its body arrived is still submitted
cancel-twice-409 | CANCEL-IDEM-1 | bend:cancelled-cancel-409 | cancelling a cancelled job answers 409
cancel-cancelling-409 | CANCEL-IDEM-1 | bend:cancelling-lingers | a cancelled job lingers in cancelling for a second, and a cancel then answers 409
initializing-collapsed | JOB-STATE-1 | bend:initializing-as-placing | a warming-up job is shown placing, never initializing (spec §3.2: not collapsed by the server)
# Capacity
capacity-ignored | CAP-QUEUE-1 | waive:capacity-admission | jobs beyond capacity are admitted and run
capacity-global | CAP-ACCOUNT-1 | waive:capacity-per-account | capacity and admission count every account's jobs together
capacity-text | CAP-FIELDS-1 | rewrite:capacity | capacity counts are strings
# Training calls and checkpoints
submit-missing-job-id | REQ-SUBMIT-1 | rewrite:submit-answer | submit answers lack job_id
logprobs-short | PROP-FNG-2 PROP-SHAPE-1 OP-FORWARD-2 | rewrite:forward-outputs | forward logprobs are [B, S-1]
entropy-missing | PROP-FNG-3 | rewrite:forward-outputs | entropy is omitted even when asked for
fb-metrics-missing | PROP-METRICS-1 | waive:proposed-metrics | forward-backward results carry no metrics in the proposed profile
seq-len-unchecked | FB-SEQLEN-1 | waive:seq-len | forward-backward frames longer than max_seq_len are accepted
steps-not-incremented | STEP-COUNT-1 | waive:step-counts | step does not bump global_steps
last-lr-text | STEP-RESULT-1 STEP-LR-1 | rewrite:step-answer | step results carry last_lr as a string
saved-id-unloadable | SAVE-ID-1 CKPT-LIST-2 | rewrite:saved-checkpoint-id | a save's result names a checkpoint id that was not stored
load-keeps-steps | SAVE-LOAD-1 | waive:load-restores-steps | load does not restore the checkpoint's global_steps
deleted-checkpoint-listed | CKPT-DELETE-1 | waive:checkpoint-delete | a deleted checkpoint stays listed
traversal-accepted | CKPT-PATH-1 | bend:export-name-from-id | export file names are built from the checkpoint id
# Sampling
generate-drops-one | GEN-COUNT-1 | rewrite:generate-results | generate answers one result fewer than prompts
generate-results-empty | GEN-TOKENS-1 GEN-TOKENS-3 | rewrite:generate-results | every generate result is an empty object: no text, no token ids
generate-on-trainer | GEN-SAMPLER-1 | waive:sampler-generates | a job without a sampling sub-job generates with its trainer
generation-overruns | GEN-SEQLEN-1 | engine:generation-overruns | the shape engine generates max_tokens whatever max_seq_len leaves | shape
# Operations
unknown-op-accepted | OP-UNKNOWN-1 | bend:unknown-op-runs | unknown operation types answer an empty inline result
routing-conflict-ignored | OP-ROUTE-1 | waive:routing-conflict | conflicting routing hints are not refused
routing-hint-optional | OP-HINT-1 | waive:routing-hint | weight-sync, bootstrap and discard without a routing hint are routed silently
lora-unchecked | OP-LORA-1 | waive:lora-peft | LoRA weight-sync needs no peft_config on the sub-jobs
bootstrap-any-direction | OP-BOOTSTRAP-1 | waive:bootstrap-direction | bootstrap-router-replay accepts any source and target types
reset-any-sub-job | OP-RESET-2 | waive:reset-sampler-only | reset-prefix-cache runs on a training sub-job
cancel-request-lies | OP-CANCEL-2 | waive:cancel-request-truth | cancel-request answers cancelled true for a running request, which still runs
tail-logs-no-eof | OP-LOGS-1 | rewrite:tail-logs-page | tail-logs pages carry no eof
# Chunk groups (the chunk-group machine's rules and decisions, fake_gs/chunking/hooks.py)
nonfinal-chunk-request-id | CG-NONFINAL-1 | chunk:ack-leaks-request-id | a non-final chunk's answer carries a request_id
chunk-sha-unchecked | CHUNK-VERIFY-1 | chunk:sha-unverified | reassembled frames are not checked against frame_sha256
replay-double-exec | CG-IDEM-1 CG-IDEM-3 | chunk:replay-executes | a replayed final chunk executes forward-backward again
final-chunk-reruns-quietly | CG-IDEM-1 | chunk:replay-reruns-quietly | a repeated final chunk runs forward-backward again but answers the original request: only the next step's micro-batch count shows it
restart-not-required | CG-RESTART-1 | chunk:restart | a first-seen group not starting at chunk 0 is accepted
missing-chunks-accepted | CG-MISSING-1 | chunk:missing | a final chunk with chunks missing executes
groups-uncapped | LIMIT-GROUPS-1 | chunk:caps | open chunk groups and buffered bytes are not capped
account-caps-ignored | LIMIT-ACCOUNT-1 | chunk:account-caps | chunk-group caps are per job and per server only, not per account
group-bytes-kept | LIMIT-RELEASE-1 | chunk:bytes-kept | finished chunk groups keep their chunk bytes
chunked-limits-skipped | LIMIT-FRAME-2 | chunk:frame-limits-skipped | frames reassembled from chunks skip the frame limits
group-never-expires | LIMIT-EXPIRE-1 LIMIT-EXPIRE-2 | waive:group-expiry | abandoned chunk groups never expire
# Limits and hostile input
oversize-accepted | LIMIT-BODY-1 LIMIT-BODY-3 OP-FORWARD-1 | waive:body-limit | bodies over 60 MiB are accepted
pickle-accepted | WIRE-PICKLE-1 | waive:payload-refused | pickle payloads are accepted
deep-tree-500 | LIMIT-FRAME-1 | bend:deep-frame-500 | a frame nested past the depth limit answers 500
refusal-wedges-job | LIMIT-RECOVER-1 | bend:refusal-wedges-job | a job refusing a malformed frame stops serving (503)
retry-after-missing | LIMIT-RETRYAFTER-1 LIMIT-RETRYAFTER-2 | waive:retry-after | 429 and 503 answers carry no Retry-After
# Polling and results
unstable-cursor | POLL-CURSOR-1 | bend:cursor-shifts | re-reading a cursor returns a shifted page
cursor-page-consumed | POLL-CURSOR-1 | bend:cursor-page-consumed | a result page, once read, is gone: re-asking its cursor answers no events and no next_cursor
stream-events-repeated | GENS-DRAIN-1 | bend:stream-events-repeated | stream events are returned again by later polls
max-events-uncapped | POLL-MAXEV-2 | waive:max-events-cap | max_events is not capped at 512
poll-next-cursor-missing | POLL-FIELDS-1 | rewrite:poll-tail | poll answers leave out next_cursor when there is none
failed-error-empty | POLL-FAILED-1 | rewrite:failed-request-error | failed requests carry an empty error
results-never-freed | POLL-EXPIRE-1 | waive:results-freed | results read to the end are kept and served again past their grace
# At most once: Idempotency-Key
idempotency-repeats-execute | IDEM-KEY-1 IDEM-KEY-2 | waive:key-replays | a repeat of an Idempotency-Key executes the call again
idempotency-crossed-answer | IDEM-KEY-2 | bend:key-crossed-answer | a repeat of a key answers the account's latest stored answer, not its own
{CLIENT_MUTANT_KEY_DROPPED} | CLIENT-ONCE-3 | client:before-send | the kit's client leaves the Idempotency-Key off its resends | client
# Execution logs
logs-stage-empty | JOB-LOGS-2 | bend:stage-logs-unwritten | stage credentials are answered but no execution log is ever written to the stage
# Load: violations that show only while other requests are in flight
concurrent-step-twice | REQ-ONCE-1 STEP-COUNT-1 | bend:crowded-step-twice | a step submitted while another request is in flight on the server executes twice (global_steps goes up by two)
concurrent-500 | ERR-NO500-1 | bend:crowded-500 | one in three steps and saves submitted while another request is in flight on the server answers 500 (and runs nothing)
# Semantics: numeric bugs only a real model shows, in the tiny engine
tiny-logprobs-shifted | SEM-SHIFT-1 SEM-KL-1 SEM-PPOKL-1 | engine:logprobs-unshifted | forward log-probs are unshifted: logprobs[:, i] = log p(input_ids[:, i]) | tiny
tiny-stale-sampler | SEM-KL-1 | engine:sampler-not-synced | weight-sync does not update the sampler | tiny
tiny-sampler-drifts | SEM-STALE-1 | engine:sampler-drifts | the sampler follows the training weights at every step, without a sync | tiny
tiny-advantages-flipped | SEM-SIGN-1 | engine:advantages-flipped | the policy loss negates the advantages | tiny
tiny-step-ascends | SEM-LEARN-1 SEM-SIGN-1 | engine:step-ascends | step moves the weights up the gradient (maximises the loss) | tiny
tiny-load-partial | SEM-RESTORE-1 | engine:load-partial | load restores the weights but starts a fresh optimizer | tiny
tiny-fwd-ignores-temperature | SEM-PPOKL-1 | engine:forward-ignores-temperature | forward(-no-grad) ignores meta.temperature while forward-backward applies it | tiny
tiny-sampler-fresh | CKPT-INIT-3 | engine:sampler-init-fresh | a sampler created from a checkpoint keeps fresh weights | tiny
# Allowed forms: the spec allows them, so the run stays green (the clauses listed among them)
create-201 | JOB-CREATE-1 JOB-OBJECT-1 AUTH-REQUIRED-1 ADDR-ROUTE-1 ERR-ENVELOPE-1 STEP-RESULT-1 | bend:create-201 | a create answers 201 Created with its {{job_id}} | allowed
running-pages-empty-result | POLL-FIELDS-1 STEP-RESULT-1 STEP-COUNT-1 SAVE-RESULT-1 SAVE-LOAD-1 REQ-ORDER-1 | bend:inflight-result-empty | a page of a request still in flight carries result {{}} (spec §6.8's empty form) | allowed
# Parity: no clause breaks, only a replay against the unmutated fake's recording sees it
avg-loss-flipped-large |  | bend:large-batch-loss-flipped | forward-backward batches of more than 1 MiB of tensors answer their avg_loss with the sign flipped | parity
"""


def _parse(table: str) -> tuple[Mutant, ...]:
    """The :class:`Mutant` of each row of a ``name | clauses | seams | description [| where]`` table."""
    rows = [line for line in table.splitlines() if line.strip() and not line.startswith("#")]
    mutants = []
    for row in rows:
        name, clauses, seams, description, *where = (cell.strip() for cell in row.split(" | "))
        lives = where[0] if where else None
        mutants.append(Mutant(name, tuple(clauses.split()), description, tuple(seams.split()),
                              engine=None if lives in (None, "client", "parity", "allowed") else lives,
                              client=lives == "client", parity=lives == "parity",
                              allowed=lives == "allowed"))
    return tuple(mutants)


MUTANTS: dict[str, Mutant] = {m.name: m for m in _parse(_TABLE)}
