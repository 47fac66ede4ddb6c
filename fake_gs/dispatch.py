"""The wrapper every service route goes through: auth, fault hook, handler, refusals.

Refusals become the contract's envelope after the unread body is drained (so a client
still sending a large body sees the answer, not a reset). Unexpected exceptions become a
500 ``internal`` envelope and are counted in the admin state dump: tests assert zero.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response

from contract.errors import ErrorCode, error_body
from contract.routes import Route
from fake_gs.auth import authenticate
from fake_gs.errors import ApiError
from fake_gs.faults import FaultAction
from fake_gs.handlers import Handler
from fake_gs.handlers.common import BodyReader, Ctx, json_response
from fake_gs.state import AppState

log = logging.getLogger("fake_gs.dispatch")

_FAULT_CODES: dict[int, ErrorCode] = {
    400: ErrorCode.INVALID_ARGUMENT,
    401: ErrorCode.UNAUTHENTICATED,
    404: ErrorCode.NOT_FOUND,
    409: ErrorCode.CONFLICT,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
    429: ErrorCode.RATE_LIMITED,
    500: ErrorCode.INTERNAL,
}


class DropConnection(Exception):
    """Raised to make the middleware cut the connection without a complete answer."""


def error_response(state: AppState, exc: ApiError) -> Response:
    if exc.code == ErrorCode.MALFORMED_FRAME and state.mutant("frame-500"):
        return json_response(error_body(ErrorCode.INTERNAL, exc.message), 500)
    if exc.status == 400 and state.mutant("bare-400"):
        return PlainTextResponse("Bad Request", 400)
    return json_response(exc.body(), exc.status, exc.headers)


async def apply_fault(action: FaultAction, body: BodyReader) -> Response | None:
    if action.delay_s > 0:
        await asyncio.sleep(action.delay_s)
    if action.drop:
        await body.drain()
        raise DropConnection()
    if action.status is None:
        return None
    await body.drain()
    code = action.code or _FAULT_CODES.get(action.status, ErrorCode.UNAVAILABLE)
    headers = {"retry-after": "1"} if action.status in (429, 503) else {}
    return json_response(error_body(code, action.message or "injected fault"), action.status, headers)


def make_endpoint(state: AppState, route: Route, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        body = BodyReader(request)
        try:
            owner = authenticate(state.settings, request)
            action = state.faults.decide(route.name, request.method)
            if action is not None:
                injected = await apply_fault(action, body)
                if injected is not None:
                    return injected
            return await handler(Ctx(state, request, route, owner, body))
        except ApiError as exc:
            await body.drain()
            return error_response(state, exc)
        except (DropConnection, ClientDisconnect, asyncio.CancelledError):
            raise
        except Exception as exc:
            log.exception("%s %s crashed", request.method, request.url.path)
            with state.store.lock:
                state.store.internal_errors += 1
            await body.drain()
            return json_response(error_body(ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}"), 500)

    endpoint.__name__ = route.name
    return endpoint
