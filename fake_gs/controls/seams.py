"""The seams where the fake's variations act, so production code never asks for one by name.

Each row of the variation table (the deliberate violations the fake can run with, beside
this module) names the seam points it acts at, as ``seam:point``. A production module asks
its seam one question per point and never learns which variation answered:

- ``waive`` (:class:`Rule`): a rule the fake enforces is switched off;
  ``seams.enforces(Rule.CONTENT_TYPE)``.
- ``bend`` (:class:`Bend`): a behaviour bent on purpose where the code would otherwise be
  right; ``seams.bends(Bend.CURSOR_SHIFTS)``.
- ``rewrite`` (:class:`Rewrite`): an answer value rewritten just before it goes out;
  ``value = seams.rewrite(Rewrite.CAPACITY, value)``, the effect being the variation's row
  in :data:`REWRITES`.
- ``chunk``: a rule of the chunk-group machine waived or its decision transformed
  (``fake_gs/chunking/hooks.py`` holds the points and their effects).
- ``engine`` (:class:`EngineQuirk`): a numeric bug the engine is built with.
- ``client``: a variation of the kit's client, applied by the conformance suite's own seam
  around the client it drives; the fake ignores it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any, TypeVar, cast

from contract.errors import ErrorCode
from contract.models import ErrorEnvelope
from fake_gs.controls.mutants import LEGACY_ADMIN_PATH, LEGACY_FLAG, VARIATIONS

T = TypeVar("T")

#: Older spellings still accepted (hidden, deprecated): of the ``--variation`` flag, and of
#: the admin path listing the variations.
VARIATION_FLAG_ALIASES: tuple[str, ...] = (LEGACY_FLAG,)
VARIATIONS_ADMIN_ALIASES: tuple[str, ...] = (LEGACY_ADMIN_PATH,)


class Rule(StrEnum):
    """A rule the fake enforces at one or a few points, which a ``waive`` variation turns off."""

    # addressing and errors
    CONTENT_TYPE = "content-type"  # wrong content types answer 415
    REQUEST_ID_HEADER = "request-id-header"  # every answer carries x-snowflake-request-id
    RETRY_AFTER = "retry-after"  # 429 and 503 answers carry Retry-After
    BODILESS_ROUTES = "bodiless-routes"  # cancel and export refuse a body
    # auth
    TOKENS = "tokens"  # data-plane calls need a known bearer token
    ADMIN_TOKEN = "admin-token"  # the admin API needs a token when tokens are set
    TOKEN_ISOLATION = "token-isolation"  # an account sees only its own jobs
    JOB_IDS_PER_ACCOUNT = "job-ids-per-account"  # a job id is taken only within its account
    # jobs: create-time rules
    DEBUG_GATE = "debug-gate"  # a top-level debug block is refused
    CALLER_JOB_ID = "caller-job-id"  # a create body's job_id is honoured
    SP_SIZE = "sp-size"  # sp_size divides n_gpus
    TRAINABLE_MODEL = "trainable-model"  # a training sub-job needs a model the service trains
    OFFLOAD_MODE = "offload-mode"  # activation offload needs mode full
    MULTIPLEX_ID = "multiplex-id"  # multiplex_job_id is a complete sub-job id of another job
    MULTIPLEX_TARGET = "multiplex-target"  # multiplex_job_id names a running sub-job the caller holds
    INIT_CREDENTIALS = "init-credentials"  # a source_checkpoint_info carries no stage_info
    SAMPLER_INIT = "sampler-init"  # a sampler starts from an existing weights-only checkpoint
    DP_SIZE_CHANGE = "dp-size-change"  # a data-parallel size change needs load_optimizer_states false
    # jobs: lifecycle, listing, capacity
    ENDED_JOB_REFUSES = "ended-job-refuses"  # ended jobs refuse data-plane calls
    LATE_BODY_REFUSED = "late-body-refused"  # a call whose job ended while its body arrived is refused
    STATUS_FILTER = "status-filter"  # GET /?status= filters
    CAPACITY_ADMISSION = "capacity-admission"  # jobs beyond capacity queue
    CAPACITY_PER_ACCOUNT = "capacity-per-account"  # capacity counts the caller's account only
    # checkpoints, training, operations
    CHECKPOINT_DELETE = "checkpoint-delete"  # a deleted checkpoint leaves the listing
    LOAD_RESTORES_STEPS = "load-restores-steps"  # load restores the checkpoint's global_steps
    STEP_COUNTS = "step-counts"  # step bumps global_steps
    SEQ_LEN = "seq-len"  # forward-backward frames fit max_seq_len
    PROPOSED_METRICS = "proposed-metrics"  # forward-backward results carry metrics (proposed profile)
    SAMPLER_GENERATES = "sampler-generates"  # generate needs a sampling sub-job
    ROUTING_CONFLICT = "routing-conflict"  # conflicting routing hints are refused
    ROUTING_HINT = "routing-hint"  # weight-sync, bootstrap and discard need a routing hint
    LORA_PEFT = "lora-peft"  # LoRA weight-sync needs a peft_config
    BOOTSTRAP_DIRECTION = "bootstrap-direction"  # bootstrap-router-replay goes sampler to trainer
    RESET_SAMPLER_ONLY = "reset-sampler-only"  # reset-prefix-cache runs on a sampling sub-job
    CANCEL_REQUEST_TRUTH = "cancel-request-truth"  # cancel-request says whether it stopped the request
    # limits
    BODY_LIMIT = "body-limit"  # bodies over the body limit are refused
    PAYLOAD_REFUSED = "payload-refused"  # pickle payloads are refused
    GROUP_EXPIRY = "group-expiry"  # abandoned chunk groups expire
    # polling and results
    MAX_EVENTS_CAP = "max-events-cap"  # max_events is capped
    RESULTS_FREED = "results-freed"  # results read to the end are freed after their grace
    # at most once
    KEY_REPLAYS = "key-replays"  # a repeated Idempotency-Key answers the stored answer


class Bend(StrEnum):
    """A behaviour a ``bend`` variation makes wrong at one or a few points."""

    # addressing and errors
    ALLOW_ONE_ROUTE = "allow-one-route"  # a 405's Allow lists one matched route's methods
    MALFORMED_FRAME_500 = "malformed-frame-500"  # a malformed frame answers 500
    PLAIN_400 = "plain-400"  # 400 answers are plain text
    STATUS_ENUM_NAMES = "status-enum-names"  # job states spelled as enum names
    # auth
    SERVICE_TOKEN_ADMIN = "service-token-admin"  # any service token opens the admin API
    # jobs
    CANCELLED_CANCEL_409 = "cancelled-cancel-409"  # cancelling a cancelled job answers 409
    CANCELLING_LINGERS = "cancelling-lingers"  # a cancelled job lingers in cancelling, cancel answers 409
    INITIALIZING_AS_PLACING = "initializing-as-placing"  # a warming-up job is shown placing
    CREATE_201 = "create-201"  # a create answers 201 Created (a form the spec allows)
    CREATE_NO_JOB_ID = "create-no-job-id"  # a create answers {} (the job is made, its id not told)
    INIT_ANY_JOB = "init-any-job"  # an initialisation finds its checkpoint in any of the caller's jobs
    # checkpoints, operations, logs
    EXPORT_NAME_FROM_ID = "export-name-from-id"  # export file names are built from the checkpoint id
    UNKNOWN_OP_RUNS = "unknown-op-runs"  # unknown operation types answer an empty result
    STAGE_LOGS_UNWRITTEN = "stage-logs-unwritten"  # no execution log reaches the stage
    LARGE_BATCH_LOSS_FLIPPED = "large-batch-loss-flipped"  # large batches answer -avg_loss
    # limits
    DEEP_FRAME_500 = "deep-frame-500"  # a frame past the depth limit crashes
    REFUSAL_WEDGES_JOB = "refusal-wedges-job"  # a job refusing a malformed frame stops serving
    # polling
    CURSOR_SHIFTS = "cursor-shifts"  # re-reading a cursor shifts its page
    CURSOR_PAGE_CONSUMED = "cursor-page-consumed"  # a page once read is gone
    STREAM_EVENTS_REPEATED = "stream-events-repeated"  # stream events come back on a later poll
    INFLIGHT_RESULT_EMPTY = "inflight-result-empty"  # in-flight pages carry result {} (allowed)
    # at most once
    KEY_CROSSED_ANSWER = "key-crossed-answer"  # a repeated key answers the account's latest answer
    # load: only while another request is in flight
    CROWDED_500 = "crowded-500"  # one in three crowded steps and saves answers 500
    CROWDED_STEP_TWICE = "crowded-step-twice"  # a crowded step executes twice


class Rewrite(StrEnum):
    """An answer value a ``rewrite`` variation changes just before it goes out."""

    ERROR_ENVELOPE = "error-envelope"
    SUBMIT_ANSWER = "submit-answer"
    FAILED_JOB_REASON = "failed-job-reason"
    CAPACITY = "capacity"
    FORWARD_OUTPUTS = "forward-outputs"
    STEP_ANSWER = "step-answer"
    SAVED_CHECKPOINT_ID = "saved-checkpoint-id"
    GENERATE_RESULTS = "generate-results"
    TAIL_LOGS_PAGE = "tail-logs-page"
    POLL_TAIL = "poll-tail"
    FAILED_REQUEST_ERROR = "failed-request-error"


class EngineQuirk(StrEnum):
    """A numeric bug an engine is built with (the engine named in the variation's row)."""

    LOGPROBS_UNSHIFTED = "logprobs-unshifted"
    SAMPLER_NOT_SYNCED = "sampler-not-synced"
    SAMPLER_DRIFTS = "sampler-drifts"
    ADVANTAGES_FLIPPED = "advantages-flipped"
    STEP_ASCENDS = "step-ascends"
    LOAD_PARTIAL = "load-partial"
    FORWARD_IGNORES_TEMPERATURE = "forward-ignores-temperature"
    SAMPLER_INIT_FRESH = "sampler-init-fresh"
    GENERATION_OVERRUNS = "generation-overruns"


def _ints_as_text(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in answer.items()}


def _without(key: str, only_if_none: bool = False) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def drop(answer: dict[str, Any]) -> dict[str, Any]:
        if only_if_none and answer.get(key) is not None:
            return answer
        return {k: v for k, v in answer.items() if k != key}

    return drop


def _outputs_without_last_column(outputs: dict[str, Any]) -> dict[str, Any]:
    if "logprobs" not in outputs:
        return outputs
    return {**outputs, "logprobs": outputs["logprobs"][:, :-1]}


def _code_swapped(found: ErrorEnvelope) -> ErrorEnvelope:
    if found.code != ErrorCode.JOB_NOT_FOUND:
        return found
    return found.model_copy(update={"code": str(ErrorCode.JOB_CONFLICT)})


def _validation_unnamed(found: ErrorEnvelope) -> ErrorEnvelope:
    if found.code != ErrorCode.VALIDATION_FAILED:
        return found
    return ErrorEnvelope(code=found.code, message="invalid request body")


@dataclass(frozen=True)
class Rewriting:
    """Where a ``rewrite`` variation acts and what it does to the value there."""

    point: Rewrite
    effect: Callable[[Any], Any]


#: Variation name -> its rewrite (the row's ``rewrite:`` point, with the effect applied there).
REWRITES: Mapping[str, Rewriting] = {
    "job-not-found-miscoded": Rewriting(Rewrite.ERROR_ENVELOPE, _code_swapped),
    "validation-unnamed": Rewriting(Rewrite.ERROR_ENVELOPE, _validation_unnamed),
    "submit-missing-job-id": Rewriting(Rewrite.SUBMIT_ANSWER, _without("job_id")),
    "failed-without-reason": Rewriting(Rewrite.FAILED_JOB_REASON, lambda _reason: ""),
    "capacity-text": Rewriting(Rewrite.CAPACITY, _ints_as_text),
    "logprobs-short": Rewriting(Rewrite.FORWARD_OUTPUTS, _outputs_without_last_column),
    "entropy-missing": Rewriting(Rewrite.FORWARD_OUTPUTS, _without("entropy")),
    "last-lr-text": Rewriting(Rewrite.STEP_ANSWER, lambda answer: {**answer, "last_lr": str(answer["last_lr"])}),
    "saved-id-unloadable": Rewriting(Rewrite.SAVED_CHECKPOINT_ID, lambda ckpt_id: ckpt_id + "-unsaved"),
    "generate-drops-one": Rewriting(Rewrite.GENERATE_RESULTS, lambda results: results[:-1]),
    "generate-results-empty": Rewriting(Rewrite.GENERATE_RESULTS, lambda results: [{} for _ in results]),
    "tail-logs-no-eof": Rewriting(Rewrite.TAIL_LOGS_PAGE, _without("eof")),
    "poll-next-cursor-missing": Rewriting(Rewrite.POLL_TAIL, _without("next_cursor", only_if_none=True)),
    "failed-error-empty": Rewriting(Rewrite.FAILED_REQUEST_ERROR, lambda _error: ""),
}

#: The seams a row may name, each with the points it knows (``chunk`` points are checked
#: against ``fake_gs/chunking/hooks.py`` by the tests, which may not be imported here).
KNOWN_POINTS: Mapping[str, frozenset[str] | None] = {
    "waive": frozenset(Rule), "bend": frozenset(Bend), "rewrite": frozenset(Rewrite),
    "engine": frozenset(EngineQuirk), "chunk": None, "client": frozenset({"before-send"}),
}


def _split(point: str) -> tuple[str, str]:
    seam, _, name = point.partition(":")
    return seam, name


@dataclass(frozen=True)
class Seams:
    """The seam points the running variation acts at (none for the plain fake)."""

    variation: str | None
    points: frozenset[tuple[str, str]]
    #: The rules switched off and the behaviours bent (``rule in seams.waived`` is
    #: ``not seams.enforces(rule)``).
    waived: frozenset[str] = frozenset()
    bent: frozenset[str] = frozenset()

    def enforces(self, rule: Rule) -> bool:
        """Is ``rule`` in force (not waived by the running variation)?"""
        return rule not in self.waived

    def bends(self, bend: Bend) -> bool:
        """Does the running variation bend the behaviour at ``bend``?"""
        return bend in self.bent

    def rewrite(self, point: Rewrite, value: T) -> T:
        """``value`` as it goes out at ``point``: rewritten when the running variation acts there."""
        rewriting = REWRITES.get(self.variation or "")
        if rewriting is None or rewriting.point != point:
            return value
        return cast(T, rewriting.effect(value))

    def named(self, seam: str) -> frozenset[str]:
        """The running variation's points at ``seam`` (``chunk``, ``engine``)."""
        return frozenset(name for kind, name in self.points if kind == seam)

    def engine_quirks(self) -> frozenset[EngineQuirk]:
        return frozenset(EngineQuirk(name) for name in self.named("engine"))


@cache
def seams_for(variation: str | None) -> Seams:
    """The seams of the fake running ``variation`` (None, or a name the table does not know:
    no point bent)."""
    row = VARIATIONS.get(variation or "")
    points = frozenset(_split(point) for point in row.seams) if row is not None else frozenset()
    return Seams(variation if row is not None else None, points,
                 frozenset(name for seam, name in points if seam == "waive"),
                 frozenset(name for seam, name in points if seam == "bend"))


def unknown_points() -> list[str]:
    """Rows naming a seam or point no seam knows, or a rewrite without its effect (empty
    when the table is sound; the tests hold it so)."""
    wrong = []
    for row in VARIATIONS.values():
        for seam, name in map(_split, row.seams):
            known = KNOWN_POINTS.get(seam, frozenset())
            if known is not None and name not in known:
                wrong.append(f"{row.name}: {seam}:{name}")
            if seam == "rewrite" and (row.name not in REWRITES or REWRITES[row.name].point != name):
                wrong.append(f"{row.name}: rewrite:{name} has no effect in REWRITES")
    return wrong
