"""The OpenAPI 3.1 document, generated from the route table and the models.

A snapshot is committed as ``contract/openapi.json``; a test regenerates it and fails on
drift. Octet-stream bodies are described as binary so generators send bytes, not JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

from contract import models as m
from contract.errors import REQUEST_ID_HEADER
from contract.example_resources import (
    EXAMPLE_CHECKPOINT_ID,
    EXAMPLE_JOB_ID,
    EXAMPLE_REQUEST_ID,
    FIRST_SAVE_IDS,
)
from contract.idempotency import IDEMPOTENCY_KEY_HEADER, MAX_KEY_CHARS
from contract.limits import DEFAULT_MAX_EVENTS, MAX_EVENTS_CAP
from contract.openapi.answer_fields import require_as_clauses
from contract.openapi.bodies import (
    error_body_schemas,
    json_bytes_body,
    octet_body,
    operation_answers,
    refine_operation_envelope,
    refine_sub_job_configs,
    relax_dialects,
    sample_bodies,
    schema_ref,
)
from contract.openapi.document_rules import body_required, extensions, links, omitted_operations
from contract.routes import DEFAULT_ENDPOINT, PREFIX_TEMPLATE, ROUTES, Profile, Route, routes_for

ERROR_STATUSES: dict[str, str] = {
    "400": "Invalid input",
    "401": "Missing or wrong token",
    "404": "Unknown job, request or checkpoint",
    "409": "Conflict: job state or chunk group",
    "413": "Body too large",
    "415": "Wrong content type",
    "422": "Invalid input, as a detail list naming each bad field (spec §3.6's validation form)",
    "429": "Limit reached (Retry-After says when to try again)",
    "503": "Temporarily unavailable (Retry-After says when to try again)",
}
#: A call on a job in the wrong state may be refused precondition-style instead of 409
#: (spec §3.6 names the status class, spec §5.5 the style): the any dialect's 412.
PRECONDITION_FAILED = "The job is not in a state for this call (not running): a precondition-style refusal (spec §3.6)"
_PARAM = re.compile(r"{([a-z_]+)}")
_DESCRIPTIONS: dict[str, str] = {
    "job_id": "Job id (opaque to clients: the kit's are UUIDs, spec §5.1 shows others).",
    "request_id": "Request id returned by a scheduling call.",
    "checkpoint_id": "Checkpoint id, e.g. global_step12.",
    "database": "Database name.",
    "schema": "Schema name.",
    "endpoint": "Service endpoint, cortex-training by default.",
}
#: Results a poll's ``result`` may hold (each route's result model, an inline frame),
#: listed so tools and readers see their shapes.
RESULT_MODELS: tuple[type[BaseModel], ...] = tuple(dict.fromkeys((
    m.RequestStatus, m.InlineFrame,
    *(r.result_model for r in ROUTES if r.result_model is not None),
    *m.OPERATION_RESULTS.values(),
)))


#: The service prefix the examples use (any prefix reaches the same account).
PREFIX_EXAMPLES: dict[str, str] = {"database": "EXAMPLE_DB", "schema": "PUBLIC", "endpoint": DEFAULT_ENDPOINT}


def param_examples(route: Route, name: str) -> list[str]:
    """The example values of ``route``'s path parameter ``name``: the example resources
    (``contract.example_resources``), or the one the route names as its own (its
    ``example_ids``); a checkpoint id also lists the ids a first save names."""
    if name in PREFIX_EXAMPLES:
        return [PREFIX_EXAMPLES[name]]
    own = dict(route.example_ids)
    if name == "job_id":
        return [own.get(name, EXAMPLE_JOB_ID)]
    if name == "checkpoint_id":
        return [own.get(name, EXAMPLE_CHECKPOINT_ID), *FIRST_SAVE_IDS]
    if name == "request_id":
        return [own.get(name, EXAMPLE_REQUEST_ID)]
    return []


def request_examples(route: Route) -> dict[str, Any]:
    """The media type's ``examples`` of ``route``'s JSON request body (empty when it has
    none): its executed body, then its other examples."""
    out: dict[str, Any] = {}
    if route.executed_body is not None:
        out["executed"] = {"summary": "A body the service executes on the example job",
                           "value": route.executed_body}
    out.update({example.name: {"summary": example.summary, "value": example.value}
                for example in route.examples})
    return out


def _path_params(route: Route) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "in": "path",
            "required": True,
            "description": _DESCRIPTIONS.get(name, name),
            "schema": {"type": "string", "minLength": 1, "examples": param_examples(route, name)},
        }
        for name in _PARAM.findall(PREFIX_TEMPLATE + route.path)
    ]


def _query_params(route: Route) -> list[dict[str, Any]]:
    schemas: dict[str, dict[str, Any]] = {
        "status": {"type": "string"},
        "max_events": {"type": "integer", "minimum": 1, "default": DEFAULT_MAX_EVENTS,
                       "description": f"Capped at {MAX_EVENTS_CAP}."},
        "cursor": {"type": "string"},
    }
    return [
        {"name": q, "in": "query", "required": False, "schema": schemas[q]} for q in route.query
    ]


def _header_params(route: Route, profile: Profile) -> list[dict[str, Any]]:
    """The proposed ``Idempotency-Key`` of a data-plane POST (optional: a call without one
    runs as in the current profile): 1 to MAX_KEY_CHARS visible ASCII characters, no blanks
    (HTTP trims them at a header's ends, so a key with them could not repeat byte for
    byte); the fake refuses anything else with 400."""
    if profile != "proposed" or not route.keyed:
        return []
    return [{
        "name": IDEMPOTENCY_KEY_HEADER, "in": "header", "required": False,
        "description": "Proposed: a repeat with the same key, method, path and body runs nothing "
                       "again and answers the first answer; another body answers 409 "
                       "idempotency_conflict (clauses IDEM-KEY-1..5).",
        "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS, "pattern": "^[!-~]+$"},
    }]


def _request_body(route: Route, components: dict[str, Any]) -> dict[str, Any] | None:
    """The operation's request body, with the examples its row gives it (an octet body's:
    its sample frame)."""
    body = _body_schema(route, components)
    examples = request_examples(route)
    sample = sample_bodies().get(route.name)
    if sample is not None:
        examples["sample"] = {"summary": "A sample body built by the kit's codec", "value": sample}
    if body is not None and examples:
        next(iter(body["content"].values()))["examples"] = examples
    return body


def _body_schema(route: Route, components: dict[str, Any]) -> dict[str, Any] | None:
    if route.body == "none":
        return None
    if route.body == "json":
        assert route.request_model is not None
        schema = schema_ref(route.request_model, components)
        return {"required": body_required(route.request_model),
                "content": {"application/json": {"schema": schema}}}
    if route.body == "octet-json":
        assert route.request_model is not None
        return json_bytes_body(route.request_model, components,
                               "UTF-8 JSON bytes of a generate request, sent as application/octet-stream")
    what = "DSSST1 request chunks" if route.chunked and route.name != "generate" else \
        "A DSSST1 frame or one DSSST1 request chunk"
    return octet_body(route.name, what)


def _error_statuses(route: Route) -> dict[str, str]:
    """The error answers ``route`` can give: 415 only with a body, 409 only on a job (or a
    create that names an existing job), 501 where a target may not implement it."""
    out = dict(ERROR_STATUSES)
    if route.body == "none":
        del out["415"]
    if "{job_id}" not in route.path and route.name != "create_job":
        del out["409"]
    if "{job_id}" in route.path:
        out["412"] = PRECONDITION_FAILED
    if route.name in ("delete_checkpoint", "export_checkpoint", "load") or route.kind != "sync":
        out["501"] = "Not implemented for this target"
    if route.name == "get_request":
        out["410"] = "The result was freed (read to the end, or pushed out by newer unread results)"
    if route.name == "cancel_job":
        out["412"] = "The job ended (terminated or failed): a precondition-style refusal (spec §5.5)"
    return dict(sorted(out.items()))


#: Routes whose success status the spec never names (a create, the submissions, the
#: operation envelope, a poll): spec §3.6 treats only a non-2xx answer as an error, so in the
#: current profile 201 and 202 are successes with the same body as the kit's 200.
ANY_SUCCESS = frozenset({"create_job", "forward_backward", "step", "save", "load", "generate",
                         "generate_stream", "operation", "get_request"})
OTHER_SUCCESSES = ("201", "202")


def _any_success(out: dict[str, Any], ok: dict[str, Any]) -> None:
    """Add 201 and 202 answers carrying the 200's body (beside a 202 already there: either)."""
    body = ok.get("content", {}).get("application/json", {}).get("schema")
    for status in OTHER_SUCCESSES:
        seen = out.get(status)
        if seen is None:
            out[status] = {**ok, "description": "Success (any 2xx is one: spec §3.6)"}
            continue
        other = seen.get("content", {}).get("application/json", {}).get("schema")
        if body is not None and other is not None:
            seen["content"] = {"application/json": {"schema": {"anyOf": [other, body]}}}
            seen["description"] += "; or the final chunk's success (any 2xx is one: spec §3.6)"


