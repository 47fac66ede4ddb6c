"""The wrapper every service route goes through: auth, fault hook, handler, refusals.

Refusals become the contract's envelope after the unread body is drained (so a client
still sending a large body sees the answer, not a reset). Unexpected exceptions become a
500 ``internal`` envelope and are counted in the admin state dump: tests assert zero.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping, MutableMapping
from typing import Any, cast

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from contract.errors import ErrorCode, general_code
from contract.ids import printable
from contract.models import ErrorEnvelope
from contract.routes import Route
from fake_gs.answers import check as answers
from fake_gs.answers import forms as dialect
from fake_gs.answers.refusals import ApiError, envelope
from fake_gs.controls.faults import FaultAction
from fake_gs.controls.traffic import note
from fake_gs.http.app_state import AppState
from fake_gs.http.auth import authenticate
from fake_gs.http.body import BodyReader
from fake_gs.http.handlers.context import Ctx, Handler, json_response
from fake_gs.http.idempotency import keyed
from fake_gs.http.json_body import parse_json_body

log = logging.getLogger("fake_gs.http.dispatch")

class DropConnection(Exception):
    """Raised to make the middleware cut the connection without a complete answer."""


def _headers(state: AppState, headers: dict[str, str]) -> dict[str, str]:
    if not state.store.rules.retry_after_sent:
        return {k: v for k, v in headers.items() if k.lower() != "retry-after"}
    return headers


def error_answer(state: AppState, found: ErrorEnvelope, status: int,
                 headers: Mapping[str, str] | None = None) -> Response:
    """An error envelope as the answer, through the way out (``fake_gs.answers.way_out``)."""
    return state.way_out.error_envelope(found, status, headers)


def error_response(state: AppState, exc: ApiError) -> Response:
    return state.way_out.error(exc, _headers(state, exc.headers))


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


async def peek_operation_type(state: AppState, body: BodyReader) -> str | None:
    """The ``operation_type`` of an operation call, read before the handler (fault rules
    with ``op``); anything unreadable matches no ``op``, and the handler judges it."""
    try:
        data = await parse_json_body(await body.peek(state.settings.max_body_bytes), state.settings)
    except ApiError:  # not JSON, or over a cost bound: the handler refuses it
        return None
    value = data.get("operation_type") if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


async def decide_fault(state: AppState, route: Route, request: Request, body: BodyReader) -> FaultAction | None:
    faults = state.faults
    if not faults.active:
        return None
    op: str | None = route.name
    if route.name == "operation" and faults.wants_op(route.name):
        op = await peek_operation_type(state, body)
    chunk: tuple[int, int] | None = None
    if route.body == "octet" and faults.wants_chunk(route.name):
        chunk = await peek_chunk_index(state, body)
    job = request.path_params.get("job_id")
    return faults.decide(route.name, request.method, op=op, job=job if isinstance(job, str) else None,
                         chunk=chunk)


async def peek_chunk_index(state: AppState, body: BodyReader) -> tuple[int, int] | None:
    """(chunk_idx, total_chunks) of a request chunk body, read before the handler."""
    from contract import wire

    data = await body.peek(state.settings.max_body_bytes)
    try:
        found = wire.chunk_descriptor(cast(bytes, data))  # any byte buffer; no copy
    except wire.WireError:
        return None
    if found is None or found[0] != "request":
        return None
    idx, total = found[1].get("chunk_idx"), found[1].get("total_chunks")
    return (idx, total) if isinstance(idx, int) and isinstance(total, int) else None


def path_job_key(state: AppState, request: Request, owner: str) -> str | None:
    """The key of the caller's job the path names (job ids are per account), or None."""
    job_id = request.path_params.get("job_id")
    return state.store.table.key_for(owner, job_id) if isinstance(job_id, str) else None


async def apply_fault(state: AppState, action: FaultAction, body: BodyReader, job_key: str | None) -> Response | None:
    """Act on a fired rule before the handler runs; a response means "answer this instead"."""
    if action.delay_s > 0:
        await asyncio.sleep(action.delay_s)
    if action.lose_group and job_key is not None:
        lost = state.store.chunk_groups.lose(job_key)
        log.info("fault: forgot %d open chunk group(s) of job %s", lost, job_key)
    if action.drop:
        await body.drain()
        raise DropConnection()
    if action.status is None:
        return None
    await body.drain()
    code = action.code or general_code(action.status)
    headers: dict[str, str] = {}
    if action.retry_after is not None:
        headers["retry-after"] = _seconds(action.retry_after)
    elif action.status in (429, 503):
        headers["retry-after"] = "1"
    return json_response(envelope(code, action.message or "injected fault"), action.status,
                         _headers(state, headers))


def guarded(state: AppState, route: Route | None, response: Response, scope: MutableMapping[str, Any]
            ) -> Response:
    """The answer check (:mod:`fake_gs.answers.check`) where it is on: ``response``, or the 500
    that replaces an answer that does not validate (counted as an internal error).
    ``route`` is None for the answers no contract route gives (the router's 404/405)."""
    if not state.way_out.checks_answers:
        return response
    checked = answers.checked(route, response, scope)
    if checked is not response:
        with state.store.lock:
            state.store.internal_errors += 1
    return checked


def make_endpoint(state: AppState, route: Route, handler: Handler) -> Callable[[Request], Coroutine[Any, Any, Response]]:
    async def endpoint(request: Request) -> Response:
        response = await serve(state, route, handler, request)
        if state.settings.dialect == "any" and route.name != "get_request":
            response = dialect.decorate(state.settings.forms, response)
        return guarded(state, route, response, request.scope)

    endpoint.__name__ = route.name
    return endpoint


async def serve(state: AppState, route: Route, handler: Handler, request: Request) -> Response:
    """One exchange of ``route``: auth, fault hook, handler, and the refusal answers."""
    note(request.scope, "route", route.name)  # one Starlette route serves a path's methods
    body = BodyReader(request, state.settings, state.inflight)
    try:
        owner = body.owner = authenticate(state.settings, state.store.rules, request, minted=state.accounts)
        action = await decide_fault(state, route, request, body)
        if action is not None:
            if action.drop or action.status is not None:
                note(request.scope, "fault", True)  # the answer is the fault's, not the client's doing
            injected = await apply_fault(state, action, body, path_job_key(state, request, owner))
            if injected is not None:
                return injected
        if state.wedged and path_job_key(state, request, owner) in state.wedged:
            raise ApiError(ErrorCode.UNAVAILABLE, "job stopped serving after a malformed frame (bent on purpose)")
        response = await keyed(state, route, request, owner, body,
                               lambda: handler(Ctx(state, request, route, owner, body)))
        if action is not None and action.lose_answer:
            await body.drain()
            note(request.scope, "fault", True)
            log.info("fault: %s %s executed, answer dropped", request.method, printable(request.url.path))
            raise DropConnection()
        return response
    except ApiError as exc:
        await body.drain()
        note(request.scope, "code", str(exc.code))
        if exc.code in (ErrorCode.MALFORMED_FRAME, ErrorCode.LEGACY_PAYLOAD_REFUSED) \
                and state.store.rules.refusal_wedges_job:
            state.wedged.add(str(path_job_key(state, request, owner)))
        return error_response(state, exc)
    except (DropConnection, ClientDisconnect, asyncio.CancelledError):
        raise
    except Exception as exc:
        log.exception("%s %s crashed", request.method, printable(request.url.path))
        with state.store.lock:
            state.store.internal_errors += 1
        await body.drain()
        return json_response(envelope(ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}"), 500)
    finally:
        body.release()
