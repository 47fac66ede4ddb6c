"""Rules the service enforces that a lax server (or fake) would let a client get wrong
(spec §8, §6.5): config rules at create, load/sync rules at submit or as a failed
request, receivers named and of the right type, sequence lengths, capacity per account,
cancel-request, client-chosen job ids.

Each refusal is judged as the clause says where it may happen: a create-time rule accepts a
4xx at create or a job that ends ``failed``; a load/sync rule a 4xx at submit or a request
that ends ``failed``. Never a 5xx, never success.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from conformance.drivers.ops import RawOps
from conformance.drivers.raw import Answer, RawDriver, encode
from conformance.fixtures import NewJob
from conformance.inputs import valid_bodies
from conformance.jobs import JobBudget, JobLedger, SharedJob
from conformance.judging.checks import (
    SHAPE_ENGINE_SKIP,
    create_refused,
    envelope,
    refused,
    refused_or_failed,
    refused_or_taken,
)
from conformance.judging.variants import JobRef
from conformance.options import GsOptions
from conformance.reporting.violations import Soft, expect
from conformance.target import Target
from contract.clauses import checks
from contract.states import (
    JobState,
    RequestState,
    normalize_job_state,
)

NOT_IMPLEMENTED = 501
LORA = {"peft_type": "Lora", "r": 8, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}


def _model(gs_opts: Any) -> str:
    return str(gs_opts.model)


def submit_refused(
    driver: RawDriver, job_id: str, ans: Answer, cid: str, soft: Soft | None = None
) -> None:
    """A load/sync rule: 4xx at submit, or a request that ends failed (``soft``: as above)."""
    own = soft is None
    soft = soft or Soft()
    refused_or_failed(ans, soft, cid, lambda rid: driver.settle(job_id, rid))
    if own:
        soft.check()


def op(
    driver: RawDriver, job_id: str, kind: str, payload: dict | None = None, **hints: Any
) -> Answer:
    return driver.operation(job_id, {"operation_type": kind, "payload": payload or {}, **hints})


def saved(driver: RawDriver, job_id: str, checkpoint_type: str, cid: str) -> str:
    """Save on ``job_id``; the id the result names (the only one to use)."""
    _, settled = driver.run_json("save", job_id, valid_bodies.save(None, checkpoint_type))
    body = settled.decoded() if settled is not None else None
    ckpt = body.get("checkpoint_id") if isinstance(body, Mapping) else None
    expect(cid, isinstance(ckpt, str) and ckpt, f"save gave no checkpoint id: {body!r}")
    return str(ckpt)


def from_checkpoint(sub: dict, checkpoint_id: str | None, job_id: str | None, **extra: Any) -> dict:
    info: dict[str, Any] = {"source_job_id": job_id} if job_id is not None else {}
    if checkpoint_id is not None:
        info["checkpoint_id"] = checkpoint_id
    return {**sub, "source_checkpoint_info": {**info, **extra}}


# --- create-time config rules --------------------------------------------------------------

CONFIGS = [
    ("JOBV-SP-1", {"sp_size": 3}, "sp_size"),
    ("JOBV-SP-1", {"sp_size": 0}, "sp_size"),
    ("JOBV-OFFLOAD-1", {"ac_config": {"mode": "selective", "offload_config": {"enabled": True}}}, None),
    ("JOBV-MULTIPLEX-1", {"multiplex_job_id": "abc"}, "multiplex_job_id"),
    ("JOBV-MULTIPLEX-1", {"multiplex_job_id": "abc:training"}, "multiplex_job_id"),
]


@checks("JOBV-SP-1", "JOBV-OFFLOAD-1", "JOBV-MULTIPLEX-1")
@pytest.mark.parametrize("cid,extra,field", CONFIGS)
def test_config_rules(
    gs_raw: RawDriver, gs_opts: GsOptions, cid: str, extra: dict[str, Any], field: str
) -> None:
    """sp_size divides n_gpus, offload needs mode full, multiplex_job_id is a sub-job id."""
    create_refused(gs_raw, valid_bodies.job(valid_bodies.training(_model(gs_opts), n_gpus=4, **extra)), cid, field)


def _multiplexed(model: str, target: str) -> dict:
    return valid_bodies.job(valid_bodies.training(model, multiplex_job_id=target))


def _in_use(driver: RawDriver) -> Any:
    return driver.call("get_capacity").field("in_use_gpus")


@checks("JOBV-MULTIPLEX-2")
def test_multiplex_onto_a_running_sub_job(
    gs_raw: RawDriver, gs_job: SharedJob, gs_opts: GsOptions, gs_new_job: NewJob, gs_target: Target
) -> None:
    """multiplex_job_id names a running sub-job of the caller's: a missing job, a sub-job
    the job lacks and a cancelled job are refused; onto the shared job it is taken, and (on
    the embedded fake, where no one else uses the account) its GPUs are not counted again."""
    model, jid, cid = _model(gs_opts), gs_job.job_id, "JOBV-MULTIPLEX-2"
    soft = Soft()
    for target in (f"{uuid.uuid4()}:training:0", f"{jid}:training:9"):
        create_refused(gs_raw, _multiplexed(model, target), cid, "multiplex_job_id", soft)
    ended, _ = gs_new_job(why="a job to cancel and then multiplex onto", cid=cid)
    gs_raw.cancel(ended)
    gs_raw.wait_job(ended, until=(JobState.CANCELLED,), timeout_s=30)
    create_refused(gs_raw, _multiplexed(model, f"{ended}:training:0"), cid, "multiplex_job_id", soft)
    before = _in_use(gs_raw)
    shared, ans = gs_new_job(_multiplexed(model, f"{jid}:training:0"), why="a job multiplexed onto the session job", cid=cid)
    soft.expect(cid, normalize_job_state(ans.field("status")) == JobState.RUNNING, f"the multiplexed job: {ans}")
    if gs_target.embedded:
        after = _in_use(gs_raw)
        soft.expect(cid, after == before, f"in_use_gpus went {before} -> {after} for a job multiplexed onto a running one")
    gs_raw.cancel(shared)
    soft.check()


@checks("JOBV-MULTIPLEX-2")
def test_multiplex_onto_another_accounts_job(gs_raw2: RawDriver, gs_job: SharedJob, gs_opts: GsOptions) -> None:
    """Another account's running sub-job is no target: refused as a missing one is."""
    body = _multiplexed(_model(gs_opts), f"{gs_job.job_id}:training:0")
    create_refused(gs_raw2, body, "JOBV-MULTIPLEX-2", "multiplex_job_id")


