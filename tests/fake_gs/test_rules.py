"""The store's Rules (fake_gs/state/rules.py): the plain fake enforces every rule and bends
nothing, and a mutant that waives a rule or bends a behaviour the handlers read changes
exactly the fields that rule or behaviour decides."""

from __future__ import annotations

import dataclasses

from contract.states import JobState
from fake_gs.controls.mutants import MUTANTS
from fake_gs.controls.seams import Bend, Rule
from fake_gs.settings import FakeSettings
from fake_gs.state.rules import WAIVED_BODY_FACTOR, Rules

#: Each rule the handlers and the backend read through Rules -> the fields its waiver changes.
FIELDS_OF = {
    Rule.BODY_LIMIT: {"body_limit", "payload_limit"},
    Rule.CONTENT_TYPE: {"checks_content_type"},
    Rule.ENDED_JOB_REFUSES: {"ended_jobs_serve"},
    Rule.RETRY_AFTER: {"retry_after_sent"},
    Rule.TOKENS: {"tokens_checked"},
    Rule.ADMIN_TOKEN: {"admin_token_required"},
    Rule.REQUEST_ID_HEADER: {"request_id_header_sent"},
    Rule.MAX_EVENTS_CAP: {"max_events_capped"},
    Rule.KEY_REPLAYS: {"key_replays"},
    Rule.BODILESS_ROUTES: {"bodiless_routes_refuse_body"},
    Rule.DEBUG_GATE: {"debug_block_refused"},
    Rule.CALLER_JOB_ID: {"caller_job_id_honoured"},
    Rule.SP_SIZE: {"sp_size_checked"},
    Rule.OFFLOAD_MODE: {"offload_mode_checked"},
    Rule.MULTIPLEX_ID: {"multiplex_id_checked"},
    Rule.DP_SIZE_CHANGE: {"dp_size_change_refused"},
    Rule.INIT_CREDENTIALS: {"init_credentials_refused"},
    Rule.MULTIPLEX_TARGET: {"multiplex_target_checked"},
    Rule.SAMPLER_INIT: {"sampler_init_checked"},
    Rule.ROUTING_CONFLICT: {"routing_conflict_refused"},
    Rule.ROUTING_HINT: {"routing_hint_required"},
    Rule.LORA_PEFT: {"lora_needs_peft"},
    Rule.BOOTSTRAP_DIRECTION: {"bootstrap_direction_checked"},
    Rule.RESET_SAMPLER_ONLY: {"reset_sampler_only"},
    Rule.SAMPLER_GENERATES: {"generate_needs_sampler"},
    Rule.TRAINABLE_MODEL: {"training_needs_trainable_model"},
    Rule.PAYLOAD_REFUSED: {"legacy_payloads_refused"},
    Rule.SEQ_LEN: {"seq_len_checked"},
    Rule.PROPOSED_METRICS: {"proposed_metrics_sent"},
    Rule.JOB_IDS_PER_ACCOUNT: {"job_ids_per_account"},
    Rule.TOKEN_ISOLATION: {"tokens_isolate_accounts"},
    Rule.CAPACITY_PER_ACCOUNT: {"capacity_per_account"},
    Rule.CAPACITY_ADMISSION: {"admission_waits_for_capacity"},
    Rule.STATUS_FILTER: {"listing_filters_status"},
    Rule.STEP_COUNTS: {"steps_counted"},
    Rule.LOAD_RESTORES_STEPS: {"load_restores_steps"},
    Rule.CHECKPOINT_DELETE: {"checkpoint_delete_removes"},
    Rule.LATE_BODY_REFUSED: {"late_body_refused"},
    Rule.CANCEL_REQUEST_TRUTH: {"cancel_request_truthful"},
    Rule.RESULTS_FREED: {"read_results_freed"},
    Rule.GROUP_EXPIRY: {"idle_groups_expire"},
}

