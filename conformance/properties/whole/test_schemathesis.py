"""Schemathesis over the generated OpenAPI document (contract.openapi), against the target.

Positive mode (schema-valid input): no 5xx, and every answer (status, content type, body,
headers) matches the document. Negative mode (schema-invalid input): still no 5xx, every
answer matches, and the input is refused with a 4xx.

The document is baked for the target before loading: the prefix's database/schema/endpoint
become literal, ``job_id`` is pinned to the session job (so calls reach real behaviour
instead of 404s). Left out, and why:

* ``cancel_job`` would cancel the session job every other property needs;
* ``create_job`` against a real URL would create jobs (the run creates at most one);
* the ``positive_data_acceptance`` check: a schema-valid body can still be refused for a
  state reason the schema cannot express (unknown checkpoint, job not running, prompt too
  long, a random octet body that is not a DSSST1 frame);
* ``ignored_auth``: auth is judged by the AUTH properties, and the document lists anonymous
  access as an alternative for explicit-base-URL deployments;
* ``max_response_time``: latency is not a contract promise.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.transport import Response
from schemathesis.schemas import APIOperation
from schemathesis.specs.openapi.schemas import OpenApiSchema

from conformance.drivers.raw import RawDriver
from conformance.jobs import SharedJob
from conformance.reporting.recorder import RECORDER
from conformance.reporting.violations import ClauseViolation
from conformance.runtime import RUNTIME
from conformance.target import Target
from contract.clauses import checks
from contract.routes import PREFIX_TEMPLATE, ROUTES, routes_for

POSITIVE_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
NEGATIVE_CHECKS = [
    not_a_server_error,
    negative_data_rejection,
    content_type_conformance,
    response_schema_conformance,
]
PREFIX_PARAMS = {"database", "schema", "endpoint"}


def bake(doc: dict[str, Any], prefix: str, job_id: str, allow_create: bool) -> dict[str, Any]:
    """The document for one target: literal prefix, pinned job id, unsafe routes left out."""
    out = copy.deepcopy(doc)
    paths: dict[str, Any] = {}
    for path, item in out["paths"].items():
        new_path = prefix + path[len(PREFIX_TEMPLATE) :]
        for method, op in list(item.items()):
            if op.get("operationId") == "cancel_job" or (
                op.get("operationId") == "create_job" and not allow_create
            ):
                del item[method]
                continue
            params = []
            for p in op.get("parameters", []):
                if p.get("in") == "path" and p["name"] in PREFIX_PARAMS:
                    continue
                if p.get("in") == "path" and p["name"] == "job_id":
                    p = {**p, "schema": {"type": "string", "enum": [job_id]}}
                params.append(p)
            op["parameters"] = params
            for response in op.get("responses", {}).values():
                response.pop("links", None)
            _drop_examples(op)
        if item:
            paths[new_path] = item
    out["paths"] = paths
    out.pop("servers", None)
    return out


def _drop_examples(op: dict[str, Any]) -> None:
    """The document's examples serve a generic walk (a load or delete of the checkpoint a
    first save names); against the pinned session job they would touch checkpoints other
    properties made, so the properties draw without them."""
    for p in op.get("parameters", []):
        p.get("schema", {}).pop("examples", None)
    for media in op.get("requestBody", {}).get("content", {}).values():
        media.pop("examples", None)


def _load(gs_target: Target, gs_job: SharedJob) -> OpenApiSchema:
    from contract.openapi import build_openapi

    doc = bake(
        build_openapi(gs_target.server_profile),
        gs_target.prefix,
        gs_job.job_id,
        allow_create=gs_target.embedded,
    )
    schema = schemathesis.openapi.from_dict(doc)
    schema.config.update(
        base_url=gs_target.base_url, headers=gs_target.auth_headers(), request_timeout=120
    )
    return schema


def _examples() -> int:
    return max(3, RUNTIME.examples // 3)


@pytest.fixture(scope="session")
def gs_openapi(gs_target: Target, gs_job: SharedJob) -> OpenApiSchema:
    """The baked document, loaded once (schemathesis' from_fixture needs pytest < 9)."""
    return _load(gs_target, gs_job)


def _clauses_of(exc: BaseException) -> list[str]:
    """Which clauses a schemathesis failure speaks to: 5xx, accepted bad input, or schema."""
    from schemathesis.core.failures import AcceptedNegativeData, Failure, ServerError

    failures = list(getattr(exc, "exceptions", None) or [exc])
    found: list[str] = []
    for failure in failures:
        if isinstance(failure, ServerError):
            found.append("ERR-NO500-1")
        elif isinstance(failure, AcceptedNegativeData):
            found.append("ERR-REJECT-1")
        elif isinstance(failure, Failure):
            found.append("ERR-SCHEMA-1")
    return list(dict.fromkeys(found)) or ["ERR-SCHEMA-1"]


def _run(case: Case, gs_raw: RawDriver, checks_: list) -> None:
    RECORDER.attach(gs_raw.session)
    try:
        response = case.call_and_validate(session=gs_raw.session, checks=checks_)
    except (AssertionError, BaseExceptionGroup) as exc:
        raise ClauseViolation(_clauses_of(exc), str(exc)[:6000]) from exc
    _settle_submission(response, gs_raw)


def _settle_submission(response: Response, gs_raw: RawDriver) -> None:
    """Leave the target as the next case expects it. An accepted submission is polled to
    its end (a load right after a save is otherwise a race between the save's worker and
    the load's existence check); a job a case created is cancelled (left running or
    pending, its GPUs would hold every later job of the account in the queue)."""
    if not 200 <= response.status_code < 300:  # any success: the spec names no status
        return
    try:
        body = response.json()
    except ValueError:
        return
    if not isinstance(body, dict) or not isinstance(body.get("job_id"), str):
        return
    request_id = body.get("request_id")
    if isinstance(request_id, str):
        gs_raw.settle(body["job_id"], request_id)
    elif response.request.method == "POST" and _same_url(response.request.url, gs_raw.url("create_job")):
        gs_raw.cancel(body["job_id"])


def _same_url(a: str | None, b: str) -> bool:
    return (a or "").split("?")[0].rstrip("/") == b.rstrip("/")


#: No shrinking: a failure is reported with schemathesis' curl reproduction, and shrinking
#: HTTP fuzz cases costs minutes for little gain in readability.
SETTINGS = settings(
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    max_examples=_examples(),
    derandomize=not RUNTIME.randomize,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)


OPERATIONS = [r.name for r in ROUTES]


def _operation(schema: OpenApiSchema, op_id: str, gs_target: Target) -> APIOperation:
    if op_id == "cancel_job":
        pytest.skip("left out: it would cancel the session job")
    if op_id == "create_job" and not gs_target.embedded:
        pytest.skip("left out against a real URL: it would create jobs")
    if op_id not in {r.name for r in routes_for(gs_target.server_profile)}:
        pytest.skip(f"{op_id} is not a route of the {gs_target.server_profile} profile")
    return schema.find_operation_by_id(op_id)


def _fuzz(op: APIOperation, mode: GenerationMode, gs_raw: RawDriver, checks_: list) -> None:
    """Run hypothesis over schemathesis' cases for one operation and mode."""

    @SETTINGS
    @given(case=op.as_strategy(mode))
    def run(case: Case) -> None:
        _run(case, gs_raw, checks_)

    try:
        run()
    except Unsatisfiable:
        pytest.skip(f"schemathesis cannot build {mode.value} input for {op.label}")


@checks("ERR-NO500-1", "ERR-SCHEMA-1")
@pytest.mark.parametrize("op_id", OPERATIONS)
def test_openapi_positive(
    gs_openapi: OpenApiSchema, gs_raw: RawDriver, gs_target: Target, op_id: str
) -> None:
    """Schema-valid input: no 5xx, answers match the document."""
    _fuzz(
        _operation(gs_openapi, op_id, gs_target), GenerationMode.POSITIVE, gs_raw, POSITIVE_CHECKS
    )


@checks("ERR-NO500-1", "ERR-SCHEMA-1", "ERR-REJECT-1")
@pytest.mark.parametrize("op_id", OPERATIONS)
def test_openapi_negative(
    gs_openapi: OpenApiSchema, gs_raw: RawDriver, gs_target: Target, op_id: str
) -> None:
    """Schema-invalid input: no 5xx, answers match the document, the input is refused."""
    _fuzz(
        _operation(gs_openapi, op_id, gs_target), GenerationMode.NEGATIVE, gs_raw, NEGATIVE_CHECKS
    )
