"""Named, deliberate contract violations, so the conformance suite can prove it has teeth.

Each mutant is a cheap conditional at one point of the fake (``state.mutant("name")``;
the chunk-protocol ones hook into the chunk machine by name, ``fake_gs/chunking/hooks.py``)
and declares the clause ids (``contract.clauses``) it breaks: the self-test expects
exactly those clauses to turn red when the fake runs with ``--mutant NAME``. A mutant with
an ``engine`` lives in that engine (the semantic ones need ``--engine tiny``: the shape
engine's values are synthetic); the self-test runs it with that engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.idempotency import CLIENT_MUTANT_KEY_DROPPED


@dataclass(frozen=True)
class Mutant:
    name: str
    clauses: tuple[str, ...]
    description: str
    #: The engine the mutant lives in (None: a check in the fake itself, any engine).
    engine: str | None = None
    #: A mutant of the kit's client, not of the fake: the fake ignores it and the
    #: conformance client properties apply it to the client they drive (issue 13).
    client: bool = False
    #: A mutant no clause can see (its answer stays within what the spec allows) and only
    #: a parity replay catches, against the recording of the unmutated fake (issue 25).
    parity: bool = False


#: The mutants, one a line: ``name | clause ids it breaks | description``, and for a mutant
#: that does not live in the fake itself a fourth column: the engine it lives in (``tiny``,
#: ``shape``) or ``client`` (a mutant of the kit's client); ``parity`` marks one that breaks
#: no clause (only a parity replay sees it). ``#`` lines are comments.
_TABLE = f"""
nonfinal-chunk-request-id | CG-NONFINAL-1 | a non-final chunk's answer carries a request_id
chunk-sha-unchecked | CHUNK-VERIFY-1 | reassembled frames are not checked against frame_sha256
replay-double-exec | CG-IDEM-1 CG-IDEM-3 | a replayed final chunk executes forward-backward again
unstable-cursor | POLL-CURSOR-1 | re-reading a cursor returns a shifted page
logprobs-short | PROP-FNG-2 PROP-SHAPE-1 OP-FORWARD-2 | forward logprobs are [B, S-1]
generate-drops-one | GEN-COUNT-1 | generate answers one result fewer than prompts
pickle-accepted | WIRE-PICKLE-1 | pickle payloads are accepted
frame-500 | WIRE-MALFORMED-1 ERR-NO500-1 | a malformed frame answers 500
bare-400 | ERR-ENVELOPE-1 | 400 answers are plain text without the error envelope
cancel-twice-409 | CANCEL-IDEM-1 | cancelling a cancelled job answers 409
terminated-accepts | JOB-RUNNING-2 | cancelled/terminated/failed jobs accept data-plane calls
enum-in-short | JOB-STATE-2 | the short dialect spells job states as enum names
auth-ignored | AUTH-REQUIRED-1 AUTH-REQUIRED-2 | tokens are not checked
cross-token-visible | AUTH-ISOLATION-1 AUTH-ISOLATION-2 | another token's jobs are visible
oversize-accepted | LIMIT-BODY-1 LIMIT-BODY-3 OP-FORWARD-1 | bodies over 60 MiB are accepted
load-keeps-steps | SAVE-LOAD-1 | load does not restore the checkpoint's global_steps
deleted-checkpoint-listed | CKPT-DELETE-1 | a deleted checkpoint stays listed
max-events-uncapped | POLL-MAXEV-2 | max_events is not capped at 512
no-request-id-header | ADDR-REQID-1 | responses lack x-snowflake-request-id
submit-missing-job-id | REQ-SUBMIT-1 | submit answers lack job_id
restart-not-required | CG-RESTART-1 | a first-seen group not starting at chunk 0 is accepted
steps-not-incremented | STEP-COUNT-1 | step does not bump global_steps
missing-chunks-accepted | CG-MISSING-1 | a final chunk with chunks missing executes
wrong-content-type-accepted | ADDR-CT-2 ADDR-CT-3 | 415 is not enforced
capacity-ignored | CAP-QUEUE-1 | jobs beyond capacity are admitted and run
# Strict mode is a fake-only debugging aid, not a server promise: no clause to break.
status-filter-ignored | JOB-LIST-2 | GET /?status= ignores the filter
failed-without-reason | JOB-STATE-3 | failed jobs carry an empty reason
unknown-op-accepted | OP-UNKNOWN-1 | unknown operation types answer an empty inline result
routing-conflict-ignored | OP-ROUTE-1 | conflicting routing hints are not refused
stream-events-repeated | GENS-DRAIN-1 | stream events are returned again by later polls
entropy-missing | PROP-FNG-3 | entropy is omitted even when asked for
fb-metrics-missing | PROP-METRICS-1 | forward-backward results carry no metrics in the proposed profile
# Limits, faults and hostile input (issue 6).
groups-uncapped | LIMIT-GROUPS-1 | open chunk groups and buffered bytes are not capped
retry-after-missing | LIMIT-RETRYAFTER-1 LIMIT-RETRYAFTER-2 | 429 and 503 answers carry no Retry-After
traversal-accepted | CKPT-PATH-1 | export file names are built from the checkpoint id
admin-open | AUTH-ADMIN-1 | the admin API answers without a token although tokens are set
group-never-expires | LIMIT-EXPIRE-1 LIMIT-EXPIRE-2 | abandoned chunk groups never expire
deep-tree-500 | LIMIT-FRAME-1 | a frame nested past the depth limit answers 500
chunked-limits-skipped | LIMIT-FRAME-2 | frames reassembled from chunks skip the frame limits
group-bytes-kept | LIMIT-RELEASE-1 | finished chunk groups keep their chunk bytes
refusal-wedges-job | LIMIT-RECOVER-1 | a job refusing a malformed frame stops serving (503)
# Semantics (issue 7): numeric bugs only a real model shows; checked by the tiny engine.
tiny-logprobs-shifted | SEM-SHIFT-1 SEM-KL-1 SEM-PPOKL-1 | forward log-probs are unshifted: logprobs[:, i] = log p(input_ids[:, i]) | tiny
tiny-stale-sampler | SEM-KL-1 | weight-sync does not update the sampler | tiny
tiny-sampler-drifts | SEM-STALE-1 | the sampler follows the training weights at every step, without a sync | tiny
tiny-advantages-flipped | SEM-SIGN-1 | the policy loss negates the advantages | tiny
tiny-step-ascends | SEM-LEARN-1 SEM-SIGN-1 | step moves the weights up the gradient (maximises the loss) | tiny
tiny-load-partial | SEM-RESTORE-1 | load restores the weights but starts a fresh optimizer | tiny
tiny-fwd-ignores-temperature | SEM-PPOKL-1 | forward(-no-grad) ignores meta.temperature while forward-backward applies it | tiny
# Wave 2: a block per issue, so parallel work appends in different places.
# -- verdict (issue 10) --
# One per clause corrected to accept every form the spec allows: the looser check still
# catches a real violation.
job-not-found-miscoded | ERR-CODE-1 JOB-GET-1 | an unknown job answers 404 with the string code job_conflict (a 409 code)
validation-unnamed | ERR-ENVELOPE-2 | validation failures name no field (no detail list, a generic message)
last-lr-text | STEP-RESULT-1 STEP-LR-1 | step results carry last_lr as a string
saved-id-unloadable | SAVE-ID-1 CKPT-LIST-2 | a save's result names a checkpoint id that was not stored
failed-error-empty | POLL-FAILED-1 | failed requests carry an empty error
poll-next-cursor-missing | POLL-FIELDS-1 | poll answers leave out next_cursor when there is none
tail-logs-no-eof | OP-LOGS-1 | tail-logs pages carry no eof
capacity-text | CAP-FIELDS-1 | capacity counts are strings
# -- strict fake (issue 11) --
dp-mismatch-loads | SAVE-DP-1 CKPT-INIT-1 | loads and create-time inits across another n_gpus need no load_optimizer_states false
sampler-any-checkpoint | CKPT-INIT-2 | a sampler starts from a resumable checkpoint, or fresh from an unknown one
tiny-sampler-fresh | CKPT-INIT-3 | a sampler created from a checkpoint keeps fresh weights | tiny
lora-unchecked | OP-LORA-1 | LoRA weight-sync needs no peft_config on the sub-jobs
routing-hint-optional | OP-HINT-1 | weight-sync, bootstrap and discard without a routing hint are routed silently
bootstrap-any-direction | OP-BOOTSTRAP-1 | bootstrap-router-replay accepts any source and target types
reset-any-sub-job | OP-RESET-2 | reset-prefix-cache runs on a training sub-job
generate-on-trainer | GEN-SAMPLER-1 | a job without a sampling sub-job generates with its trainer
sp-size-unchecked | JOBV-SP-1 | an sp_size that does not divide n_gpus is accepted
offload-mode-unchecked | JOBV-OFFLOAD-1 | activation offload is accepted with a mode other than full
multiplex-id-unchecked | JOBV-MULTIPLEX-1 | any multiplex_job_id is accepted
seq-len-unchecked | FB-SEQLEN-1 | forward-backward frames longer than max_seq_len are accepted
generation-overruns | GEN-SEQLEN-1 | the shape engine generates max_tokens whatever max_seq_len leaves | shape
capacity-global | CAP-ACCOUNT-1 | capacity and admission count every account's jobs together
cancel-request-lies | OP-CANCEL-2 | cancel-request answers cancelled true for a running request, which still runs
job-id-ignored | JOB-ID-1 | a create body's job_id is replaced by a random one
# -- hardening (issue 12) --
service-token-admin | AUTH-ADMIN-2 | any service token opens the admin API
account-caps-ignored | LIMIT-ACCOUNT-1 | chunk-group caps are per job and per server only, not per account
results-never-freed | POLL-EXPIRE-1 | results read to the end are kept and served again past their grace
late-body-accepted | LIMIT-LATE-1 | a call whose job ended while its body arrived is still submitted
# -- at most once (issue 13) --
idempotency-repeats-execute | IDEM-KEY-1 IDEM-KEY-2 | a repeat of an Idempotency-Key executes the call again
idempotency-crossed-answer | IDEM-KEY-2 | a repeat of a key answers the account's latest stored answer, not its own
{CLIENT_MUTANT_KEY_DROPPED} | CLIENT-ONCE-3 | the kit's client leaves the Idempotency-Key off its resends | client
# -- recipes, logs, TLS (issue 17) --
logs-stage-empty | JOB-LOGS-2 | stage credentials are answered but no execution log is ever written to the stage
# -- url run (issue 16) --
cancel-cancelling-409 | CANCEL-IDEM-1 | a cancelled job lingers in cancelling for a second, and a cancel then answers 409
cursor-page-consumed | POLL-CURSOR-1 | a result page, once read, is gone: re-asking its cursor answers no events and no next_cursor
# -- spec letter (issue 24): the rules the fake did not enforce before --
debug-gate-open | JOB-DEBUG-2 | a create body's top-level debug block is ignored
body-taken | CANCEL-BODY-2 | cancel and export take (and ignore) a body
init-credentials-taken | CKPT-INIT-7 | a source_checkpoint_info carrying stage_info is taken
init-any-job | CKPT-INIT-6 | an initialisation without source_job_id finds the checkpoint in any of the caller's jobs
# -- openapi (issue 19) --
allow-one-route | ADDR-ALLOW-1 | a 405 lists the methods of one matched route, not of the path (the collection's Allow leaves out GET)
# -- load (issue 29): violations that show only while other requests are in flight --
concurrent-step-twice | REQ-ONCE-1 STEP-COUNT-1 | a step submitted while another request is in flight on the server executes twice (global_steps goes up by two)
concurrent-500 | ERR-NO500-1 | one in three steps and saves submitted while another request is in flight on the server answers 500 (and runs nothing)
# -- hardening round three (issue 23) --
job-ids-global | AUTH-ISOLATION-3 | job ids are one space for all accounts: creating with another account's job_id answers 409
# -- parity (issue 25): no clause breaks, a replay of a recorded run sees it --
avg-loss-flipped-large |  | forward-backward batches of more than 1 MiB of tensors answer their avg_loss with the sign flipped | parity
"""


def _parse(table: str) -> tuple[Mutant, ...]:
    """The :class:`Mutant` of each row of a ``name | clauses | description [| where]`` table."""
    rows = [line for line in table.splitlines() if line.strip() and not line.startswith("#")]
    mutants = []
    for row in rows:
        name, clauses, description, *where = (cell.strip() for cell in row.split(" | "))
        lives = where[0] if where else None
        mutants.append(Mutant(name, tuple(clauses.split()), description,
                              engine=None if lives in (None, "client", "parity") else lives,
                              client=lives == "client", parity=lives == "parity"))
    return tuple(mutants)


MUTANTS: dict[str, Mutant] = {m.name: m for m in _parse(_TABLE)}


def get_mutant(name: str) -> Mutant:
    try:
        return MUTANTS[name]
    except KeyError:
        raise ValueError(f"unknown mutant {name!r}; known: {', '.join(sorted(MUTANTS))}") from None
