"""What every handler needs: the call context, bounded body reading, JSON and model
parsing (strict mode included), job lookup with the state check, standard answers."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from contract.errors import ErrorCode, detail_entry
from contract.models import GenerateStreamSubmitResponse, SubmitResponse, unknown_fields
from contract.routes import OCTET, Route
from fake_gs.answers import check as answers
from fake_gs.answers.check import json_response
from fake_gs.answers.forms import Forms
from fake_gs.answers.refusals import ApiError, validation_error
from fake_gs.answers.way_out import AnswerPart, WayOut
from fake_gs.chunking.intake import json_containers
from fake_gs.http.app_state import AppState
from fake_gs.http.body import BodyReader
from fake_gs.ops.traffic import note, note_unknown
from fake_gs.settings import FakeSettings
from fake_gs.state.records import JobRec, RequestRec
from fake_gs.state.store import Store

M = TypeVar("M", bound=BaseModel)

#: Stands for a percent-encoded slash in a path parameter (see middleware.keep_encoded_slashes).
ENCODED_SLASH = "\x00"


@dataclass
class Ctx:
    state: AppState
    request: Request
    route: Route
    owner: str
    body: BodyReader
    extras: dict[str, Any] = field(default_factory=dict)
    #: The running fake's store and settings, and which answer form each answer takes
    #: (``--dialect``; fake_gs.answers.forms).
    store: Store = field(init=False)
    settings: FakeSettings = field(init=False)
    forms: Forms = field(init=False)
    #: The hook chain the answer leaves through (``fake_gs.answers.way_out``).
    way_out: WayOut = field(init=False)

    def __post_init__(self) -> None:
        self.store, self.settings = self.state.store, self.state.settings
        self.forms, self.way_out = self.settings.forms, self.state.way_out

    def param(self, name: str) -> str:
        return str(self.request.path_params[name]).replace(ENCODED_SLASH, "/")

    def body_limit(self) -> int:
        return self.store.rules.body_limit

    def media_type(self) -> str:
        return self.request.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def require_media_type(self, expected: str) -> None:
        if not self.store.rules.checks_content_type:
            return
        got = self.media_type()
        if got != expected:
            raise ApiError(ErrorCode.UNSUPPORTED_MEDIA_TYPE,
                           f"{self.route.name} takes {expected}, got {got or 'no content type'}")

    async def raw_body(self) -> bytearray:
        return await self.body.read(self.body_limit())

    async def octet_body(self) -> bytearray:
        data = await self.raw_body()
        self.require_media_type(OCTET)
        if not data:
            raise ApiError(ErrorCode.MALFORMED_FRAME, "empty body: expected a DSSST1 frame")
        return data

    async def json_object(self, *, octet: bool = False) -> Any:
        """The body parsed as JSON (``{}`` when empty); ``octet`` for generate-stream's bytes."""
        data = await self.raw_body()
        if not data and not octet:
            return {}
        self.require_media_type(OCTET if octet else "application/json")
        self.extras["json_bytes"] = len(data)
        return await parse_json_body(data, self.settings)

    def validate(self, model: type[M], data: Any, loc: tuple[str | int, ...] = ()) -> M:
        try:
            # Strict: a JSON body must match the documented types (no bool for a number,
            # no "5" for an int), as the OpenAPI document generated from these models says.
            obj = model.model_validate(data, strict=True)
        except ValidationError as exc:
            # JSON (and JSON Schema) has one number type: 5.0 is the integer 5.
            whole = integral_floats_as_ints(data)
            try:
                if whole is data:
                    raise exc
                obj = model.model_validate(whole, strict=True)
            except ValidationError as final:
                raise validation_error(final, loc) from None
        if self.settings.strict:
            unknown = unknown_fields(obj, loc)
            if unknown:
                names = ", ".join(".".join(str(p) for p in u) for u in unknown)
                raise ApiError(ErrorCode.UNKNOWN_FIELD, f"unknown field(s): {names}",
                               [detail_entry(u, "unknown field (strict mode)", "extra_forbidden") for u in unknown])
        elif self.state.traffic.enabled:  # reported in the traffic log, not refused
            unknown = unknown_fields(obj, loc)
            if unknown:
                note_unknown(self.request.scope, [".".join(str(p) for p in u) for u in unknown])
        return obj

    def expect(self, **what: Any) -> None:
        """Name the answer's model where the route table cannot (see fake_gs.answers.check)."""
        answers.expect(self.request.scope, **what)

    def note(self, key: str, value: Any) -> None:
        """A fact for this exchange's traffic record (see :mod:`fake_gs.ops.traffic`)."""
        if self.state.traffic.enabled:
            note(self.request.scope, key, value)

    async def json_model(self, model: type[M]) -> M:
        return await self.validated(model, await self.json_object())

    async def validated(self, model: type[M], data: Any, loc: tuple[str | int, ...] = ()) -> M:
        """:meth:`validate`, in a worker thread when the JSON body was large."""
        if self.extras.get("json_bytes", 0) > OFF_LOOP_JSON_BYTES:
            return await run_in_threadpool(self.validate, model, data, loc)
        return self.validate(model, data, loc)

    def job(self, allowed: frozenset[str] | set[str] | None = None) -> JobRec:
        """The caller's job from the path, checked against the states the route needs."""
        job = self.store.table.job_for(self.owner, self.param("job_id"))
        wanted = self.route.needs_states if allowed is None else allowed
        if wanted:
            status = self.store.table.status(job)
            if not self.store.rules.job_serves(status, wanted):
                raise ApiError(ErrorCode.JOB_NOT_RUNNING, f"job {job.public_id} is {status}, not running")
        return job

    def job_status_text(self, status: str) -> str:
        return self.way_out.job_state(status)

    def request_status_text(self, status: str) -> str:
        return self.way_out.request_state(status)

    def submitted(self, job: JobRec, req: RequestRec, count: int | None = None) -> Response:
        """The submission answer; generate-stream's carries the prompt ``count``."""
        answer = SubmitResponse(request_id=req.request_id, job_id=job.public_id) if count is None else \
            GenerateStreamSubmitResponse(request_id=req.request_id, job_id=job.public_id, count=count)
        status = 202 if self.forms.use("success-status") else 200
        return json_response(self.way_out.part(AnswerPart.SUBMIT_ANSWER, answers.render(answer)), status)


