"""The properties' judging helpers: a missing value fails its own clause, and a malformed
answer is a clause problem, never a crash that would turn every clause of the property red."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.properties.data.test_generate import _judge_events
from conformance.reporting.violations import ClauseViolation, Soft, fail, present


def test_present_passes_a_value_on():
    assert present("STEP-COUNT-1", 0, "no steps") == 0


def test_present_fails_its_clause_on_none():
    with pytest.raises(ClauseViolation) as raised:
        present("STEP-COUNT-1", None, "step refused", "the answer")
    assert list(raised.value.clauses) == ["STEP-COUNT-1"]
    assert raised.value.message == "step refused\n  the answer"


def test_fail_always_raises():
    with pytest.raises(ClauseViolation) as raised:
        fail(["POLL-TERMINAL-1", "STEP-COUNT-1"], "never ended")
    assert list(raised.value.clauses) == ["POLL-TERMINAL-1", "STEP-COUNT-1"]


def test_stream_events_without_an_index_or_counts_are_judged_not_a_crash():
    events: list[dict[str, object]] = [
        {"type": "result", "result": {}},  # no index
        {"type": "result", "index": "1", "result": {}},  # an index that is not a number
        {"type": "done", "completed": "2", "failed": 0},  # a count that is not a number
    ]
    soft = Soft()
    _judge_events(events, 2, soft)
    assert {cid for cid, _ in soft.problems} == {"GENS-EVENTS-1"}
    assert len([m for cid, m in soft.problems if m.startswith("bad stream event")]) == 3


def test_well_formed_stream_events_raise_no_problem():
    events = [
        {"type": "result", "index": 1, "result": {}},
        {"type": "error", "index": 0, "error": "too long"},
        {"type": "done", "completed": 1, "failed": 1},
    ]
    soft = Soft()
    _judge_events(events, 2, soft)
    assert soft.problems == []


def test_a_generate_result_with_only_its_text_is_no_binding_red():
    """Spec §11 leaves generation results' fields open: a result carrying text alone keeps
    GEN-TOKENS-1; only the kit's decided clauses (all three fields, token counts, finish
    reasons) see what it lacks."""
    from conformance.properties.data.test_generate import judge_generate

    soft = Soft()
    judge_generate({"prompts": ["a"]}, {"job_id": "j", "results": [{"text": " x"}]}, soft)
    assert {cid for cid, _ in soft.problems} == {"GEN-TOKENS-2", "GEN-TOKENS-3", "GEN-FINISH-1"}


def test_a_generate_result_with_no_generation_is_red_on_gen_tokens_1():
    from conformance.properties.data.test_generate import judge_generate

    soft = Soft()
    judge_generate({"prompts": ["a"]}, {"job_id": "j", "results": [{"finish_reason": "stop"}]}, soft)
    assert "GEN-TOKENS-1" in {cid for cid, _ in soft.problems}


def test_sub_jobs_listed_in_another_order_than_the_body_are_the_ones_asked_for():
    """Spec §5.2 does not say the sub-jobs keep the create body's order (JOB-SUBJOB-2)."""
    from conformance.properties.control.test_jobs import judge_job_object

    body = {"sub_job_configs": [{"job_type": "training", "model_name": "m"},
                                {"job_type": "sampling", "model_name": "m"}]}
    job: dict[str, Any] = {"job_id": "j", "status": "running", "reason": "", "image_tag": "",
           "created_at": "2026-07-20T18:00:00Z", "updated_at": "2026-07-20T18:00:00Z",
           "sub_jobs": [
               {"sub_job_id": "j:sampling:0", "job_type": "sampling", "status": "running", "model_name": "m",
                "inference_config": {"max_seq_len": 8, "n_gpus": 1}},
               {"sub_job_id": "j:training:0", "job_type": "training", "status": "running", "model_name": "m",
                "training_config": {}}]}
    soft = Soft()
    judge_job_object(job, soft, body)
    assert soft.problems == []
    job["sub_jobs"][0]["model_name"] = "other"
    judge_job_object(job, soft, body)
    assert {cid for cid, _ in soft.problems} == {"JOB-SUBJOB-2"}


def test_a_batch_without_labels_is_not_judged_as_a_spec_batch():
    """Spec §6.1 and §10.1 show input_ids with labels: without labels is FB-SHAPE-2's."""
    import torch

    from conformance.properties.data.test_training import spec_batch

    ids = torch.ones(1, 3, dtype=torch.int64)
    assert spec_batch({"args": [], "kwargs": {"input_ids": ids, "labels": ids}})
    assert not spec_batch({"args": [], "kwargs": {"input_ids": ids}})


def test_a_generate_request_with_params_the_spec_never_shows_is_not_a_spec_request():
    """Spec §6.6 shows max_tokens and temperature: a refusal of logprobs or seed is the
    kit's GEN-PARAMS-1, not GEN-PROMPTS-1."""
    from conformance.properties.data.test_generate import spec_request

    assert spec_request({"prompts": ["a"]})
    assert spec_request({"prompts": ["a", "b"], "sampling_params": [None, {"max_tokens": 4, "temperature": 0.7}]})
    assert not spec_request({"prompts": ["a"], "sampling_params": {"max_tokens": 4, "logprobs": 1}})
    assert not spec_request({"prompts": ["a"], "sampling_params": [{"seed": 3}]})
