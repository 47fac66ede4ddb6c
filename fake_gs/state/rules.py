"""The rules the fake's handlers, border and backend read, in one object: how large a body
may be, whether a content type is checked, whether a job in a given state serves a call, and
the other rules of the border, the routes, the job table, the request queue and the chunk
registry a variation may waive, or the behaviours it may bend.

The running variation (``fake_gs/controls/seams.py``) may waive any of them; the border and
the backend read this object and never the seams, so a rule is read by its name here. The
settings are frozen, so the rules are decided once, when the store is built.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from contract.states import JOB_TERMINAL
from fake_gs.controls.seams import Bend, EngineQuirk, Rule
from fake_gs.settings import FakeSettings

#: How much larger a body may be when the body limit is waived.
WAIVED_BODY_FACTOR = 4


@dataclass(frozen=True)
class Rules:
    """The rules in force for the running fake."""

    #: The largest body a call may send (``--max-body-mib``; spec §9.1).
    body_limit: int
    #: The largest decoded operation payload (operations are not chunked: one body holds
    #: it whole); None when no limit is enforced.
    payload_limit: int | None
    #: Whether a body in the wrong content type is refused (415).
    checks_content_type: bool
    #: Whether an ended job still serves data-plane calls.
    ended_jobs_serve: bool
    # The border's and the routes' own rules, each in force unless waived:
    #: 429 and 503 answers carry Retry-After.
    retry_after_sent: bool
    #: Service calls need a known bearer token (when tokens are set).
    tokens_checked: bool
    #: The admin API needs a token when tokens are set.
    admin_token_required: bool
    #: Every answer carries x-snowflake-request-id.
    request_id_header_sent: bool
    #: A poll's max_events is capped.
    max_events_capped: bool
    #: A repeated Idempotency-Key answers the stored answer.
    key_replays: bool
    #: Cancel and export refuse a body.
    bodiless_routes_refuse_body: bool
    #: A create body's top-level debug block is refused.
    debug_block_refused: bool
    #: A create body's job_id is honoured (when it is a UUID).
    caller_job_id_honoured: bool
    #: sp_size divides n_gpus (JOBV-SP-1).
    sp_size_checked: bool
    #: Activation offload needs mode full (JOBV-OFFLOAD-1).
    offload_mode_checked: bool
    #: multiplex_job_id is a complete sub-job id of another job (JOBV-MULTIPLEX-1).
    multiplex_id_checked: bool
    #: A data-parallel size change needs load_optimizer_states false (at create and on load).
    dp_size_change_refused: bool
    #: A ``source_checkpoint_info`` carrying stage_info is refused.
    init_credentials_refused: bool
    #: ``multiplex_job_id`` names a running sub-job the caller holds.
    multiplex_target_checked: bool
    #: A sampler starts only from an existing checkpoint.
    sampler_init_checked: bool
    #: Conflicting routing hints are refused.
    routing_conflict_refused: bool
    #: Weight-sync, bootstrap and discard need a routing hint.
    routing_hint_required: bool
    #: LoRA weight-sync needs a peft_config.
    lora_needs_peft: bool
    #: Bootstrap-router-replay goes sampler to trainer.
    bootstrap_direction_checked: bool
    #: Reset-prefix-cache runs on a sampling sub-job.
    reset_sampler_only: bool
    #: Generate needs a sampling sub-job.
    generate_needs_sampler: bool
    #: A training sub-job needs a model the service trains (not an inference-only one).
    training_needs_trainable_model: bool
    #: A legacy pickle/torch.save body is refused (else a frame route submits a stand-in).
    legacy_payloads_refused: bool
    #: A forward-backward frame must fit the training sub-job's ``max_seq_len``.
    seq_len_checked: bool
    #: The proposed profile's forward-backward results carry the extra metrics.
    proposed_metrics_sent: bool
    # The backend's own rules (job table, request queue, result retention, chunk registry), each in force unless waived:
    #: A job id is taken only within its account (another account's job of that name is not seen).
    job_ids_per_account: bool
    #: An account sees only its own jobs (by id and in the listing).
    tokens_isolate_accounts: bool
    #: GPU capacity counts the caller's account only (admission and the capacity answer).
    capacity_per_account: bool
    #: A job beyond its account's free GPUs waits in pending.
    admission_waits_for_capacity: bool
    #: The job listing's ``?status=`` filters.
    listing_filters_status: bool
    #: A step adds one to the job's global_steps (STEP-COUNT-1).
    steps_counted: bool
    #: A load puts the job back at the checkpoint's global_steps (SAVE-LOAD-1).
    load_restores_steps: bool
    #: A deleted checkpoint is gone (it leaves the listing).
    checkpoint_delete_removes: bool
    #: A call whose job ended while its body arrived is refused.
    late_body_refused: bool
    #: cancel-request says whether it stopped the request (a started one is not cancelled).
    cancel_request_truthful: bool
    #: A result read to its end is freed after its grace.
    read_results_freed: bool
    #: Chunk groups idle past ``chunk_group_idle_s`` expire.
    idle_groups_expire: bool

    #: Bent on purpose (false for the plain fake): a job refusing a malformed frame stops serving.
    refusal_wedges_job: bool
    #: Bent on purpose (false for the plain fake): an initialisation finds its checkpoint in any of the caller's jobs.
    init_from_any_job: bool
    #: Bent on purpose (false for the plain fake): no execution log reaches the stage.
    stage_logs_unwritten: bool
    #: Bent on purpose (false for the plain fake): unknown operation types answer an empty result.
    unknown_operations_run: bool
    #: Bent on purpose (false for the plain fake): export file names are built from the checkpoint id.
    export_name_from_id: bool
    #: Bent on purpose (false for the plain fake): a repeated key answers the account's latest answer.
    key_answers_crossed: bool
    #: Bent on purpose (false for the plain fake): any service token opens the admin API.
    service_token_opens_admin: bool
    #: Bent on purpose (false for the plain fake): a frame past the depth limit crashes the decoder.
    deep_frame_crashes: bool
    #: Bent on purpose (false for the plain fake): a large batch answers the negated loss.
    large_batch_loss_flipped: bool
    #: Bent on purpose (false for the plain fake): cancelling a cancelled job answers 409.
    cancelled_cancel_refused: bool
    #: Bent on purpose (false for the plain fake): a cancelled job lingers in cancelling, and cancel answers 409 then.
    cancelling_lingers: bool
    #: Bent on purpose (false for the plain fake): one in three steps and saves answers 500 while other requests are in flight.
    crowded_calls_fail: bool
    #: Bent on purpose (false for the plain fake): a step executes twice while other requests are in flight.
    crowded_step_runs_twice: bool
    #: Bent on purpose (false for the plain fake): a page of a request in flight carries result {}, and a done one's first poll shows it in flight.
    inflight_result_empty: bool
    #: Bent on purpose (false for the plain fake): re-reading a cursor shifts its page.
    cursor_shifts: bool
    #: Bent on purpose (false for the plain fake): a page once read is gone.
    cursor_page_consumed: bool
    #: Bent on purpose (false for the plain fake): stream events come back on a later poll.
    stream_events_repeated: bool
    #: The numeric bugs the engine is built with (none for the plain fake).
    engine_quirks: frozenset[EngineQuirk]
    #: The rules of the chunk-group machine waived and its decisions transformed, by the
    #: names ``fake_gs/chunking/hooks.py`` knows (none for the plain fake).
    chunk_points: frozenset[str]

    @classmethod
    def of(cls, settings: FakeSettings) -> Rules:
        waived, bent = settings.seams.waived, settings.seams.bent
        limit = settings.max_body_bytes
        enforced = Rule.BODY_LIMIT not in waived
        return cls(body_limit=limit if enforced else limit * WAIVED_BODY_FACTOR,
                   payload_limit=limit if enforced else None,
                   checks_content_type=Rule.CONTENT_TYPE not in waived,
                   ended_jobs_serve=Rule.ENDED_JOB_REFUSES in waived,
                   retry_after_sent=Rule.RETRY_AFTER not in waived,
                   tokens_checked=Rule.TOKENS not in waived,
                   admin_token_required=Rule.ADMIN_TOKEN not in waived,
                   request_id_header_sent=Rule.REQUEST_ID_HEADER not in waived,
                   max_events_capped=Rule.MAX_EVENTS_CAP not in waived,
                   key_replays=Rule.KEY_REPLAYS not in waived,
                   bodiless_routes_refuse_body=Rule.BODILESS_ROUTES not in waived,
                   debug_block_refused=Rule.DEBUG_GATE not in waived,
                   caller_job_id_honoured=Rule.CALLER_JOB_ID not in waived,
                   sp_size_checked=Rule.SP_SIZE not in waived,
                   offload_mode_checked=Rule.OFFLOAD_MODE not in waived,
                   multiplex_id_checked=Rule.MULTIPLEX_ID not in waived,
                   dp_size_change_refused=Rule.DP_SIZE_CHANGE not in waived,
                   init_credentials_refused=Rule.INIT_CREDENTIALS not in waived,
                   multiplex_target_checked=Rule.MULTIPLEX_TARGET not in waived,
                   sampler_init_checked=Rule.SAMPLER_INIT not in waived,
                   routing_conflict_refused=Rule.ROUTING_CONFLICT not in waived,
                   routing_hint_required=Rule.ROUTING_HINT not in waived,
                   lora_needs_peft=Rule.LORA_PEFT not in waived,
                   bootstrap_direction_checked=Rule.BOOTSTRAP_DIRECTION not in waived,
                   reset_sampler_only=Rule.RESET_SAMPLER_ONLY not in waived,
                   generate_needs_sampler=Rule.SAMPLER_GENERATES not in waived,
                   training_needs_trainable_model=Rule.TRAINABLE_MODEL not in waived,
                   legacy_payloads_refused=Rule.PAYLOAD_REFUSED not in waived,
                   seq_len_checked=Rule.SEQ_LEN not in waived,
                   proposed_metrics_sent=Rule.PROPOSED_METRICS not in waived,
                   job_ids_per_account=Rule.JOB_IDS_PER_ACCOUNT not in waived,
                   tokens_isolate_accounts=Rule.TOKEN_ISOLATION not in waived,
                   capacity_per_account=Rule.CAPACITY_PER_ACCOUNT not in waived,
                   admission_waits_for_capacity=Rule.CAPACITY_ADMISSION not in waived,
                   listing_filters_status=Rule.STATUS_FILTER not in waived,
                   steps_counted=Rule.STEP_COUNTS not in waived,
                   load_restores_steps=Rule.LOAD_RESTORES_STEPS not in waived,
                   checkpoint_delete_removes=Rule.CHECKPOINT_DELETE not in waived,
                   late_body_refused=Rule.LATE_BODY_REFUSED not in waived,
                   cancel_request_truthful=Rule.CANCEL_REQUEST_TRUTH not in waived,
                   read_results_freed=Rule.RESULTS_FREED not in waived,
                   idle_groups_expire=Rule.GROUP_EXPIRY not in waived,
                   refusal_wedges_job=Bend.REFUSAL_WEDGES_JOB in bent,
                   init_from_any_job=Bend.INIT_ANY_JOB in bent,
                   stage_logs_unwritten=Bend.STAGE_LOGS_UNWRITTEN in bent,
                   unknown_operations_run=Bend.UNKNOWN_OP_RUNS in bent,
                   export_name_from_id=Bend.EXPORT_NAME_FROM_ID in bent,
                   key_answers_crossed=Bend.KEY_CROSSED_ANSWER in bent,
                   service_token_opens_admin=Bend.SERVICE_TOKEN_ADMIN in bent,
                   deep_frame_crashes=Bend.DEEP_FRAME_500 in bent,
                   large_batch_loss_flipped=Bend.LARGE_BATCH_LOSS_FLIPPED in bent,
                   cancelled_cancel_refused=Bend.CANCELLED_CANCEL_409 in bent,
                   cancelling_lingers=Bend.CANCELLING_LINGERS in bent,
                   crowded_calls_fail=Bend.CROWDED_500 in bent,
                   crowded_step_runs_twice=Bend.CROWDED_STEP_TWICE in bent,
                   inflight_result_empty=Bend.INFLIGHT_RESULT_EMPTY in bent,
                   cursor_shifts=Bend.CURSOR_SHIFTS in bent,
                   cursor_page_consumed=Bend.CURSOR_PAGE_CONSUMED in bent,
                   stream_events_repeated=Bend.STREAM_EVENTS_REPEATED in bent,
                   engine_quirks=settings.seams.engine_quirks(),
                   chunk_points=settings.seams.named("chunk"))

    def job_serves(self, status: str, wanted: Container[str]) -> bool:
        """Whether a job in ``status`` serves a call that needs one of ``wanted``."""
        return status in wanted or (status in JOB_TERMINAL and self.ended_jobs_serve)