# --- checkpoints at create and at load -----------------------------------------------------


@checks("CKPT-INIT-2", "CKPT-INIT-5")
def test_sampler_init_needs_weights_only(
    gs_raw: RawDriver, gs_job: SharedJob, gs_opts: GsOptions, gs_new_job: NewJob
) -> None:
    """A sampler starts from an existing weights-only checkpoint only; no credentials need
    be sent with it (the server stamps stage_info itself)."""
    model, jid = _model(gs_opts), gs_job.job_id
    full = saved(gs_raw, jid, "resumable", "CKPT-INIT-2")
    for ckpt in (full, f"gs-missing-{uuid.uuid4().hex[:8]}", None):
        create_refused(gs_raw, valid_bodies.job(from_checkpoint(valid_bodies.sampling(model), ckpt, jid)), "CKPT-INIT-2")
    weights = saved(gs_raw, jid, "weights-only", "CKPT-INIT-2")
    body = valid_bodies.job(from_checkpoint(valid_bodies.sampling(model), weights, jid))
    new_id, ans = gs_new_job(body, why="a sampler from a weights-only checkpoint", cid="CKPT-INIT-5")
    expect("CKPT-INIT-2", normalize_job_state(ans.field("status")) == JobState.RUNNING, f"the sampler job: {ans}")
    gs_raw.cancel(new_id)


@checks("CKPT-INIT-6", "CKPT-INIT-7")
def test_init_names_its_source_and_no_credentials(
    gs_raw: RawDriver, gs_job: SharedJob, gs_opts: GsOptions
) -> None:
    """Initialising from another job's checkpoint without source_job_id is refused (spec
    §8.4); the fake also refuses stage_info credentials sent by the caller (spec §6.5)."""
    model, jid = _model(gs_opts), gs_job.job_id
    weights = saved(gs_raw, jid, "weights-only", "CKPT-INIT-6")
    soft = Soft()
    create_refused(gs_raw, valid_bodies.job(from_checkpoint(valid_bodies.sampling(model), weights, None)), "CKPT-INIT-6", soft=soft)
    creds = {"stage_info": {"location": "s3://bucket/stage", "credentials": {"AWS_KEY_ID": "x"}}}
    create_refused(gs_raw, valid_bodies.job(from_checkpoint(valid_bodies.sampling(model), weights, jid, **creds)),
                   "CKPT-INIT-7", "stage_info", soft=soft)
    soft.check()


