"""The answer check: every JSON answer a service route gives must validate against the
contract's model for it, or it becomes a 500 and is never sent.

On when ``FakeSettings.validate_answers`` is (the test suite turns it on for every fake it
builds through :data:`ENV`, and :func:`require_in_tests` refuses a fake built there without
it). The model comes from the route table (:func:`contract.routes.answer_model`): errors are
``ErrorEnvelope``, a non-final chunk ``ChunkAccepted``, an operation's answer and a poll's
result are named by the handler through :func:`expect`. A poll's JSON result is checked
against the route's result model; an inline result frame is decoded and its object checked.
Answers of a fake whose rules are bent are not checked: it breaks answers on purpose.

Every answer the fake gives on the contract's paths goes through the check: the route
wrapper's (``fake_gs.http.dispatch.guarded``), the router's own 404/405 (``fake_gs.http.app``) and
the last-resort 500 (``fake_gs.http.middleware``); :func:`checked` takes ``route=None`` for the
answers no contract route gives. The admin API under ``/_fake/`` is the fake's own, not
part of the contract, and is not checked (``fake_gs.http.admin``). A dropped connection
(an injected fault) is no answer at all.

Answers are written here, once the way out's hooks are done with them: a dict or an answer
model as a JSON answer (:func:`json_response`, in the words of :mod:`fake_gs.answers.render`),
or an answer model with pre-encoded results spliced in (:func:`encode`).
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.responses import Response

from contract import models as m
from contract.errors import ErrorCode
from contract.forms import EXTRA_FIELDS
from contract.models import unknown_fields
from contract.routes import ROUTES_BY_NAME, Route, answer_model, result_model
from contract.states import REQUEST_TERMINAL, normalize_request_state
from fake_gs.answers.render import dumps, render

log = logging.getLogger("fake_gs.answers.check")
_ABSENT = object()

#: Set to ``1`` (tests/conftest.py does) to check every fake's answers by default.
ENV = "FAKE_GS_VALIDATE_ANSWERS"
_SCOPE_KEY = "fake_gs.answer"
_JSON = "application/json"
#: Routes whose success may come with no body at all (spec §5.9: none returned; §5.5).
BODILESS = frozenset({"delete_checkpoint", "cancel_job"})


def json_response(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """``obj`` (an answer model, rendered by :func:`render`, or plain JSON data) as a JSON answer."""
    if isinstance(obj, BaseModel):
        obj = render(obj)
    return Response(dumps(obj), status_code=status, headers=dict(headers or {}), media_type="application/json")


def encode(answer: BaseModel, spliced: Mapping[str, Sequence[bytes]] | None = None) -> bytes:
    """``answer`` as the JSON bytes the fake sends: :func:`render`'s fields in the model's
    declaration order. A field named in ``spliced`` is written as the given pieces of
    pre-encoded JSON instead: a stored result, or its events, was encoded once when the
    request finished and is copied once here, never decoded and re-serialised (a page of
    512 ``result_chunk`` events is tens of MiB)."""
    spliced = spliced or {}
    fields = type(answer).model_fields
    if not set(spliced) <= set(fields):
        raise ValueError(f"{type(answer).__name__} has no field(s) {sorted(set(spliced) - set(fields))}")
    body = render(answer)
    parts: list[bytes] = []
    for name, info in fields.items():
        key = info.alias or name
        value = body.pop(key, _ABSENT)
        pieces = spliced[name] if name in spliced else [] if value is _ABSENT else [dumps(value)]
        if pieces:
            parts += (b"," if parts else b"{", dumps(key), b":", *pieces)
    for key, value in body.items():  # extras, after the declared fields as in render()
        parts += (b"," if parts else b"{", dumps(key), b":", dumps(value))
    parts.append(b"}" if parts else b"{}")
    return b"".join(parts)


def array(items: Sequence[bytes]) -> list[bytes]:
    """The pieces of a JSON array whose items are pre-encoded JSON (for :func:`encode`)."""
    pieces = [b"["]
    for index, item in enumerate(items):
        if index:
            pieces.append(b",")
        pieces.append(item)
    pieces.append(b"]")
    return pieces


def on_by_env() -> bool:
    """The ``validate_answers`` default: on when the environment asks for it."""
    return os.environ.get(ENV, "") == "1"


def require_in_tests(validate_answers: bool) -> None:
    """Refuse to build a fake without the check where the environment asks for it (tests)."""
    if on_by_env() and not validate_answers:
        raise ValueError(f"{ENV}=1: every fake built here must check its answers "
                         "(validate_answers=True)")


@dataclass
class Expected:
    """What a handler says its answer is, when the route table alone cannot say."""

    model: type[BaseModel] | None = None
    result: type[BaseModel] | None = None
    inline: bool = False


def expect(scope: MutableMapping[str, Any], **what: Any) -> None:
    """Name this exchange's answer model (``model``), a poll's result model (``result``)
    and whether that result is an inline frame (``inline``)."""
    found = scope.setdefault(_SCOPE_KEY, Expected())
    for name, value in what.items():
        setattr(found, name, value)


def polled_result(op: str, form: str) -> dict[str, Any]:
    """:func:`expect` arguments for a poll of a request whose op is ``op`` (a route name,
    or ``op:<operation_type>``) delivered in ``form`` (json, inline or chunks)."""
    name, _, operation = op.partition(":")
    route = ROUTES_BY_NAME.get("operation" if operation else name)
    model = result_model(route, operation) if route is not None else None
    return {"result": model, "inline": form == "inline"}


def _problems(model: type[BaseModel], data: Any) -> str | None:
    """Why ``data`` is not a ``model`` answer (invalid, or a field no model declares)."""
    try:
        obj = model.model_validate(data, strict=True)
    except ValidationError as exc:
        return f"{model.__name__}: {exc.errors(include_url=False)[:3]}"
    # The any dialect adds fields no model declares, from a reserved list (contract.forms).
    unknown = [u for u in unknown_fields(obj) if u[-1] not in EXTRA_FIELDS]
    if unknown:
        return f"{model.__name__}: undeclared field(s) {['.'.join(map(str, u)) for u in unknown]}"
    return None


def _result_problem(expected: Expected, result: Any) -> str | None:
    """Check a poll's ``result``: null (chunks, streams, nothing yet), or the result."""
    if result is None or expected.result is None:
        return None
    if not expected.inline:
        return _problems(expected.result, result)
    problem = _problems(m.InlineFrame, result)
    if problem is not None:
        return problem
    from contract import wire

    obj = wire.loads(base64.b64decode(result["payload_b64"]))
    return _problems(expected.result, obj)


