"""INTEG: the surface SkyRL's and verl's Arctic code calls, judged through the kit's client
against the target: the legacy factory, reconnect, generate's list of outputs, the metrics
the integrations read from fwd-bwd and step answers, and forward-no-grad log-probs.

The client reattaches to the session job (no job is created, so a real server is charged
nothing) over the suite's recorded session; shutting it down must leave that job running.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from typing import Any

import pytest

from conformance.drivers.kit_client import ClientDriver
from conformance.drivers.raw import RawDriver
from conformance.jobs import SharedJob
from conformance.options import GsOptions
from conformance.reporting.violations import Soft, expect
from conformance.target import Target
from contract.clauses import checks
from contract.states import JobState, normalize_job_state

PROMPTS = [[11, 12, 13], [21, 22]]


def _legacy(target: Any, job_id: str, model: str) -> Any:
    """The integrations' async client on the session job, as they build it (no knobs)."""
    from client import create_arctic_rl_client

    driver = ClientDriver(target, job_id, model=model, open_job=False,
                          forward_no_grad_route="auto", cancel_on_shutdown=True)
    return create_arctic_rl_client(driver.config, transport=driver.transport)


@pytest.fixture(scope="module")
def integ(gs_target: Target, gs_job: SharedJob, gs_opts: GsOptions) -> Iterator[Any]:
    client = _legacy(gs_target, gs_job.job_id, gs_opts.model)
    yield client
    client.shutdown()


def _batch() -> dict[str, Any]:
    import torch

    ids = torch.tensor([[11, 12, 13, 14], [21, 22, 23, 24]])
    return {"batch": {"input_ids": ids, "labels": ids, "attention_mask": torch.ones_like(ids)},
            "meta": {}}


def _is_float(value: Any) -> bool:
    return isinstance(value, float)


@checks("INTEG-JOB-1", "INTEG-JOB-2")
def test_factory_reconnect_and_shutdown_keep_the_job(
    gs_target: Target, gs_job: SharedJob, gs_opts: GsOptions, gs_raw: RawDriver
) -> None:
    first = _legacy(gs_target, gs_job.job_id, gs_opts.model)
    ids = (first.training_job_id, first.sampling_job_id)
    expect("INTEG-JOB-1", first.sync.job_ids is not None and not first.sync.job_ids.created,
           "create_arctic_rl_client did not attach before returning", first.sync.job_ids)
    again = first.reconnect_config()
    soft = Soft()
    soft.expect("INTEG-JOB-1", again.job_id == gs_job.job_id and all(ids)
                and (again.training_job_id, again.sampling_job_id) == ids,
                f"reconnect_config() carries {again.job_id, again.training_job_id, again.sampling_job_id}, the job is {gs_job.job_id, *ids}")
    second = _legacy(gs_target, str(again.job_id), gs_opts.model)
    soft.expect("INTEG-JOB-1", (second.training_job_id, second.sampling_job_id) == ids
                and not second.sync.job_ids.created, "the reconnected client is on another job")
    asyncio.run(_awaited(first.shutdown()))
    second.shutdown()
    status = gs_raw.get_job(gs_job.job_id).field("status")
    soft.expect("INTEG-JOB-2", normalize_job_state(status) == JobState.RUNNING,
                f"after shutting down two reattached clients the job is {status!r}")
    soft.check()


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


@checks("INTEG-GEN-1")
def test_generate_answers_the_list_of_outputs(integ: Any) -> None:
    outputs = asyncio.run(integ.generate(prompts=PROMPTS, sampling_params={"max_tokens": 3}))
    expect("INTEG-GEN-1", isinstance(outputs, list) and len(outputs) == len(PROMPTS),
           f"generate answered {type(outputs).__name__} of {len(outputs)} for {len(PROMPTS)} prompts")
    for i, out in enumerate(outputs):
        expect("INTEG-GEN-1", isinstance(out, dict) and list(out.get("token_ids") or [])
               and out.get("finish_reason") in ("stop", "length"),
               f"output {i} lacks token_ids or finish_reason", out)


@checks("INTEG-FB-1", "INTEG-STEP-1")
def test_fwd_bwd_and_step_metrics(integ: Any) -> None:
    answer = asyncio.run(integ.fwd_bwd(_batch()))
    metrics = answer.get("metrics")
    soft = Soft()
    if soft.expect("INTEG-FB-1", isinstance(metrics, dict), f"fwd_bwd answered no metrics: {answer!r}"[:300]):
        soft.expect("INTEG-FB-1", _is_float(metrics.get("loss")) and math.isfinite(metrics["loss"]),
                    f"metrics.loss is {metrics.get('loss')!r}")
        soft.expect("INTEG-FB-1", _is_float(metrics.get("grad_norm")),
                    f"metrics.grad_norm is {metrics.get('grad_norm')!r}")
    step = asyncio.run(integ.step())
    block = step.get("metrics")
    if soft.expect("INTEG-STEP-1", isinstance(block, dict), f"step answered no metrics: {step!r}"[:300]):
        soft.expect("INTEG-STEP-1", _is_float(block.get("grad_norm")),
                    f"step metrics.grad_norm is {block.get('grad_norm')!r}")
        soft.expect("INTEG-STEP-1", block.get("last_lr") == step.get("last_lr") is not None,
                    f"step metrics.last_lr {block.get('last_lr')!r}, answer {step.get('last_lr')!r}")
    soft.check()


@checks("INTEG-FWD-1")
@pytest.mark.parametrize("reference", [False, True])
def test_fwd_no_grad_log_probs(integ: Any, gs_target: Target, reference: bool) -> None:
    if gs_target.profile == "current" and not gs_target.embedded:
        pytest.skip("today's service has no working no-grad forward (spec §7.1)")
    payload = _batch()
    answer = asyncio.run(integ.fwd_no_grad(payload, reference_model=reference))
    batch = answer.get("batch")
    want = tuple(payload["batch"]["input_ids"].shape)
    expect("INTEG-FWD-1", isinstance(batch, dict) and all(
        tuple(getattr(batch.get(k), "shape", ())) == want for k in ("logprobs", "log_probs")),
        f"batch log-probs are not shaped {want}", {k: getattr(v, "shape", v) for k, v in (batch or {}).items()})