def _responses(route: Route, components: dict[str, Any], error: dict[str, Any],
               profile: Profile) -> dict[str, Any]:
    request_id = {"schema": {"type": "string"}, "description": "Request id for support."}
    headers = {REQUEST_ID_HEADER: request_id}
    ok: dict[str, Any] = {"description": "Success", "headers": headers}
    if route.name == "operation":
        ok["content"] = {"application/json": {"schema": operation_answers(components)}}
    elif route.response_model is not None:
        ok["content"] = {"application/json": {"schema": schema_ref(route.response_model, components)}}
    found = links(route, profile)
    if found:
        ok["links"] = found
    out: dict[str, Any] = {str(route.success_status): ok}
    if route.name == "delete_checkpoint":  # spec §5.9: 200/204, no body returned
        ok.pop("content", None)
        ok["description"] = "Deleted: no body (the kit's fake sends {})"
        out["204"] = {"description": "Deleted (no body)", "headers": headers}
    if route.name == "cancel_job":  # spec §5.5: "an idempotent success"
        out["202"] = {**ok, "description": "Cancellation accepted"}
        out["204"] = {"description": "Cancellation accepted (no body)", "headers": headers}
    if route.chunked:
        out["202"] = {
            "description": "A non-final request chunk was accepted (no request_id)",
            "headers": headers,
            "content": {"application/json": {"schema": schema_ref(m.ChunkAccepted, components)}},
        }
    if profile == "current" and route.name in ANY_SUCCESS:
        _any_success(out, ok)
    content = {"application/json": {"schema": error}}
    retry_after = {"schema": {"type": "string"}, "description": "Seconds to wait before retrying."}
    for status, text in _error_statuses(route).items():
        hdrs = {**headers, "Retry-After": retry_after} if status in ("429", "503") else headers
        out[status] = {"description": text, "headers": hdrs, "content": content}
    return out


