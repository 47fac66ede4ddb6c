"""JOBV: create bodies that break a rule are refused (the kit: 400 naming the field); open
keys and unknown fields are accepted; the debug gate."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.drivers.raw import RawDriver
from conformance.inputs import valid_bodies
from conformance.inputs.strategies import with_value, without
from conformance.jobs import JobBudget, JobLedger, SharedJob
from conformance.judging.checks import create_refused, names_field, refused
from conformance.reporting.violations import Soft, expect
from conformance.runtime import prop
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.models.catalog import TRAINING_MODELS

MODEL = TRAINING_MODELS[0]
BASE = valid_bodies.job(valid_bodies.training(MODEL), valid_bodies.sampling(MODEL))
TRAIN = ("sub_job_configs", 0)
SAMPLE = ("sub_job_configs", 1)


def _refuses(gs_raw: RawDriver, body: dict[str, Any], cid: str, field: str | None = None) -> None:
    """A refusal of ``body``: a 4xx at create (the kit's 400), or a job that ends failed
    (spec §5.1 and §8.1 state what a body must hold, not how a server refuses one that does
    not); naming ``field`` is the clause's own promise when it is decided, else the kit's
    (ERR-ENVELOPE-2: the spec leaves the refusal's text open)."""
    create_refused(gs_raw, body, cid, field, statuses=[400])


@checks("JOBV-EMPTY-1")
@pytest.mark.parametrize(
    "body", [{"sub_job_configs": []}, {}, {"experiment_name": "x"}, {"sub_job_configs": None}]
)
def test_no_sub_jobs(gs_raw: RawDriver, body: dict[str, Any]) -> None:
    _refuses(gs_raw, body, "JOBV-EMPTY-1")


@checks("JOBV-TYPE-1", "ERR-ENVELOPE-2")
@prop(scale=0.3)
@given(
    job_type=st.one_of(st.text(max_size=12), st.integers(), st.none()).filter(
        lambda v: v not in ("training", "sampling", "log_probability")
    )
)
def test_unknown_job_type(gs_raw: RawDriver, job_type: str | int | None) -> None:
    _refuses(gs_raw, with_value(BASE, TRAIN + ("job_type",), job_type), "JOBV-TYPE-1", "job_type")


@checks("JOBV-MODEL-1", "ERR-ENVELOPE-2")
@pytest.mark.parametrize("how", ["empty", "missing", "null"])
def test_model_name_required(gs_raw: RawDriver, how: str) -> None:
    path = SAMPLE + ("model_name",)
    body = (
        without(BASE, path)
        if how == "missing"
        else with_value(BASE, path, "" if how == "empty" else None)
    )
    _refuses(gs_raw, body, "JOBV-MODEL-1", "model_name")


@checks("JOBV-CONFIG-1")
@pytest.mark.parametrize(
    "case",
    [
        "training-without",
        "training-with-inference",
        "sampling-without",
        "sampling-with-training",
        "both",
    ],
)
def test_exactly_one_config(gs_raw: RawDriver, case: str) -> None:
    train_cfg = BASE["sub_job_configs"][0]["training_config"]
    infer_cfg = BASE["sub_job_configs"][1]["inference_config"]
    if case == "training-without":
        body = without(BASE, TRAIN + ("training_config",))
    elif case == "training-with-inference":
        body = with_value(
            without(BASE, TRAIN + ("training_config",)), TRAIN + ("inference_config",), infer_cfg
        )
    elif case == "sampling-without":
        body = without(BASE, SAMPLE + ("inference_config",))
    elif case == "sampling-with-training":
        body = with_value(
            without(BASE, SAMPLE + ("inference_config",)), SAMPLE + ("training_config",), train_cfg
        )
    else:
        body = with_value(BASE, TRAIN + ("inference_config",), infer_cfg)
    _refuses(gs_raw, body, "JOBV-CONFIG-1")


bad_numbers: st.SearchStrategy[int | str | None | list[object]] = st.one_of(
    st.integers(-3, 0), st.just("eight"), st.none(), st.just([])
)


@checks("JOBV-TRAIN-1")
@prop(scale=0.5)
@given(
    field=st.sampled_from(["optimizer", "max_seq_len", "train_batch_size", "n_gpus"]),
    missing=st.booleans(),
    value=bad_numbers,
)
def test_training_config_rules(
    gs_raw: RawDriver, field: str, missing: bool, value: int | str | None | list[object]
) -> None:
    path = TRAIN + ("training_config", field)
    if missing:
        body = without(BASE, path)
    elif field == "optimizer":
        body = with_value(BASE, path, {} if value is None else value)
    else:
        body = with_value(BASE, path, value)
    _refuses(gs_raw, body, "JOBV-TRAIN-1", field)


@checks("JOBV-INFER-1")
@prop(scale=0.4)
@given(field=st.sampled_from(["max_seq_len", "n_gpus"]), missing=st.booleans(), value=bad_numbers)
def test_inference_config_rules(
    gs_raw: RawDriver, field: str, missing: bool, value: int | str | None | list[object]
) -> None:
    path = SAMPLE + ("inference_config", field)
    body = without(BASE, path) if missing else with_value(BASE, path, value)
    _refuses(gs_raw, body, "JOBV-INFER-1", field)


PASSTHRU_TRAIN = {
    "ds_config": {"zero_optimization": {"stage": 1}},
    "peft_config": None,
    "sp_size": 1,
    "step_peak_memory_log": True,
}
PASSTHRU_INFER = {
    "vllm_config": {"enforce_eager": True},
    "gpu_memory_utilization": 0.8,
    "peft_config": None,
}


def _judge_accepted(
    gs_target: Target,
    gs_raw: RawDriver,
    gs_job: SharedJob,
    body: dict[str, Any],
    cid: str,
    what: str,
) -> None:
    if gs_target.embedded:
        ans = gs_raw.create_job(body)
        if ans.ok and isinstance(ans.field("job_id"), str):
            gs_raw.cancel(ans.field("job_id"))
    else:
        if gs_job.create_answer is None:
            pytest.skip("reused --gs-job-id: no creation to judge (creating costs a job)")
        ans = gs_job.create_answer
    expect(cid, ans.ok, f"{what} refused: {ans}")


@checks("JOBV-PASSTHRU-1")
@prop(scale=0.3)
@given(
    train=st.dictionaries(st.sampled_from(sorted(PASSTHRU_TRAIN)), st.just(1), max_size=4),
    infer=st.dictionaries(st.sampled_from(sorted(PASSTHRU_INFER)), st.just(1), max_size=3),
)
def test_pass_through_keys_accepted(
    gs_target: Target,
    gs_raw: RawDriver,
    gs_job: SharedJob,
    train: dict[str, int],
    infer: dict[str, int],
) -> None:
    """ds_config, vllm_config, peft_config, ... pass through (the session job carries one)."""
    body = json.loads(json.dumps(BASE))
    body["sub_job_configs"][0]["training_config"].update({k: PASSTHRU_TRAIN[k] for k in train})
    body["sub_job_configs"][1]["inference_config"].update({k: PASSTHRU_INFER[k] for k in infer})
    _judge_accepted(gs_target, gs_raw, gs_job, body, "JOBV-PASSTHRU-1", "pass-through keys")


unknown_names = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyz_"), min_size=3, max_size=12
).map(lambda s: "x_" + s)


@checks("JOBV-UNKNOWN-1")
@prop(scale=0.3)
@given(
    top=unknown_names,
    sub=unknown_names,
    value=st.one_of(
        st.integers(), st.text(max_size=5), st.none(), st.lists(st.integers(), max_size=2)
    ),
)
def test_unknown_fields_ignored(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, top: str, sub: str, value: object
) -> None:
    """Unknown fields at the top and in a sub-job are ignored (decided)."""
    body = json.loads(json.dumps(BASE))
    body[top] = value
    body["sub_job_configs"][1][sub] = value
    _judge_accepted(gs_target, gs_raw, gs_job, body, "JOBV-UNKNOWN-1", "unknown fields")


def _broken_json() -> st.SearchStrategy[bytes]:
    good = json.dumps(BASE)
    return st.one_of(
        st.integers(1, len(good) - 1).map(lambda n: good[:n].encode()),
        st.sampled_from([b"{", b"{'a': 1}", b"[1,]", b"nope", b'{"a":}', b"\xff\xfe{}", b"{]"]),
    )


BAD_TYPES = [
    ("global_batch_size", "8"), ("global_batch_size", 1.5), ("seed", "seven"), ("seed", [1]),
    ("dtype", 16), ("model_post_init", "hook"), ("model_post_init", [1, 2]),
    ("source_checkpoint_info", "global_step12"),
]


@checks("JOBV-FIELDS-1", "ERR-ENVELOPE-2")
@pytest.mark.parametrize("name,value", BAD_TYPES)
def test_optional_field_types(gs_raw: RawDriver, name: str, value: object) -> None:
    """SubJobConfig's optional fields of another type than spec §8.1 gives are refused."""
    _refuses(gs_raw, with_value(BASE, SAMPLE + (name,), value), "JOBV-FIELDS-1", name)


@checks("JOB-DEBUG-1", "JOB-DEBUG-2")
def test_debug_block_is_gated(
    gs_target: Target, gs_raw: RawDriver, gs_budget: JobBudget, gs_ledger: JobLedger
) -> None:
    """A top-level debug block: never a 5xx; refused or taken as the server's debug gate
    decides (spec §5.1); the fake's gate is closed, so it refuses it naming debug."""
    if not gs_target.embedded:
        gs_budget.take(1, "a create with a debug block may create a job")
    ans = gs_raw.create_job({**BASE, "debug": {"trace": True}})
    soft = Soft()
    soft.expect("JOB-DEBUG-1", ans.status < 500, f"a debug block answered {ans}")
    if ans.ok and isinstance(ans.field("job_id"), str):
        gs_ledger.add(gs_raw, ans.field("job_id"))
        soft.expect("JOB-DEBUG-2", False, f"the debug gate let the block through: {ans}")
    else:
        refused(ans, soft, "JOB-DEBUG-1", statuses=[400])
        soft.expect("JOB-DEBUG-2", names_field(ans, "debug"), f"the refusal does not name debug: {ans.body!r}")
    soft.check()


@checks("JOBV-JSON-1")
@prop(scale=0.5)
@given(data=_broken_json(), name=st.sampled_from(["create_job", "step", "save", "operation"]))
def test_malformed_json(gs_raw: RawDriver, gs_job: SharedJob, data: bytes, name: str) -> None:
    """A body that is not JSON answers 400 malformed_json."""
    # create_job's path names no job: its template leaves the job id out.
    ans = gs_raw.call(name, data=data, content_type="application/json", job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "JOBV-JSON-1", codes=[ErrorCode.MALFORMED_JSON], statuses=[400])
    soft.check()
