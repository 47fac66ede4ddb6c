"""JOB: creating, reading, listing and the life of a job; data-plane calls need it running."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.drivers.raw import Answer, RawDriver, encode
from conformance.fixtures import NewJob, Variant
from conformance.inputs import valid_bodies
from conformance.inputs.strategies import valid_job_bodies
from conformance.jobs import JobLedger, SharedJob
from conformance.judging.checks import RFC3339_RE, UUID_RE, create_refused, kit_form, refused
from conformance.options import GsOptions
from conformance.reporting.violations import Soft, expect
from conformance.runtime import RUNTIME, prop
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.forms import why_not_judged
from contract.ids import sub_job_ids
from contract.models.catalog import INFERENCE_ONLY_MODELS, TRAINING_MODELS
from contract.states import JOB_STARTUP_ORDER, JobState, normalize_job_state
from fake_gs.testing.admin_api import AdminApi

JOB_FIELDS = ("job_id", "status", "reason", "created_at", "updated_at", "image_tag", "sub_jobs")
SUB_FIELDS = ("sub_job_id", "job_type", "status", "model_name")
#: What spec §5.3 shows of a listed job; the kit lists full job objects (JOB-LIST-3).
LIST_FIELDS = ("job_id", "status", "sub_jobs")


def judge_job_object(job: dict, soft: Soft, body: dict | None = None) -> None:
    """JOB-OBJECT-1/2 and JOB-SUBJOB-1/2/3 on one job object (and the body that made it)."""
    for name in JOB_FIELDS:
        soft.expect("JOB-OBJECT-1", name in job, f"job object lacks {name}: {sorted(job)}")
    for name in ("created_at", "updated_at"):
        value = job.get(name)
        soft.expect(
            "JOB-OBJECT-2",
            isinstance(value, str) and RFC3339_RE.match(value),
            f"{name} {value!r} is not RFC 3339",
        )
    subs = job.get("sub_jobs") or []
    wanted_ids = iter(sub_job_ids(str(job.get("job_id")), [str(s.get("job_type")) for s in subs if isinstance(s, dict)]))
    for i, sub in enumerate(subs):
        if not isinstance(sub, dict):
            soft.expect("JOB-SUBJOB-2", False, f"sub_jobs[{i}] is not an object")
            continue
        for name in SUB_FIELDS:
            soft.expect("JOB-SUBJOB-2", name in sub, f"sub_jobs[{i}] lacks {name}")
        kind = str(sub.get("job_type"))
        if kind == "training":
            soft.expect("JOB-SUBJOB-2", isinstance(sub.get("training_config"), dict),
                        f"sub_jobs[{i}] (training) lacks its training_config")
        elif kind == "sampling":
            cfg = sub.get("inference_config")
            soft.expect("JOB-SUBJOB-3", isinstance(cfg, dict) and isinstance(cfg.get("max_seq_len"), int),
                        f"sub_jobs[{i}] (sampling) shows no inference_config.max_seq_len: {cfg!r}")
        want = next(wanted_ids)
        soft.expect(
            "JOB-SUBJOB-1",
            sub.get("sub_job_id") == want,
            f"sub_jobs[{i}].sub_job_id {sub.get('sub_job_id')!r}, want {want!r}",
        )
    if body is not None:
        soft.expect(
            "JOB-SUBJOB-2",
            len(subs) == len(body["sub_job_configs"]),
            f"{len(subs)} sub-jobs for {len(body['sub_job_configs'])} configs",
        )
        # The ones asked for, in any order: spec §5.2 does not say the list keeps the body's.
        shown = sorted((str(sub.get("job_type")), str(sub.get("model_name"))) for sub in subs if isinstance(sub, dict))
        asked = sorted((str(cfg["job_type"]), str(cfg["model_name"])) for cfg in body["sub_job_configs"])
        soft.expect("JOB-SUBJOB-2", shown == asked, f"sub-jobs {shown} for the configs {asked}")


@checks("JOB-CREATE-1", "JOB-CREATE-2", "JOB-OBJECT-1", "JOB-OBJECT-2", "JOB-SUBJOB-1",
        "JOB-SUBJOB-2", "JOB-SUBJOB-3")
@prop(scale=0.6)
@given(data=st.data())
def test_created_jobs_are_well_formed(
    gs_target: Target,
    gs_raw: RawDriver,
    gs_job: SharedJob,
    gs_ledger: JobLedger,
    data: st.DataObject,
) -> None:
    """A valid body answers a job id (the kit's: a UUID, with 200); the job object and its
    sub-jobs are complete."""
    soft = Soft()
    if gs_target.embedded:
        body: dict[str, Any] | None = data.draw(valid_job_bodies(TRAINING_MODELS), label="body")
        ans = gs_raw.create_job(body)
        job_id = ans.field("job_id")
        if isinstance(job_id, str):
            gs_ledger.add(gs_raw, job_id)
    else:
        if gs_job.create_answer is None:
            pytest.skip("reused --gs-job-id: no creation to judge (and creating costs a job)")
        body, ans, job_id = gs_job.create_body, gs_job.create_answer, gs_job.job_id
    soft.expect("JOB-CREATE-1", ans.ok, f"valid body refused: {ans}")
    soft.expect("JOB-CREATE-1", isinstance(job_id, str) and job_id, f"job_id {job_id!r} is not a non-empty string")
    if kit_form("JOB-CREATE-2"):
        soft.expect("JOB-CREATE-2", ans.ok and isinstance(job_id, str) and UUID_RE.match(job_id),
                    f"the kit answers 200 with a UUID job_id, got {ans.status} {job_id!r}")
    soft.check()
    got = gs_raw.get_job(job_id)
    expect("JOB-OBJECT-1", got.ok, f"GET of the created job: {got}")
    judge_job_object(got.body, soft, body)
    if gs_target.embedded:
        gs_raw.cancel(job_id)
    soft.check()


@checks("JOB-OBJECT-1", "JOB-OBJECT-2", "JOB-SUBJOB-1", "JOB-SUBJOB-2", "JOB-SUBJOB-3")
def test_shared_job_object(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """The session job's object is complete."""
    ans = gs_raw.get_job(gs_job.job_id)
    expect("JOB-OBJECT-1", ans.ok, f"GET job: {ans}")
    soft = Soft()
    judge_job_object(ans.body, soft, gs_job.create_body)
    soft.check()


def _monotone(statuses: list[str]) -> str | None:
    order = [s.value for s in JOB_STARTUP_ORDER]
    last = -1
    for raw in statuses:
        state = normalize_job_state(raw)
        if state not in order:
            return f"unexpected start-up state {raw!r} in {statuses}"
        idx = order.index(state)
        if idx < last:
            return f"went backwards: {statuses}"
        last = idx
    if not statuses or normalize_job_state(statuses[-1]) != JobState.RUNNING:
        return f"never reached running: {statuses}"
    return None


@checks("JOB-STATE-1")
@pytest.mark.gs_fake_optional
def test_startup_moves_forward(gs_target: Target, gs_job: SharedJob, gs_variant: Variant) -> None:
    """pending -> placing -> initializing -> running, never backwards."""
    if gs_target.embedded:
        slow = gs_variant("slow-start", startup="polls:8")
        driver = RawDriver(slow)
        ans = driver.create_job(valid_bodies.small_job(TRAINING_MODELS[0]))
        expect("JOB-STATE-1", ans.ok, f"create on the slow-start fake: {ans}")
        final, seen = driver.wait_job(ans.field("job_id"), timeout_s=30)
        driver.cancel(ans.field("job_id"))
        expect("JOB-STATE-1", len(seen) >= 3, f"start-up showed too few states: {seen}")
        # The slow-start fake spends two polls in each start-up state, so a warming-up job
        # is seen as such: initializing is a state of its own, not collapsed (spec §3.2).
        expect("JOB-STATE-1", any(normalize_job_state(s) == JobState.INITIALIZING for s in seen),
               f"start-up never showed initializing (spec §3.2: not collapsed into placing): {seen}")
    else:
        if not gs_job.created:
            pytest.skip("reused --gs-job-id: its start-up was not observed")
        seen = gs_job.startup_statuses
    problem = _monotone(seen)
    expect("JOB-STATE-1", problem is None, problem or "")


def _dialect(raw: str) -> str:
    return "enum" if raw.upper().startswith(("JOB_STATE_", "REQUEST_STATE_")) else "short"


def _statuses(driver: RawDriver, job_id: str) -> list[str]:
    found: list[str] = []
    listed = driver.call("list_jobs")
    for job in listed.field("jobs", []) or []:
        if isinstance(job, dict):
            found.append(str(job.get("status")))
            found += [
                str(s.get("status")) for s in job.get("sub_jobs") or [] if isinstance(s, dict)
            ]
    ans = driver.call("step", json_body={}, job_id=job_id)
    rid = ans.field("request_id")
    if isinstance(rid, str):
        found += driver.settle(job_id, rid).statuses
    return found


@checks("JOB-STATE-2")
@pytest.mark.parametrize("style", ["main", "enum"])
@pytest.mark.gs_fake_optional
def test_one_status_dialect(
    gs_target: Target,
    gs_raw: RawDriver,
    gs_job: SharedJob,
    gs_variant: Variant,
    gs_opts: GsOptions,
    style: str,
) -> None:
    """Job, sub-job and request statuses use one spelling: short or enum, never mixed."""
    if not kit_form("JOB-STATE-2"):
        pytest.skip(why_not_judged("JOB-STATE-2", RUNTIME.forms))
    if style == "main":
        driver, job_id = gs_raw, gs_job.job_id
        wanted = gs_opts.status_style if gs_target.embedded else None
    else:
        target = gs_variant("enum-dialect", status_style="enum")
        driver = RawDriver(target)
        ans = driver.create_job(valid_bodies.small_job(TRAINING_MODELS[0]))
        job_id = ans.field("job_id")
        driver.wait_job(job_id, timeout_s=30)
        wanted = "enum"
    seen = _statuses(driver, job_id)
    dialects = {_dialect(s) for s in seen}
    soft = Soft()
    soft.expect("JOB-STATE-2", len(dialects) <= 1, f"mixed status dialects: {sorted(set(seen))}")
    if wanted:
        soft.expect(
            "JOB-STATE-2",
            dialects <= {wanted},
            f"configured {wanted} dialect but saw {sorted(set(seen))}",
        )
    soft.check()


@checks("JOB-STATE-3")
def test_failed_job_has_reason(
    gs_target: Target, gs_raw: RawDriver, gs_new_job: NewJob, gs_admin: AdminApi
) -> None:
    """A failed job carries a non-empty reason (the fake fails one on demand)."""
    job_id, _ = gs_new_job()
    gs_admin.force(job_id, JobState.FAILED, "")
    ans = gs_raw.get_job(job_id)
    expect(
        "JOB-STATE-3",
        normalize_job_state(ans.field("status")) == JobState.FAILED,
        f"job not failed after forcing: {ans}",
    )
    expect(
        "JOB-STATE-3",
        isinstance(ans.field("reason"), str) and ans.field("reason"),
        f"failed job has reason {ans.field('reason')!r}",
    )


@checks("JOB-LIST-1", "JOB-LIST-3")
def test_list_holds_full_jobs(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """GET / answers {jobs: [...]} with the caller's job among them; each entry carries
    job_id, status and sub_jobs (spec §5.3), the kit's the full job object."""
    ans = gs_raw.call("list_jobs")
    expect(
        "JOB-LIST-1",
        ans.ok and isinstance(ans.field("jobs"), list),
        f"list answer: {ans}",
    )
    jobs = ans.field("jobs")
    soft = Soft()
    soft.expect(
        "JOB-LIST-1",
        gs_job.job_id in [j.get("job_id") for j in jobs if isinstance(j, dict)],
        "the session job is not listed",
    )
    full = kit_form("JOB-LIST-3")
    for job in jobs:
        for name in LIST_FIELDS:
            soft.expect("JOB-LIST-1", isinstance(job, dict) and name in job, f"listed job lacks {name}")
        for name in JOB_FIELDS if full else ():
            soft.expect("JOB-LIST-3", isinstance(job, dict) and name in job, f"listed job lacks {name}")
    soft.check()


@checks("JOB-LIST-2")
def test_status_filter(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, gs_new_job: NewJob
) -> None:
    """GET /?status=S lists only jobs whose normalised status is S."""
    if gs_target.embedded:
        job_id, _ = gs_new_job()
        gs_raw.cancel(job_id)
    soft = Soft()
    for wanted in (JobState.RUNNING, JobState.CANCELLED):
        ans = gs_raw.call("list_jobs", query={"status": wanted})
        soft.expect("JOB-LIST-2", ans.ok, f"filtered list: {ans}")
        jobs = [j for j in ans.field("jobs", []) or [] if isinstance(j, dict)]
        for job in jobs:
            soft.expect(
                "JOB-LIST-2",
                normalize_job_state(job.get("status")) == wanted,
                f"?status={wanted} listed a {job.get('status')} job",
            )
        ids = [j.get("job_id") for j in jobs]
        if wanted == JobState.RUNNING:
            soft.expect("JOB-LIST-2", gs_job.job_id in ids, "?status=running omits the session job")
    soft.check()


@checks("JOB-GET-1")
@prop(scale=0.4)
@given(
    job_id=st.one_of(
        st.uuids().map(str), st.text(st.sampled_from("abcdef0123456789-"), min_size=1, max_size=40)
    )
)
def test_unknown_job_is_404(gs_raw: RawDriver, job_id: str) -> None:
    """GET of a job id nobody created answers 404 job_not_found."""
    ans = gs_raw.get_job(job_id)
    soft = Soft()
    refused(ans, soft, "JOB-GET-1", codes=[ErrorCode.JOB_NOT_FOUND], statuses=[404])
    soft.check()


@checks("JOB-EXPRUN-1")
def test_experiment_run(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """GET /{job_id}/experiment-run answers both names as strings."""
    ans = gs_raw.call("get_experiment_run", job_id=gs_job.job_id)
    expect("JOB-EXPRUN-1", ans.ok, f"experiment-run: {ans}")
    for name in ("experiment_name", "experiment_run_name"):
        expect("JOB-EXPRUN-1", isinstance(ans.field(name), str), f"{name} missing: {ans.body!r}")


def _data_plane_calls(driver: RawDriver, job_id: str) -> list[Answer]:
    from conformance.drivers.raw import request_chunks

    chunk = request_chunks({"args": [], "kwargs": {"input_ids": [[1, 2]]}}, "forward_backward")[0]
    return [
        driver.call("step", json_body={}, job_id=job_id),
        driver.call("save", json_body={}, job_id=job_id),
        driver.call("forward_backward", data=chunk, job_id=job_id),
        driver.call("generate", data=encode({"prompts": ["x"]}), job_id=job_id),
    ]


@checks("JOB-RUNNING-1")
@pytest.mark.gs_fake_optional
def test_not_running_job_refuses_data_plane(
    gs_target: Target, gs_job: SharedJob, gs_variant: Variant
) -> None:
    """Before running, data-plane calls answer 409 job_not_running."""
    soft = Soft()
    if gs_target.embedded:
        slow = gs_variant("never-ready", startup="polls:100000")
        driver = RawDriver(slow)
        ans = driver.create_job(valid_bodies.small_job(TRAINING_MODELS[0]))
        job_id = ans.field("job_id")
        for call in _data_plane_calls(driver, job_id):
            refused(call, soft, "JOB-RUNNING-1", codes=[ErrorCode.JOB_NOT_RUNNING], statuses=[409])
        driver.cancel(job_id)
    else:
        if not gs_job.not_running_probes:
            pytest.skip("the session job was running when first seen: no probe before running")
        for _state, call in gs_job.not_running_probes:
            refused(call, soft, "JOB-RUNNING-1", codes=[ErrorCode.JOB_NOT_RUNNING], statuses=[409])
    soft.check()


@checks("JOB-RUNNING-2")
def test_ended_jobs_refuse_data_plane(
    gs_target: Target, gs_raw: RawDriver, gs_new_job: NewJob, gs_admin_optional: AdminApi | None
) -> None:
    """Cancelled, terminated and failed jobs refuse data-plane calls."""
    soft = Soft()
    ends = [JobState.CANCELLED, JobState.TERMINATED, JobState.FAILED] if gs_target.embedded else [JobState.CANCELLED]
    for end in ends:
        job_id, _ = gs_new_job(why="JOB-RUNNING-2")
        if end == JobState.CANCELLED:
            gs_raw.cancel(job_id)
            gs_raw.wait_job(job_id, until=(JobState.CANCELLED,), timeout_s=600)
        else:
            assert gs_admin_optional is not None, "the embedded fake has its admin API"
            gs_admin_optional.force(job_id, end, f"forced {end} by the conformance suite")
        for call in _data_plane_calls(gs_raw, job_id):
            soft.expect(
                "JOB-RUNNING-2",
                400 <= call.status < 500,
                f"{end} job accepted {call.method} {call.url}: {call.status}",
            )
    soft.check()


@pytest.fixture
def gs_admin_optional(gs_target: Target) -> AdminApi | None:
    from conformance.fake_admin import admin_of

    return admin_of(gs_target) if gs_target.embedded else None


@checks("JOB-MODEL-1")
@prop(scale=0.2)
@given(model=st.sampled_from(INFERENCE_ONLY_MODELS))
def test_inference_only_model_cannot_train(gs_raw: RawDriver, model: str) -> None:
    """An inference-only model in a training sub-job is refused: a 4xx at create (the kit:
    400 model_not_trainable, no job), or a job that ends failed (spec §1.4 names no form)."""
    create_refused(gs_raw, valid_bodies.small_job(model), "JOB-MODEL-1",
                   codes=[ErrorCode.MODEL_NOT_TRAINABLE], statuses=[400])


@checks("JOB-MODEL-2")
def test_training_models_accepted_everywhere(
    gs_target: Target, gs_raw: RawDriver, gs_new_job: NewJob
) -> None:
    """Every cached training model is accepted for training, sampling and log_probability."""
    soft = Soft()
    for model in TRAINING_MODELS:
        body = valid_bodies.job(
            valid_bodies.training(model),
            valid_bodies.sampling(model),
            valid_bodies.inference("log_probability", model),
        )
        job_id, _ = gs_new_job(body, wait=False, why="JOB-MODEL-2", cid="JOB-MODEL-2")
        gs_raw.cancel(job_id)
    soft.check()