#: Each behaviour the handlers and the backend read through Rules -> the field its bend sets.
BENT_FIELD = {
    Bend.REFUSAL_WEDGES_JOB: "refusal_wedges_job",
    Bend.INIT_ANY_JOB: "init_from_any_job",
    Bend.STAGE_LOGS_UNWRITTEN: "stage_logs_unwritten",
    Bend.UNKNOWN_OP_RUNS: "unknown_operations_run",
    Bend.EXPORT_NAME_FROM_ID: "export_name_from_id",
    Bend.KEY_CROSSED_ANSWER: "key_answers_crossed",
    Bend.SERVICE_TOKEN_ADMIN: "service_token_opens_admin",
    Bend.DEEP_FRAME_500: "deep_frame_crashes",
    Bend.LARGE_BATCH_LOSS_FLIPPED: "large_batch_loss_flipped",
    Bend.CANCELLED_CANCEL_409: "cancelled_cancel_refused",
    Bend.CANCELLING_LINGERS: "cancelling_lingers",
    Bend.CROWDED_500: "crowded_calls_fail",
    Bend.CROWDED_STEP_TWICE: "crowded_step_runs_twice",
    Bend.INFLIGHT_RESULT_EMPTY: "inflight_result_empty",
    Bend.CURSOR_SHIFTS: "cursor_shifts",
    Bend.CURSOR_PAGE_CONSUMED: "cursor_page_consumed",
    Bend.STREAM_EVENTS_REPEATED: "stream_events_repeated",
}

#: The field the ``engine:`` points (the engine's numeric bugs) set.
QUIRKS_FIELD = "engine_quirks"
#: The field the ``chunk:`` points (the chunk machine's waivers and transforms) set.
CHUNK_FIELD = "chunk_points"


def test_the_plain_fake_enforces_every_rule() -> None:
    settings = FakeSettings()
    rules = Rules.of(settings)
    assert rules.body_limit == rules.payload_limit == settings.max_body_bytes
    assert not rules.ended_jobs_serve
    flags = {f.name: getattr(rules, f.name) for f in dataclasses.fields(rules) if f.type == "bool"}
    assert flags.pop("ended_jobs_serve") is False
    assert not any(flags.pop(name) for name in BENT_FIELD.values())
    assert all(flags.values()), flags
    assert not rules.engine_quirks and not rules.chunk_points
    assert set().union(*FIELDS_OF.values(), BENT_FIELD.values(), {QUIRKS_FIELD, CHUNK_FIELD}) \
        == {f.name for f in dataclasses.fields(rules)}
    assert not rules.job_serves(JobState.CANCELLED, {JobState.RUNNING}) and rules.job_serves(JobState.RUNNING, {JobState.RUNNING})


def test_a_waiver_changes_exactly_its_rules_fields() -> None:
    plain = Rules.of(FakeSettings())
    for row in MUTANTS.values():
        waived = {point.partition(":")[2] for point in row.seams if point.startswith("waive:")}
        bent = {point.partition(":")[2] for point in row.seams if point.startswith("bend:")}
        settings = FakeSettings(variation=row.name, engine=row.engine) if row.engine else FakeSettings(variation=row.name)
        rules = Rules.of(settings)
        changed = {f.name for f in dataclasses.fields(rules) if getattr(rules, f.name) != getattr(plain, f.name)}
        expected = set().union(set(), *(fields for rule, fields in FIELDS_OF.items() if rule in waived),
                               {field for bend, field in BENT_FIELD.items() if bend in bent},
                               {QUIRKS_FIELD} if any(point.startswith("engine:") for point in row.seams) else set(),
                               {CHUNK_FIELD} if any(point.startswith("chunk:") for point in row.seams) else set())
        assert changed == expected, row.name
        if Rule.BODY_LIMIT in waived:
            assert rules.body_limit == plain.body_limit * WAIVED_BODY_FACTOR and rules.payload_limit is None
        if Rule.ENDED_JOB_REFUSES in waived:
            assert rules.job_serves(JobState.CANCELLED, {JobState.RUNNING})
