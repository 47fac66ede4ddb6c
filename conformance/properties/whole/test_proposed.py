"""PROP: what the seed asks the server to add: forward-no-grad, log-probs, metrics blocks.

Expected red on today's real service; run with ``--gs-profile proposed`` to watch them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.drivers.ops import RawOps
from conformance.drivers.raw import RawDriver, request_chunks
from conformance.fixtures import Via
from conformance.inputs.strategies import (
    forward_payloads,
    model_kwargs,
    verl_batches,
    verl_envelope,
)
from conformance.inputs.strategies import prompts as prompt_strategy
from conformance.jobs import SharedJob
from conformance.judging.checks import submitted
from conformance.judging.variants import CHUNK_BYTES
from conformance.reporting.violations import Soft, expect, present
from conformance.runtime import prop
from contract.clauses import checks
from contract.models import PROPOSED_METRIC_KEYS
from contract.shapes import check_forward_result, dtype_name

VIA = ["raw", "client"]


@checks("PROP-FNG-1", "PROP-FNG-2")
@prop(scale=0.4)
@given(kwargs=model_kwargs(extras=False), n=st.integers(1, 3))
def test_forward_no_grad_route(
    gs_raw: RawDriver, gs_job: SharedJob, kwargs: dict[str, Any], n: int
) -> None:
    """Request chunks in, {request_id, job_id} out; resolves to model_outputs + metrics as DSSST1."""
    body = {"args": [], "kwargs": kwargs, "meta": {}}
    chunks = request_chunks(body, "forward_no_grad", chunk_bytes=None if n == 1 else CHUNK_BYTES)
    answers = gs_raw.send_chunks("forward_no_grad", gs_job.job_id, chunks)
    soft = Soft()
    rid = submitted(answers[-1], gs_job.job_id, soft, "PROP-FNG-1")
    soft.check()
    rid = present("PROP-FNG-1", rid, "the submission has no request id")
    settled = gs_raw.settle(gs_job.job_id, rid)
    expect("PROP-FNG-2", settled.status == "done", f"ended {settled.raw_status}: {settled.error!r}")
    soft.expect("PROP-FNG-2", settled.form in ("inline", "chunks"), f"delivered as {settled.form}")
    result = settled.decoded()
    soft.extend("PROP-FNG-2", check_forward_result(body, result))
    soft.expect(
        "PROP-FNG-2", isinstance(result.get("metrics"), dict), f"metrics {result.get('metrics')!r}"
    )
    lp = (result.get("model_outputs") or {}).get("logprobs")
    soft.expect(
        "PROP-FNG-2", lp is not None and dtype_name(lp) == "float32", "logprobs not float32"
    )
    soft.check()


@checks("PROP-FNG-3")
@prop(scale=0.3)
@given(kwargs=model_kwargs(extras=False))
def test_forward_no_grad_entropy(gs_ops: RawOps, kwargs: dict[str, Any]) -> None:
    """meta.calculate_entropy asks for entropy [B, S]."""
    body = {"args": [], "kwargs": kwargs, "meta": {"calculate_entropy": True}}
    result = gs_ops.forward_no_grad(body)
    soft = Soft()
    soft.extend("PROP-FNG-3", [p for p in check_forward_result(body, result) if "entropy" in p])
    soft.check()


@checks("PROP-FNG-4")
@prop(scale=0.3)
@given(batch=verl_batches(), reference=st.booleans())
def test_forward_no_grad_verl(gs_ops: RawOps, batch: dict[str, Any], reference: bool) -> None:
    """The verl envelope kwargs and reference_model are taken."""
    body = {**verl_envelope(batch), "reference_model": reference}
    result = gs_ops.forward_no_grad(body)
    soft = Soft()
    soft.extend("PROP-FNG-4", check_forward_result(body, result))
    soft.check()


def _forward_no_grad(ops: Any, via: str, payload: dict) -> dict:
    """forward-no-grad by its route (raw) or the client's ``forward`` op."""
    return ops.forward_no_grad(payload) if via == "raw" else ops.forward(payload)


@checks("PROP-SHAPE-1")
@pytest.mark.parametrize("via", VIA)
@prop(scale=0.5)
@given(payload=forward_payloads())
def test_forward_no_grad_shapes(gs_via: Via, via: str, payload: dict[str, Any]) -> None:
    """logprobs follow the shape rule for any batch, raw and through the client."""
    result = _forward_no_grad(gs_via(via), via, payload)
    soft = Soft()
    soft.extend("PROP-SHAPE-1", check_forward_result(payload, result))
    soft.check()


@checks("PROP-LOGPROBS-1")
@prop(scale=0.3)
@given(
    prompts=st.lists(prompt_strategy, min_size=1, max_size=3),
    completions=st.booleans(),
    top_k=st.one_of(st.none(), st.integers(1, 4)),
)
def test_log_probs(
    gs_raw: RawDriver,
    gs_job: SharedJob,
    prompts: list[str | list[int]],
    completions: bool,
    top_k: int | None,
) -> None:
    """JSON {prompts, completions?, top_k?} in; a DSSST1 result out."""
    body: dict = {"prompts": prompts}
    if completions:
        body["completions"] = ["done"] * len(prompts)
    if top_k:
        body["top_k"] = top_k
    ans, settled = gs_raw.run_json("log_probs", gs_job.job_id, body)
    soft = Soft()
    submitted(ans, gs_job.job_id, soft, "PROP-LOGPROBS-1")
    soft.check()
    settled = present("PROP-LOGPROBS-1", settled, f"log_probs refused: {ans}")
    expect(
        "PROP-LOGPROBS-1",
        settled.status == "done",
        f"ended {settled.raw_status}: {settled.error!r}",
    )
    expect("PROP-LOGPROBS-1", settled.form in ("inline", "chunks"), f"delivered as {settled.form}")
    expect("PROP-LOGPROBS-1", isinstance(settled.decoded(), dict), "result is not an object")


@checks("PROP-METRICS-1")
@pytest.mark.parametrize("via", VIA)
def test_forward_backward_metrics(gs_via: Via, via: str) -> None:
    """forward-backward results carry every proposed metric."""
    import torch

    result = gs_via(via).fwd_bwd(
        {"args": [], "kwargs": {"input_ids": torch.ones(2, 5, dtype=torch.int64)}}
    )
    metrics = result.get("metrics") or {}
    missing = [k for k in PROPOSED_METRIC_KEYS if k not in metrics or metrics[k] is None]
    expect("PROP-METRICS-1", not missing, f"metrics lack {missing}: {metrics!r}")


@checks("PROP-METRICS-2")
@pytest.mark.parametrize("via", VIA)
def test_step_metrics(gs_via: Via, via: str) -> None:
    """step results carry a metrics block with grad_norm."""
    result = gs_via(via).step()
    metrics = result.get("metrics")
    expect(
        "PROP-METRICS-2",
        isinstance(metrics, dict) and metrics.get("grad_norm") is not None,
        f"step metrics {metrics!r}",
    )
