"""Outermost ASGI layer: the request-id header on every answer, one log line per request,
and a last-resort 500 envelope (also carrying the header) for anything that escapes.

A dropped connection (an injected fault, :class:`DropConnection`) promises a body and
sends none: it is no answer, so the answer check has nothing to judge."""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any
from urllib.parse import unquote

from starlette.requests import ClientDisconnect

from contract.errors import REQUEST_ID_HEADER, ErrorCode
from contract.ids import printable
from contract.redact import scrub_text
from fake_gs.answers import check as answers
from fake_gs.answers.refusals import envelope
from fake_gs.answers.render import render
from fake_gs.controls.traffic import ERROR_BODY_CAP, bearer_of, exchange
from fake_gs.http.app_state import AppState
from fake_gs.http.dispatch import DropConnection, guarded
from fake_gs.http.handlers.context import ENCODED_SLASH

access_log = logging.getLogger("fake_gs.access")
log = logging.getLogger("fake_gs")

Scope = dict[str, Any]
Message = dict[str, Any]


def keep_encoded_slashes(scope: Scope) -> Scope:
    """Let ids contain ``/`` (sent as ``%2F``) without splitting the route path.

    Routing sees decoded paths, so ``checkpoints/a%2Fb:export`` would not match; encoded
    slashes become a placeholder that :meth:`Ctx.param` turns back into ``/``.
    """
    raw = scope.get("raw_path")
    if not raw or (b"%2f" not in raw and b"%2F" not in raw) or b"%00" in raw:
        return scope
    text = raw.decode("latin-1").split("?", 1)[0].replace("%2F", "%00").replace("%2f", "%00")
    return {**scope, "path": unquote(text).replace("\x00", ENCODED_SLASH)}


async def internal_error(state: AppState, scope: Scope, send: Any) -> None:
    """The last-resort 500 envelope, for an exception nothing else answered (built from the
    contract's model, through the answer check like every other answer)."""
    body = bytes(guarded(state, None, answers.internal("internal error"), scope).body)
    await send({"type": "http.response.start", "status": 500,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def smuggling(scope: Scope) -> bool:
    """Both ``Content-Length`` and ``Transfer-Encoding``: two framings a proxy and this
    server may read differently (request smuggling, RFC 9112 §6.1)."""
    names = {name.lower() for name, _ in scope.get("headers", [])}
    return b"content-length" in names and b"transfer-encoding" in names


async def refuse_framing(send: Any, request_id: tuple[bytes, bytes]) -> None:
    """400 and the connection closed (RFC 9112 §6.1): nothing after this request's head is
    read as another request."""
    body = json.dumps(render(envelope(ErrorCode.INVALID_ARGUMENT, "a request may not carry both "
                                      "Content-Length and Transfer-Encoding"))).encode()
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), request_id]})
    await send({"type": "http.response.body", "body": body})


class RequestContextMiddleware:
    def __init__(self, app: Any, state: AppState) -> None:
        self.app = app
        self.state = state
        self.header = REQUEST_ID_HEADER.encode("latin-1")

    def logs(self, scope: Scope) -> bool:
        """Does this exchange go to the traffic log (on, and not an admin call)?"""
        return self.state.traffic.enabled and not str(scope.get("path", "")).startswith("/_fake/")

    def record(self, scope: Scope, status: int, refusal: bytearray, started: float, request_id: str) -> None:
        account = self.state.accounts.label(bearer_of(scope), self.state.settings.tokens)
        self.state.traffic.record(account, exchange(scope, status, bytes(refusal), started, request_id))

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = str(uuid.uuid4())
        if smuggling(scope):
            await refuse_framing(send, (self.header, request_id.encode("latin-1")))
            return
        scope = keep_encoded_slashes(scope)
        started = time.perf_counter()
        status = 0
        # spec §2.4: an answer *may* carry the header; the any dialect leaves it off some.
        add_header = (self.state.store.rules.request_id_header_sent
                      and not self.state.settings.forms.use("request-id-header"))
        refusal = bytearray() if self.logs(scope) else None  # an error answer's first bytes

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if add_header:
                    headers = list(message.get("headers", []))
                    headers.append((self.header, request_id.encode("latin-1")))
                    message = {**message, "headers": headers}
            elif refusal is not None and status >= 400 and len(refusal) < ERROR_BODY_CAP:
                refusal.extend(message.get("body", b"")[: ERROR_BODY_CAP - len(refusal)])
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except DropConnection:
            if status == 0:
                # Promise a body, send none, return: the server cuts the connection.
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-length", b"1024"), (self.header, request_id.encode())]})
                await send({"type": "http.response.body", "body": b"", "more_body": True})
            status = -1
        except ClientDisconnect:
            status = -1
        except Exception:
            log.exception("unhandled error for %s %s", scope.get("method"), self.shown_path(scope, with_query=False))
            with self.state.store.lock:
                self.state.store.internal_errors += 1
            if status == 0:
                await internal_error(self.state, scope, send_with_id)
        finally:
            self.finish(scope, status, refusal, started, request_id)

    def finish(self, scope: Scope, status: int, refusal: bytearray | None, started: float,
               request_id: str) -> None:
        """Count the exchange, log it to the traffic log (when kept) and the access log."""
        store = self.state.store
        with store.lock:
            store.http_requests += 1
        if refusal is not None:
            self.record(scope, status, refusal, started, request_id)
        if access_log.isEnabledFor(logging.INFO):
            access_log.info('%s %s %s %.1fms', scope.get("method"), self.shown_path(scope),
                            status if status >= 0 else "dropped", (time.perf_counter() - started) * 1000)

    def shown_path(self, scope: Scope, *, with_query: bool = True) -> str:
        """The path as a log line shows it. Paths arrive percent-decoded: control characters
        are escaped so a "%0A" cannot forge a line; an export's download token
        and credential-looking query values are scrubbed."""
        query = "?" + scope["query_string"].decode("latin-1") if with_query and scope.get("query_string") else ""
        return printable(scrub_text(str(scope.get("path")) + query, self.state.settings.tokens))
