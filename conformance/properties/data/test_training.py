"""FB and STEP: forward-backward over any batch, and optimizer steps, through both drivers."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.errors import CortexError
from conformance.drivers.ops import Failed, RawOps, Refused
from conformance.drivers.raw import RawDriver
from conformance.fixtures import Via
from conformance.inputs.strategies import fb_payloads, verl_batches, verl_envelope
from conformance.jobs import SharedJob
from conformance.judging.checks import kit_form, refused
from conformance.reporting.violations import Soft, expect
from conformance.runtime import RUNTIME, prop
from contract.clauses import checks
from contract.forms import why_not_judged
from contract.shapes import check_loss
from contract.states import RequestState

VIA = ["raw", "client"]


#: The fields of spec §6.1's typical result that FB-RESULT-1 holds a server to; the other
#: two (spec §11: "common", results being open) are the kit's (FB-RESULT-3).
SPEC_FB_FIELDS = ("job_id", "avg_loss")
KIT_FB_FIELDS = ("metrics", "post_process_outputs")


def judge_fb(result: dict, soft: Soft, cid: str = "FB-RESULT-1") -> None:
    """A forward-backward result as the spec describes it (``cid``), and the kit's four
    fields under FB-RESULT-3 where kit clauses are judged with ``cid`` FB-RESULT-1."""
    for name in SPEC_FB_FIELDS:
        soft.expect(cid, name in result, f"forward-backward result lacks {name}: {sorted(result)}")
    soft.extend(cid, check_loss(result.get("avg_loss")))
    for name in KIT_FB_FIELDS:
        soft.expect(cid, result.get(name, {}) is None or isinstance(result.get(name, {}), dict),
                    f"{name} {result.get(name)!r}: an object where present")
    if cid == "FB-RESULT-1":
        for name in KIT_FB_FIELDS:
            soft.expect("FB-RESULT-3", name in result, f"forward-backward result lacks {name}: {sorted(result)}")


#: The model kwargs spec §10.1 names, and the dtype its helper sends (spec §10.2: long).
SPEC_KWARGS = frozenset({"input_ids", "attention_mask", "position_ids", "labels"})
#: The kwargs of spec §6.1's standard object and §10.1's minimal shape: every spec batch has them.
MINIMAL_KWARGS = frozenset({"input_ids", "labels"})


def spec_batch(payload: dict) -> bool:
    """A batch spec §10.1 describes: {args, kwargs} of int64 [batch, sequence] tensors of the
    four named kwargs, input_ids and labels among them (the minimal shape), nothing else
    (no labels, other dtypes, extras, processing: FB-SHAPE-2)."""
    kwargs = payload.get("kwargs") or {}
    return set(payload) <= {"args", "kwargs"} and MINIMAL_KWARGS <= set(kwargs) <= SPEC_KWARGS and all(
        str(getattr(v, "dtype", "")) == "torch.int64" for v in kwargs.values())


@checks("FB-RESULT-1", "FB-RESULT-3", "FB-SHAPE-1", "FB-SHAPE-2")
@pytest.mark.parametrize("via", VIA)
@prop(scale=0.6)
@given(payload=fb_payloads())
def test_forward_backward_any_batch(gs_via: Via, via: str, payload: dict[str, Any]) -> None:
    """Any batch shape of the spec's int64 kwargs (and, the kit's, any dtype, extras and a
    processing block) resolves to {job_id, avg_loss, metrics, post_process_outputs}."""
    cid = "FB-SHAPE-1" if spec_batch(payload) else "FB-SHAPE-2"
    try:
        result = gs_via(via).fwd_bwd(payload)
    except (Refused, Failed, CortexError) as exc:
        expect(cid, False, f"the batch was not taken: {exc}")
    soft = Soft()
    judge_fb(result, soft)
    soft.check()


@checks("FB-VERL-1")
@pytest.mark.parametrize("via", VIA)
@prop(scale=0.4)
@given(batch=verl_batches())
def test_verl_kwargs(gs_via: Via, via: str, batch: dict[str, Any]) -> None:
    """The verl-GRPO kwargs (prompts, responses, masks, advantages, old/ref log-probs) are taken."""
    ops = gs_via(via)
    body = (
        verl_envelope(batch)
        if via == "raw"
        else {
            "batch": batch,
            "meta": verl_envelope(batch)["meta"],
            "processing": {"loss_fn": "verl_grpo", "post": []},
        }
    )
    result = ops.fwd_bwd(body)
    soft = Soft()
    judge_fb(result, soft, "FB-VERL-1")
    soft.check()


@checks("FB-NOINPUT-1")
@pytest.mark.parametrize("kwargs", [{}, {"labels": [[1, 2]]}, {"attention_mask": [[1, 1]]}])
def test_no_input_ids(gs_raw: RawDriver, gs_job: SharedJob, kwargs: dict[str, Any]) -> None:
    """A frame without input_ids: 400 or a failed request with an error, never 5xx."""
    answers, settled = gs_raw.run_frame(
        "forward_backward", gs_job.job_id, {"args": [], "kwargs": kwargs}
    )
    soft = Soft()
    if settled is None:
        refused(answers[-1], soft, "FB-NOINPUT-1", statuses=[400])
    else:
        soft.expect(
            "FB-NOINPUT-1",
            settled.status == RequestState.FAILED and settled.error,
            f"a frame without input_ids ended {settled.raw_status}",
        )
    soft.check()


@checks("STEP-RESULT-1", "STEP-COUNT-1")
@pytest.mark.parametrize("via", VIA)
@prop(scale=0.3)
@given(n=st.integers(1, 4))
def test_steps_count(gs_via: Via, via: str, n: int) -> None:
    """step resolves to {global_steps, last_lr}; global_steps goes up by one per step."""
    ops = gs_via(via)
    soft = Soft()
    seen: list[Any] = []  # the answers' global_steps, JSON values until judged
    for _ in range(n + 1):
        result = ops.step()
        soft.expect(
            "STEP-RESULT-1",
            isinstance(result.get("global_steps"), int)
            and learning_rates(result.get("last_lr")) is not None,
            f"step result {result!r}: needs an integer global_steps and a last_lr that is a "
            "number or a non-empty list of numbers (spec §6.2)",
        )
        seen.append(result.get("global_steps"))
    soft.check()
    expect(
        "STEP-COUNT-1", seen == list(range(seen[0], seen[0] + n + 1)), f"global_steps went {seen}"
    )


@checks("STEP-LR-1")
@prop(scale=0.3)
@given(lr=st.floats(min_value=1e-8, max_value=1.0, allow_nan=False))
def test_learning_rate_reported(gs_ops: RawOps, lr: float) -> None:
    """A step's learning_rate comes back as last_lr (each entry, when it is a list): the
    kit's choice; spec §6.2 leaves last_lr to the backend's scheduler."""
    if not kit_form("STEP-LR-1"):
        pytest.skip(why_not_judged("STEP-LR-1", RUNTIME.forms))
    result = gs_ops.step(lr)
    got = learning_rates(result.get("last_lr"))
    expect(
        "STEP-LR-1",
        got is not None,
        f"last_lr {result.get('last_lr')!r} is neither a number nor a list of numbers",
    )
    assert got is not None
    expect(
        "STEP-LR-1",
        all(math.isclose(v, lr, rel_tol=1e-6) for v in got),
        f"asked for lr {lr}, last_lr {result.get('last_lr')}",
    )


def learning_rates(value: object) -> list[float] | None:
    """``last_lr`` as a list of numbers: spec §6.2 allows a number or a list of them
    (one per parameter group); None for anything else."""
    items = value if isinstance(value, list) else [value]
    numbers = [v for v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not items or len(numbers) != len(items):
        return None
    return [float(v) for v in numbers]


@checks("STEP-MEM-1")
def test_peak_memory(gs_ops: RawOps, gs_job: SharedJob) -> None:
    """With step_peak_memory_log set on the training config, steps report peak_memory."""
    if not gs_job.peak_memory_logged:
        pytest.skip("the reused job was not created with step_peak_memory_log")
    result = gs_ops.step()
    mem = result.get("peak_memory")
    expect(
        "STEP-MEM-1",
        isinstance(mem, dict) and all(
            isinstance(mem.get(k), int) and not isinstance(mem.get(k), bool) and mem[k] >= 0
            for k in ("gpu_peak", "cpu_peak")),
        f"peak_memory {mem!r}: want gpu_peak and cpu_peak as integer byte counts",
    )


@checks("STEP-BAD-1")
@pytest.mark.parametrize("lr", [-1.0, -1e-9, "fast", [0.1], {"value": 0.1}, True])
def test_bad_learning_rate(gs_raw: RawDriver, gs_job: SharedJob, lr: object) -> None:
    """A negative or non-numeric learning_rate answers 400."""
    ans = gs_raw.call("step", json_body={"learning_rate": lr}, job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "STEP-BAD-1", statuses=[400])
    soft.check()
