"""Every JSON body the OpenAPI document accepts, the contract's models accept too.

This is the serverless form of schemathesis' positive-data check (ST202): a body drawn from
the document (schemathesis' own positive generator) must validate against the pydantic
model the fake validates with, in the fake's strict mode. The only refusals allowed are
the cross-field rules the operation lists in ``x-gs-refusals`` (list alignment), which the
draw skips. Without this, a document looser than the models (a sampling sub-job with no
inference_config) passes every schema test and fails every server.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, assume, given, settings
from schemathesis import GenerationMode

from contract import models as m
from contract.openapi import build_openapi
from fake_gs.http.json_body import integral_floats_as_ints

BODIES: dict[str, type[m.Body]] = {
    "create_job": m.CreateJobRequest,
    "step": m.StepRequest,
    "save": m.SaveRequest,
    "load": m.LoadRequest,
    "operation": m.OperationEnvelope,
    "generate_stream": m.GenerateRequest,
    "log_probs": m.LogProbsRequest,
}


@pytest.fixture(scope="module")
def schema() -> Any:
    return schemathesis.openapi.from_dict(build_openapi("proposed"))


def _aligned(name: str, body: dict[str, Any]) -> bool:
    """False for the cross-field rule x-gs-refusals lists: lists not aligned with prompts."""
    prompts = body.get("prompts")
    fields = ("completions",) if name == "log_probs" else ("sampling_params", "routing_key")
    return not any(isinstance(body.get(f), list) and len(body[f]) != len(prompts or []) for f in fields)


def _accepts(name: str, body: Any) -> None:
    model = BODIES[name]
    data = integral_floats_as_ints(body)
    obj = model.model_validate(data, strict=True)
    if isinstance(obj, m.OperationEnvelope):
        assert obj.operation_type in m.OPERATION_PAYLOADS
        m.OPERATION_PAYLOADS[obj.operation_type].model_validate(data.get("payload", {}), strict=True)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_document_bodies_are_model_bodies(schema: Any, name: str) -> None:
    """Positive bodies of ``name`` drawn from the document validate against its model."""
    op = schema.find_operation_by_id(name)

    @settings(max_examples=25, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=op.as_strategy(GenerationMode.POSITIVE))
    def check(case: Any) -> None:
        body = case.body
        assume(isinstance(body, dict) and _aligned(name, body))
        _accepts(name, body)

    check()


def test_the_original_st202_body_is_outside_the_document() -> None:
    """The body the OpenAPI work found (a sampling sub-job with no inference_config) no longer
    validates against the document, and a complete one does."""
    from jsonschema import Draft202012Validator

    doc = build_openapi()
    validator = Draft202012Validator({"$ref": "#/components/schemas/CreateJobRequest",
                                      "components": doc["components"]})
    sampling = {"job_type": "sampling", "model_name": "Qwen/Qwen3-0.6B"}
    assert not validator.is_valid({"sub_job_configs": [sampling]})
    full = {**sampling, "inference_config": {"max_seq_len": 8, "n_gpus": 1}}
    assert validator.is_valid({"sub_job_configs": [full]})
    m.CreateJobRequest.model_validate({"sub_job_configs": [full]}, strict=True)