@checks("CKPT-INIT-4")
def test_sampler_from_an_ended_job(
    gs_raw: RawDriver, gs_opts: GsOptions, gs_new_job: NewJob
) -> None:
    """A sampler starts from a weights-only checkpoint of a job that has since been
    cancelled (the source need not be running once the checkpoint is saved)."""
    model = _model(gs_opts)
    src, _ = gs_new_job(valid_bodies.small_job(model), why="a source job to end", cid="CKPT-INIT-4")
    weights = saved(gs_raw, src, "weights-only", "CKPT-INIT-4")
    gs_raw.cancel(src)
    gs_raw.wait_job(src, until=(JobState.CANCELLED,), timeout_s=600)
    body = valid_bodies.job(from_checkpoint(valid_bodies.sampling(model), weights, src))
    new_id, ans = gs_new_job(body, why="a sampler from an ended job's checkpoint", cid="CKPT-INIT-4")
    gs_raw.cancel(new_id)
    expect("CKPT-INIT-4", normalize_job_state(ans.field("status")) == JobState.RUNNING,
           f"a sampler from {src}'s checkpoint after {src} was cancelled: {ans}")


@checks("SAVE-DP-1", "CKPT-INIT-1")
def test_dp_size_change_needs_fresh_optimizer(
    gs_raw: RawDriver, gs_job: SharedJob, gs_opts: GsOptions, gs_new_job: NewJob
) -> None:
    """A checkpoint of a 2-GPU trainer loads into a 1-GPU trainer only with
    load_optimizer_states false, at runtime and at create."""
    model = _model(gs_opts)
    src, _ = gs_new_job(valid_bodies.job(valid_bodies.training(model, n_gpus=2)), why="a 2-GPU source", cid="SAVE-DP-1")
    ckpt = saved(gs_raw, src, "resumable", "SAVE-DP-1")
    load = {"checkpoint_id": ckpt, "source_job_id": src}
    soft = Soft()
    submit_refused(gs_raw, gs_job.job_id, gs_raw.submit_json("load", gs_job.job_id, load), "SAVE-DP-1", soft)
    create_refused(gs_raw, valid_bodies.job(from_checkpoint(valid_bodies.training(model, n_gpus=1), ckpt, src)),
                   "CKPT-INIT-1", "load_optimizer_states", soft)
    fresh = valid_bodies.job(valid_bodies.training(model, n_gpus=1, load_optimizer_states=False))
    dst, _ = gs_new_job(fresh, why="a 1-GPU target with a fresh optimizer", cid="SAVE-DP-1")
    _, settled = gs_raw.run_json("load", dst, load)
    soft.expect("SAVE-DP-1", settled is not None and settled.status == RequestState.DONE,
                f"load with load_optimizer_states false: {settled and settled.final_body}")
    for job_id in (src, dst):
        gs_raw.cancel(job_id)
    soft.check()


# --- operations: LoRA, receivers -----------------------------------------------------------


@checks("OP-LORA-1")
def test_lora_sync_needs_peft_configs(
    gs_raw: RawDriver, gs_job: SharedJob, gs_opts: GsOptions, gs_new_job: NewJob
) -> None:
    """weight_format lora needs matching peft_config on both sub-jobs from creation."""
    jid = gs_job.job_id
    ans = op(gs_raw, jid, "weight-sync", {"weight_format": "lora"}, sub_job_id=gs_job.training)
    submit_refused(gs_raw, jid, ans, "OP-LORA-1")
    model = _model(gs_opts)
    body = valid_bodies.job(valid_bodies.training(model, peft_config=LORA), valid_bodies.sampling(model, peft_config=LORA))
    lora, _ = gs_new_job(body, why="LoRA on both sub-jobs", cid="OP-LORA-1")
    ans = op(gs_raw, lora, "weight-sync", {"weight_format": "lora"}, sub_job_type="training")
    rid = ans.field("request_id")
    expect("OP-LORA-1", ans.ok and isinstance(rid, str), f"LoRA sync with matching configs: {ans}")
    settled = gs_raw.settle(lora, rid)
    gs_raw.cancel(lora)
    expect("OP-LORA-1", settled.status == RequestState.DONE, f"LoRA sync ended {settled.raw_status}")


