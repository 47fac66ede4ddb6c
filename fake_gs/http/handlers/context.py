"""What every handler needs: the call context (the running fake's parts, the path, the
body), the body parsed and validated (``fake_gs.http.json_body``), the caller's job
checked against the states the route needs (``JobTable.serving_job``), and a state as the
answers spell it. A submission is answered by the way out (``WayOut.submission``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from contract.routes import OCTET, Route
from fake_gs.answers.check import expect, json_response
from fake_gs.http.app_state import AppState
from fake_gs.http.body import BodyReader
from fake_gs.http.json_body import OFF_LOOP_JSON_BYTES, parse_json_body, validate_model
from fake_gs.state.records import JobRec

__all__ = ["ENCODED_SLASH", "Ctx", "Handler", "json_response"]

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

    def __post_init__(self) -> None:
        #: The running fake's store and settings, which answer form each answer takes
        #: (``--dialect``; fake_gs.answers.forms) and the hook chain the answer leaves
        #: through (``fake_gs.answers.way_out``): the app state's, typed by it.
        self.store, self.settings, self.way_out = self.state.store, self.state.settings, self.state.way_out
        self.forms = self.way_out.forms

    def param(self, name: str) -> str:
        return str(self.request.path_params[name]).replace(ENCODED_SLASH, "/")

    def body_limit(self) -> int:
        return self.store.rules.body_limit

    def require_media_type(self, expected: str) -> None:
        self.body.require_media_type(expected, self.route.name, checked=self.store.rules.checks_content_type)

    async def raw_body(self) -> bytearray:
        return await self.body.read(self.body_limit())

    async def no_body(self) -> None:
        """A call spec §5.5 / §5.8 sends with no body is refused when it carries one
        (CANCEL-BODY-2)."""
        data = await self.raw_body()
        if self.store.rules.bodiless_routes_refuse_body:
            self.body.refuse_unwanted(data, self.route.name)

    async def json_object(self, *, octet: bool = False) -> Any:
        """The body parsed as JSON (``{}`` when empty); ``octet`` for generate-stream's bytes."""
        data = await self.raw_body()
        if not data and not octet:
            return {}
        self.require_media_type(OCTET if octet else "application/json")
        self.extras["json_bytes"] = len(data)
        return await parse_json_body(data, self.settings)

    def validate(self, model: type[M], data: Any, loc: tuple[str | int, ...] = ()) -> M:
        """``data`` as ``model`` (strict mode refuses unknown fields; else the traffic log
        reports them)."""
        traffic = self.state.traffic
        on_unknown = (lambda names: traffic.note_unknown(self.request.scope, names)) if traffic.enabled else None
        return validate_model(model, data, loc, strict=self.settings.strict, on_unknown=on_unknown)

    def expect(self, **what: Any) -> None:
        """Name the answer's model where the route table cannot (see fake_gs.answers.check)."""
        expect(self.request.scope, **what)

    def note(self, key: str, value: Any) -> None:
        """A fact for this exchange's traffic record (see :mod:`fake_gs.controls.traffic`)."""
        self.state.traffic.note(self.request.scope, key, value)

    async def json_model(self, model: type[M]) -> M:
        return await self.validated(model, await self.json_object())

    async def validated(self, model: type[M], data: Any, loc: tuple[str | int, ...] = ()) -> M:
        """:meth:`validate`, in a worker thread when the JSON body was large."""
        if self.extras.get("json_bytes", 0) > OFF_LOOP_JSON_BYTES:
            return await run_in_threadpool(self.validate, model, data, loc)
        return self.validate(model, data, loc)

    def job(self, allowed: frozenset[str] | set[str] | None = None) -> JobRec:
        """The caller's job from the path, checked against the states the route needs."""
        wanted = self.route.needs_states if allowed is None else allowed
        return self.store.table.serving_job(self.owner, self.param("job_id"), wanted)

    def job_status_text(self, status: str) -> str:
        return self.way_out.job_state(status)

    def request_status_text(self, status: str) -> str:
        return self.way_out.request_state(status)


#: A route's handler: the call in, the answer out (``fake_gs.http.handlers.HANDLERS``).
Handler = Callable[[Ctx], Awaitable[Response]]