def _models_for(route: Route | None, status: int, expected: Expected) -> list[type[BaseModel]]:
    """The models the answer may have: one, or for an operation whose type the handler did
    not name (an idempotent replay) any operation answer; without a route, errors only."""
    if status >= 400:
        return [m.ErrorEnvelope]
    if route is None:
        return []
    model = expected.model or answer_model(route)
    if status == 202 and route.chunked:  # a non-final chunk, or (row success-status) the final one
        return [m.ChunkAccepted, *([model] if model is not None else [])]
    if model is not None:
        return [model]
    return list(dict.fromkeys(m.OPERATION_ANSWERS.values())) if route.name == "operation" else []


def problem(route: Route | None, response: Response, scope: MutableMapping[str, Any]) -> str | None:
    """Why ``response`` is not an answer ``route`` may give (``None``: an answer outside
    every route, which can only be an error); None when it is."""
    body = bytes(response.body)
    if response.status_code == 204:
        return "a 204 answer carries a body" if body else None
    if not body and route is not None and route.name in BODILESS and 200 <= response.status_code < 300:
        return None
    if (response.media_type or "").split(";")[0] != _JSON:
        return f"content type {response.media_type!r} is not {_JSON}"
    expected = scope.get(_SCOPE_KEY) or Expected()
    models = _models_for(route, response.status_code, expected)
    if not models:
        return f"no answer model for {_name(route)} (status {response.status_code})"
    data = json.loads(body)
    problems = [_problems(model, data) for model in models]
    found = None if None in problems else "; ".join(str(p) for p in problems)
    if found is None and isinstance(data, dict) and route is not None and route.name == "get_request" \
            and normalize_request_state(data.get("status")) in REQUEST_TERMINAL:
        # A page of a request still in flight may carry any empty form (spec §6.8: {}).
        found = _result_problem(expected, data.get("result"))
    return found


def _name(route: Route | None) -> str:
    return route.name if route is not None else "the router"


def internal(message: str) -> Response:
    """A 500 ``internal`` answer built from the contract's error envelope (in json.dumps'
    default spacing, as these last-resort answers have always been sent)."""
    body = json.dumps(render(m.ErrorEnvelope(code=ErrorCode.INTERNAL.value, message=message))).encode()
    return Response(body, status_code=500, media_type=_JSON)


def checked(route: Route | None, response: Response, scope: MutableMapping[str, Any]) -> Response:
    """``response``, or a 500 ``internal`` envelope when it does not validate."""
    try:
        found = problem(route, response, scope)
    except ValueError as exc:  # not JSON, or a result frame that does not decode
        found = f"unreadable answer: {exc}"
    if found is None:
        return response
    log.error("%s answered %d with an invalid body: %s", _name(route), response.status_code, found)
    return internal(f"invalid answer: {found}"[:2000])