@checks("OP-HINT-1")
@pytest.mark.parametrize("kind", ["weight-sync", "bootstrap-router-replay", "router-replay-discard"])
def test_receiver_must_be_named(gs_raw: RawDriver, gs_job: SharedJob, kind: str) -> None:
    """On a job with two sub-jobs, the fake refuses these operations without sub_job_id or
    sub_job_type; spec §7 makes the hints optional, so a server may route them to a default
    receiver instead (then a JSON answer, spec §7: operation answers are opaque)."""
    payloads: dict[str, dict[str, Any]] = {
        "weight-sync": {},
        "bootstrap-router-replay": {"source_sub_job_id": gs_job.sampling, "target_sub_job_id": gs_job.training},
        "router-replay-discard": {"sample_ids": ["gs-1"]},
    }
    payload = payloads[kind]
    soft = Soft()
    refused_or_taken(op(gs_raw, gs_job.job_id, kind, payload), soft, "OP-HINT-1", [400],
                     lambda ans: "" if ans.is_json else "its answer is not JSON")
    soft.check()


@checks("OP-BOOTSTRAP-1")
def test_bootstrap_goes_sampling_to_training(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """bootstrap-router-replay the wrong way round is refused: a 4xx (the kit: 400), or a
    request_id whose request ends failed (spec §7 lets a deployment answer one to poll)."""
    payload = {"source_sub_job_id": gs_job.training, "target_sub_job_id": gs_job.sampling}
    soft = Soft()
    ans = op(gs_raw, gs_job.job_id, "bootstrap-router-replay", payload, sub_job_id=gs_job.sampling)
    refused_or_failed(ans, soft, "OP-BOOTSTRAP-1", lambda rid: gs_raw.settle(gs_job.job_id, rid), statuses=[400])
    soft.check()


@checks("OP-RESET-2")
def test_reset_prefix_cache_only_on_samplers(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """reset-prefix-cache routed to the training sub-job is refused: a 4xx, or 501 Not
    Implemented (an operation the receiver does not implement, the status the kit's own
    OpenAPI document gives operations a target may not implement), with a spec §3.6 body."""
    soft = Soft()
    ans = op(gs_raw, gs_job.job_id, "reset-prefix-cache", sub_job_id=gs_job.training)
    if ans.status == NOT_IMPLEMENTED:
        envelope(ans, soft)
    else:
        refused(ans, soft, "OP-RESET-2", statuses=[400])
    soft.check()


@checks("GEN-SAMPLER-1")
def test_generate_needs_a_sampler(
    gs_raw: RawDriver, gs_opts: GsOptions, gs_new_job: NewJob
) -> None:
    """generate and generate-stream on a training-only job are refused: a 4xx (the kit: 400),
    or a request that ends failed (spec §1.1 names no form)."""
    jid, _ = gs_new_job(valid_bodies.small_job(_model(gs_opts)), why="a training-only job", cid="GEN-SAMPLER-1")
    soft = Soft()
    for ans in (
        gs_raw.call("generate", data=encode({"prompts": [[1, 2, 3]]}), job_id=jid),
        gs_raw.call("generate_stream", data=b'{"prompts": ["hi"]}', job_id=jid),
    ):
        refused_or_failed(ans, soft, "GEN-SAMPLER-1", lambda rid: gs_raw.settle(jid, rid), statuses=[400])
    gs_raw.cancel(jid)
    soft.check()


# --- sequence lengths ----------------------------------------------------------------------


@checks("FB-SEQLEN-1")
def test_training_frames_fit_max_seq_len(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """A forward-backward frame one token longer than max_seq_len is refused."""
    import torch

    seq = valid_bodies.TRAIN_MAX_SEQ_LEN + 1
    ids = torch.randint(1, 100, (1, seq))
    answers, settled = gs_raw.run_frame("forward_backward", gs_job.job_id,
                                        {"args": [], "kwargs": {"input_ids": ids, "labels": ids}})
    soft = Soft()
    if settled is None:
        refused(answers[-1], soft, "FB-SEQLEN-1")
    else:
        soft.expect("FB-SEQLEN-1", settled.status == RequestState.FAILED, f"a {seq}-token frame trained ({settled.raw_status})")
    soft.check()


@checks("GEN-SEQLEN-1")
def test_generation_stays_within_max_seq_len(gs_ops: RawOps, gs_job: SharedJob) -> None:
    """Prompt plus generated tokens never exceed the sampler's max_seq_len."""
    limit = gs_job.sampling_max_seq_len or valid_bodies.SAMPLING_MAX_SEQ_LEN
    prompt = [int(32 + i % 90) for i in range(limit - 40)]
    out = gs_ops.generate({"prompts": [prompt] * 4, "sampling_params": {"max_tokens": 100_000}})
    soft = Soft()
    for i, item in enumerate(out.get("results") or []):
        ids = item.get("token_ids")
        n = len(ids) if ids is not None else 0
        soft.expect("GEN-SEQLEN-1", len(prompt) + n <= limit, f"result {i}: {len(prompt)} + {n} > {limit}")
    soft.check()


# --- capacity per account ------------------------------------------------------------------


@checks("JOB-ID-1")
def test_client_job_id(
    gs_target: Target,
    gs_raw: RawDriver,
    gs_opts: GsOptions,
    gs_budget: JobBudget,
    gs_ledger: JobLedger,
) -> None:
    """A free UUID job_id names the job; the same id again answers 409."""
    if not gs_target.embedded:
        gs_budget.take(1, "a job with a chosen id")
    mine = str(uuid.uuid4())
    body = {**valid_bodies.small_job(_model(gs_opts)), "job_id": mine}
    ans = gs_raw.create_job(body)
    got = ans.field("job_id")
    expect("JOB-ID-1", ans.ok and isinstance(got, str), f"create with a job_id: {ans}")
    gs_ledger.add(gs_raw, got)
    if got != mine:
        expect("JOB-ID-1", not gs_target.embedded, f"the fake replaced job_id {mine} by {got}")
        pytest.skip("the server ignores a create body's job_id (conformant; nothing more to judge)")
    again = gs_raw.create_job(body)
    if again.ok and isinstance(again.field("job_id"), str):
        gs_ledger.add(gs_raw, again.field("job_id"))
    soft = Soft()
    refused(again, soft, "JOB-ID-1", statuses=[409])
    soft.check()


# --- semantic: a sampler from saved weights ------------------------------------------------


@checks("CKPT-INIT-3")
def test_sampler_from_weights_serves_them(
    gs_target: Target,
    gs_raw: RawDriver,
    gs_job: SharedJob,
    gs_ops: RawOps,
    gs_opts: GsOptions,
    gs_new_job: NewJob,
) -> None:
    """After training, a sampler created from the saved weights generates what the trained
    job's synced sampler generates (same tokens, log-probs within tolerance)."""
    if gs_target.embedded and gs_target.engine == "shape":
        pytest.skip(SHAPE_ENGINE_SKIP)
    import torch

    ids = torch.tensor([list(b"abababababab")] * 2)
    for _ in range(3):
        gs_ops.fwd_bwd({"args": [], "kwargs": {"input_ids": ids, "labels": ids}, "meta": {}})
        gs_ops.step(3e-3 if gs_target.embedded else 1e-5)
    ckpt = saved(gs_raw, gs_job.job_id, "weights-only", "CKPT-INIT-3")
    gs_ops.weight_sync()
    request = {"prompts": [list(b"abab")], "sampling_params": {
        "max_tokens": 8, "temperature": 0.0, "seed": 11, "logprobs": 1}}
    trained = gs_ops.generate(request)["results"][0]
    body = valid_bodies.job(from_checkpoint(valid_bodies.sampling(_model(gs_opts)), ckpt, gs_job.job_id))
    served_id, _ = gs_new_job(body, why="a sampler from saved weights", cid="CKPT-INIT-3")
    served = RawOps(gs_raw, JobRef(served_id)).generate(request)["results"][0]
    gs_raw.cancel(served_id)
    tol = 1e-4 if gs_target.embedded else 5e-2
    a, b = (torch.as_tensor(r["logprobs"], dtype=torch.float32) for r in (trained, served))
    expect("CKPT-INIT-3", list(trained["token_ids"]) == list(served["token_ids"])
           and a.shape == b.shape and bool((a - b).abs().max() <= tol),
           f"the sampler from {ckpt} differs from the trained model: {served} vs {trained}")
