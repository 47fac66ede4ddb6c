"""``create_app(settings)``: the Starlette app, its router built from ``contract.routes``.

No path is spelled here: each contract route becomes ``PREFIX_TEMPLATE + route.path``
(any database/schema/endpoint names route). Unknown paths and methods answer the error
envelope; every answer carries ``x-snowflake-request-id``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from contract.errors import ErrorCode
from contract.routes import routes_for
from fake_gs.answers.refusals import envelope
from fake_gs.clock import SYSTEM_CLOCK, Clock
from fake_gs.http.admin import admin_routes
from fake_gs.http.app_state import AppState
from fake_gs.http.dispatch import error_answer, guarded, make_endpoint
from fake_gs.http.example_data import hold_example_data
from fake_gs.http.handlers import HANDLERS
from fake_gs.http.handlers.statements import statement_routes
from fake_gs.http.middleware import RequestContextMiddleware
from fake_gs.http.routing import path_routes
from fake_gs.settings import FakeSettings

#: Routes matched first: the hottest ones, whose paths no other route can also match.
HOT_ROUTES = ("get_request",)


def service_routes(state: AppState) -> list[BaseRoute]:
    """One Starlette route per contract path (all its methods, so a 405 lists them all);
    the poll route (most of a client's traffic) goes first: it saves ~20 failed regex
    matches a poll."""
    return path_routes(routes_for(state.settings.profile),
                       lambda spec: make_endpoint(state, spec, HANDLERS[spec.name]), HOT_ROUTES,
                       lambda: state.way_out.allow_one_route)


async def http_error(request: Request, exc: Exception) -> Response:
    """The router's own answers (no route matched the path, or not the method) and any
    other HTTP exception, as the contract's error envelope, through the answer check."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        found = envelope(ErrorCode.METHOD_NOT_ALLOWED, f"{request.method} is not allowed on {request.url.path}")
    elif exc.status_code == 404:
        found = envelope(ErrorCode.ROUTE_NOT_FOUND, f"no route {request.method} {request.url.path}")
    else:
        found = envelope(ErrorCode.INVALID_ARGUMENT, str(exc.detail) or "bad request")
    state: AppState = request.app.state.fake
    return guarded(state, None, error_answer(state, found, exc.status_code, exc.headers), request.scope)


async def sweep_groups(state: AppState) -> None:
    """Expire abandoned chunk groups of every job, also of jobs nobody calls any more
    (LIMIT-EXPIRE-1); uploads in progress sweep their own job on each chunk as well."""
    interval = min(max(state.settings.chunk_group_idle_s / 4, 0.05), 30.0)
    while True:
        await asyncio.sleep(interval)
        try:
            state.store.chunk_groups.expire()
        except Exception:  # never let the sweeper die: log and keep sweeping
            logging.getLogger("fake_gs").exception("chunk group sweep failed")


#: How long stopping waits for a warm-up still importing (torch: seconds when loaded).
WARM_UP_JOIN_S = 60.0


def warm_up(state: AppState) -> None:
    """Build the engine and load what it needs (torch: also what decoding tensor frames
    needs) at start-up, so no call pays seconds of imports (a 3-4 s first call before)."""
    try:
        warm = getattr(state.store.engine, "warm_up", None)
        if warm is not None:
            warm()
    except ImportError as exc:  # a fake without torch still serves everything tensor-free
        logging.getLogger("fake_gs").warning("engine warm-up skipped: %s", exc)
    finally:
        state.warmed_up.set()


def create_app(settings: FakeSettings | None = None, *, clock: Clock = SYSTEM_CLOCK, **overrides: Any) -> Starlette:
    """Build the fake's ASGI app; ``app.state.fake`` is its :class:`AppState`, whose timed
    rules read ``clock``."""
    settings = (settings or FakeSettings()).with_overrides(**overrides) if overrides else (settings or FakeSettings())
    state = AppState.build(settings, clock,
                           seed_resources=hold_example_data if settings.example_data else None)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Imports of seconds go on while the server already answers; a call that needs them
        # before they are done waits for the same import (never a second one).
        warmer = threading.Thread(target=warm_up, args=(state,), name="fake-gs-warm-up", daemon=True)
        warmer.start()
        sweeper = asyncio.get_running_loop().create_task(sweep_groups(state))
        try:
            yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            state.store.close()
            # A stopped fake leaves no import running behind it: a test harness that puts
            # sys.modules back after a run (pytester) would pull torch from under it.
            await asyncio.to_thread(warmer.join, WARM_UP_JOIN_S)
            if tape is not None:
                tape.close()

    middleware = [Middleware(RequestContextMiddleware, state=state)]
    tape = None
    if settings.record:
        from fake_gs.http.recording import TapeMiddleware, open_tape

        tape = open_tape(settings, state.admin_token)
        middleware.insert(0, Middleware(TapeMiddleware, writer=tape))
    app = Starlette(
        routes=[*service_routes(state), *statement_routes(state), *admin_routes(state)],
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False
    app.state.fake = state
    return app
