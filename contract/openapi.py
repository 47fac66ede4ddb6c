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
from contract.limits import DEFAULT_MAX_EVENTS, MAX_EVENTS_CAP
from contract.routes import PREFIX_TEMPLATE, ROUTES, Profile, Route, routes_for

REF = "#/components/schemas/{model}"
ERROR_STATUSES: dict[str, str] = {
    "400": "Invalid input",
    "401": "Missing or wrong token",
    "404": "Unknown job, request or checkpoint",
    "409": "Conflict: job state or chunk group",
    "413": "Body too large",
    "415": "Wrong content type",
    "429": "Limit reached",
}
_PARAM = re.compile(r"{([a-z_]+)}")
_DESCRIPTIONS: dict[str, str] = {
    "job_id": "Job id (a UUID string; opaque to clients).",
    "request_id": "Request id returned by a scheduling call.",
    "checkpoint_id": "Checkpoint id, e.g. global_step12.",
    "database": "Database name.",
    "schema": "Schema name.",
    "endpoint": "Service endpoint, cortex-training by default.",
}


def _schema_ref(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template=REF, by_alias=True)
    for name, sub in schema.pop("$defs", {}).items():
        components.setdefault(name, sub)
    components.setdefault(model.__name__, schema)
    return {"$ref": REF.format(model=model.__name__)}


def _path_params(path: str) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "in": "path",
            "required": True,
            "description": _DESCRIPTIONS.get(name, name),
            "schema": {"type": "string", "minLength": 1},
        }
        for name in _PARAM.findall(PREFIX_TEMPLATE + path)
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


def _request_body(route: Route, components: dict[str, Any]) -> dict[str, Any] | None:
    if route.body == "none":
        return None
    if route.body == "json":
        assert route.request_model is not None
        schema = _schema_ref(route.request_model, components)
        return {"required": True, "content": {"application/json": {"schema": schema}}}
    description = (
        "UTF-8 JSON bytes of a generate request, sent as application/octet-stream"
        if route.body == "octet-json"
        else "A DSSST1 frame or one DSSST1 request chunk"
    )
    return {
        "required": True,
        "description": description,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }


def _responses(route: Route, components: dict[str, Any]) -> dict[str, Any]:
    headers = {REQUEST_ID_HEADER: {"schema": {"type": "string"}, "description": "Request id for support."}}
    ok: dict[str, Any] = {"description": "Success", "headers": headers}
    if route.name == "operation":
        ok["content"] = {"application/json": {"schema": {"type": "object"}}}
    elif route.response_model is not None:
        ok["content"] = {"application/json": {"schema": _schema_ref(route.response_model, components)}}
    if route.kind in ("async", "stream"):
        ok["links"] = {
            "PollRequest": {
                "operationId": "get_request",
                "parameters": {
                    "job_id": "$response.body#/job_id",
                    "request_id": "$response.body#/request_id",
                },
            }
        }
    if route.name == "create_job":
        ok["links"] = {
            name: {"operationId": name, "parameters": {"job_id": "$response.body#/job_id"}}
            for name in ("get_job", "cancel_job", "get_experiment_run", "list_checkpoints")
        }
    out: dict[str, Any] = {str(route.success_status): ok}
    if route.name == "delete_checkpoint":
        out["204"] = {"description": "Deleted", "headers": headers}
    if route.chunked:
        out["202"] = {
            "description": "A non-final request chunk was accepted (no request_id)",
            "headers": headers,
            "content": {"application/json": {"schema": _schema_ref(m.ChunkAccepted, components)}},
        }
    error = {"application/json": {"schema": _schema_ref(m.ErrorEnvelope, components)}}
    for status, text in ERROR_STATUSES.items():
        out[status] = {"description": text, "headers": headers, "content": error}
    if route.name == "delete_checkpoint" or route.kind != "sync" or route.name == "export_checkpoint":
        out["501"] = {"description": "Not implemented for this target", "headers": headers, "content": error}
    return out


def build_openapi(profile: Profile = "proposed") -> dict[str, Any]:
    """The OpenAPI 3.1 document for ``profile`` (proposed = every route)."""
    components: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for r in routes_for(profile):
        op: dict[str, Any] = {
            "operationId": r.name,
            "summary": r.summary,
            "tags": [r.profile],
            "parameters": _path_params(r.path) + _query_params(r),
            "responses": _responses(r, components),
            "x-call-kind": r.kind,
            "x-profile": r.profile,
        }
        if r.needs_states:
            op["x-needs-job-states"] = sorted(r.needs_states)
        body = _request_body(r, components)
        if body is not None:
            op["requestBody"] = body
        paths.setdefault(PREFIX_TEMPLATE + r.path, {})[r.method.lower()] = op
    for name, model in (("RequestStatus", m.RequestStatus), ("InlineFrame", m.InlineFrame),
                        ("ResultChunkEvent", m.ResultChunkEvent),
                        ("StreamDoneEvent", m.StreamDoneEvent)):
        _schema_ref(model, components)
        assert name in components
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Cortex Training REST API (contract kit)",
            "version": "1",
            "description": "Generated from contract.routes and contract.models.",
        },
        "servers": [{"url": "http://127.0.0.1:8080"}],
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
    """The document as stable, sorted JSON text (what the snapshot holds)."""
    return json.dumps(build_openapi(profile), indent=2, sort_keys=True) + "\n"


__all__ = ["ROUTES", "build_openapi", "render"]