_INFO = {
    "title": "Cortex Training REST API (contract kit)",
    "version": "1",
    "description": "Generated from contract.routes and contract.models. Rules JSON Schema "
                   "cannot express are named per operation in x-gs-clauses (clause ids, "
                   "`python -m contract clauses`); x-gs-refusals gives the statuses they "
                   "answer a schema-valid request with; x-gs-omitted-operations the routes "
                   "left out, and why.",
}


def _refine_components(components: dict[str, Any]) -> None:
    """Add the result and payload models no route names directly, and state in JSON Schema
    what the models say in validators (discriminated sub-jobs and operations)."""
    for model in RESULT_MODELS:
        schema_ref(model, components)
    refine_sub_job_configs(components)
    refine_operation_envelope(components)
    for payload in m.OPERATION_PAYLOADS.values():
        schema_ref(payload, components)
    relax_dialects(components)
    require_as_clauses(components)


def build_openapi(profile: Profile = "proposed") -> dict[str, Any]:
    """The OpenAPI 3.1 document for ``profile`` (proposed = every route)."""
    components: dict[str, Any] = {}
    error = error_body_schemas(components)
    paths: dict[str, Any] = {}
    for r in routes_for(profile):
        op: dict[str, Any] = {
            "operationId": r.name,
            "summary": r.summary,
            "tags": [r.profile],
            "parameters": _path_params(r) + _query_params(r) + _header_params(r, profile),
            "responses": _responses(r, components, error, profile),
            "x-call-kind": r.kind,
            "x-profile": r.profile,
            **extensions(r),
        }
        if r.needs_states:
            op["x-needs-job-states"] = sorted(r.needs_states)
        body = _request_body(r, components)
        if body is not None:
            op["requestBody"] = body
        paths.setdefault(PREFIX_TEMPLATE + r.path, {})[r.method.lower()] = op
    _refine_components(components)
    what = ("today's documented surface: every form the published spec allows, answers open"
            if profile == "current" else "every route the kit asks for (current + proposed)")
    return {
        "openapi": "3.1.0",
        "info": {**_INFO, "title": f"{_INFO['title']}, profile {profile}",
                 "description": f"Profile {profile}: {what}. {_INFO['description']}"},
        "servers": [{"url": "http://127.0.0.1:8080"}],
        "x-gs-omitted-operations": omitted_operations(),
        "paths": paths,
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {
                "pat": {"type": "http", "scheme": "bearer",
                        "description": "Programmatic access token; also send "
                        "X-Snowflake-Authorization-Token-Type: PROGRAMMATIC_ACCESS_TOKEN."},
            },
        },
        "security": [{"pat": []}, {}],
    }


def render(profile: Profile = "proposed") -> str:
    """The document as stable, sorted JSON text (what the snapshots hold)."""
    return json.dumps(build_openapi(profile), indent=2, sort_keys=True) + "\n"


#: The committed documents: the current profile's (what a server of today is held to) and
#: the proposed one's (every route the kit asks for), each checked for drift by a test.
SNAPSHOTS: dict[Profile, str] = {"current": "openapi-current.json", "proposed": "openapi.json"}


__all__ = ["ROUTES", "build_openapi", "render"]