def integral_floats_as_ints(data: Any) -> Any:
    """A copy of ``data`` with every float that has no fractional part as an int (JSON
    Schema counts 5.0 as an integer); ``data`` itself when there is none. Iterative (no
    recursion limit to hit): bodies may nest deep."""
    def whole(v: Any) -> bool:
        return isinstance(v, float) and math.isfinite(v) and v.is_integer()

    if whole(data):
        return int(data)
    if not isinstance(data, (dict, list)):
        return data
    root: Any = list(data) if isinstance(data, list) else dict(data)
    found = False
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        for key in range(len(node)) if isinstance(node, list) else list(node):
            value = node[key]
            if whole(value):
                node[key] = int(value)
                found = True
            elif isinstance(value, (dict, list)):
                node[key] = child = list(value) if isinstance(value, list) else dict(value)
                stack.append(child)
    return root if found else data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def json_values(data: bytes | bytearray) -> int:
    """An upper bound of the values (numbers, strings, arrays, objects...) a JSON text
    holds, found without parsing it: each value but the first follows a comma or opens a
    container (commas and brackets in strings count too)."""
    return data.count(b",") + json_containers(data) + 1


#: A JSON body bigger than this is parsed in a worker thread, not on the event loop.
OFF_LOOP_JSON_BYTES = 256 * 1024


async def parse_json_body(data: bytes | bytearray, settings: FakeSettings) -> Any:
    """A request's JSON body parsed under the fake's cost bounds: more values than
    ``max_json_values`` is a 413 naming the bound, before anything is parsed; a large body
    is parsed off the event loop, so the fake keeps answering meanwhile (a 60 MiB float
    array on /step stalled health 9-20 s)."""
    _check_containers(data, settings.max_json_containers)
    values = json_values(data)
    if values > settings.max_json_values:
        raise ApiError(ErrorCode.PAYLOAD_TOO_LARGE,
                       f"body holds about {values} JSON values, over the fake's max_json_values "
                       f"{settings.max_json_values}; refused unparsed (send tensors as DSSST1 frames)")
    if len(data) <= OFF_LOOP_JSON_BYTES:
        return parse_json(data, settings.max_json_containers, finite=False)
    return await run_in_threadpool(partial(parse_json, finite=False), data, settings.max_json_containers)


def _check_containers(data: bytes | bytearray, max_containers: int | None) -> None:
    if max_containers is not None and json_containers(data) > max_containers:
        raise ApiError(ErrorCode.MALFORMED_JSON,
                       f"body holds more than {max_containers} JSON arrays/objects; refused unparsed")


def parse_json(data: bytes | bytearray, max_containers: int | None = None, *, finite: bool = True) -> Any:
    """JSON (never NaN or Infinity); ``finite``: a number past a double (1e309) is refused
    here too, else it is read as infinity for the route's request model to refuse by name
    (``contract.models.RequestBody``)."""
    _check_containers(data, max_containers)
    try:
        return json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float if finite else float)
    except (ValueError, RecursionError) as exc:
        raise ApiError(ErrorCode.MALFORMED_JSON, f"body is not valid UTF-8 JSON: {str(exc)[:200]}") from None
