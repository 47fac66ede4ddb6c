"""A request's JSON body, parsed and validated under the fake's cost bounds.

The border's parsing (the dispatch, the admin API and every handler read bodies through
it): a bound on the values a body may hold before anything is parsed, large bodies
parsed off the event loop, no NaN or Infinity, and a route's request model applied
strictly (no bool for a number, no "5" for an int) with 5.0 read as the integer 5.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from contract.errors import ErrorCode, detail_entry
from contract.models import unknown_fields
from fake_gs.answers.refusals import ApiError, validation_error
from fake_gs.chunking.intake import json_containers
from fake_gs.settings import FakeSettings

M = TypeVar("M", bound=BaseModel)


def validate_model(model: type[M], data: Any, loc: tuple[str | int, ...] = (), *, strict: bool = False,
                   on_unknown: Callable[[list[str]], None] | None = None) -> M:
    """``data`` as ``model`` (400 naming each field that does not fit). Strict: a JSON body
    must match the documented types, as the OpenAPI document generated from these models
    says. ``strict`` (the fake's strict mode): unknown fields are refused too; else they
    are reported to ``on_unknown`` (the traffic log), not refused."""
    try:
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
    if strict:
        unknown = unknown_fields(obj, loc)
        if unknown:
            names = ", ".join(".".join(str(p) for p in u) for u in unknown)
            raise ApiError(ErrorCode.UNKNOWN_FIELD, f"unknown field(s): {names}",
                           [detail_entry(u, "unknown field (strict mode)", "extra_forbidden") for u in unknown])
    elif on_unknown is not None:
        unknown = unknown_fields(obj, loc)
        if unknown:
            on_unknown([".".join(str(p) for p in u) for u in unknown])
    return obj


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
