"""``fake-gs --record FILE``: a parity tape of whatever traffic the fake receives.

The outermost ASGI layer: it sees each request's bytes as they arrive and each answer as
it leaves (after the request-id header is added), and writes one tape line per exchange
in the format of ``contract.tape``, so any client run against the fake can be replayed
with ``gs-parity``. Bodies are hashed and outlined as they stream, never buffered past the
outline limit; the fake's tokens are labelled, never written.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import parse_qsl

from contract.tape import BodySink, Exchange, TapeWriter, answer_sink, match_route, split_path
from fake_gs.settings import FakeSettings

Scope = dict[str, Any]
Message = dict[str, Any]


def tape_settings(settings: FakeSettings) -> dict[str, Any]:
    """The fake's settings as a tape's server line: what a replay needs to start the same
    fake (tokens only counted, host/port and the tape path left out)."""
    from dataclasses import asdict

    skip = {"tokens", "admin_token", "host", "port", "record", "record_bodies", "record_budget_mib",
            "log_level", "faults"}
    out = {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
           for k, v in asdict(settings).items() if k not in skip}
    out["startup"], out["latency"] = str(settings.startup), str(settings.latency)
    out["token_count"] = len(settings.tokens)
    return out


def _group(path: str, method: str) -> str:
    """Exchanges are grouped per job (the account-wide routes form one group)."""
    split = split_path(path)
    if split is None:
        return "admin" if path.startswith("/_fake") else "other"
    r = match_route(method, split[1])
    if r is not None and "{job_id}" in r.path:
        return "job " + split[1].lstrip("/").split("/", 1)[0].split(":", 1)[0]
    return "account"


class TapeMiddleware:
    def __init__(self, app: Any, writer: TapeWriter) -> None:
        self.app = app
        self.writer = writer

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request, answer = self.writer.request_sink(), answer_sink()
        head: dict[str, Any] = {"status": 0, "headers": {}, "complete": False}
        started, t0 = time.time(), time.perf_counter()

        async def receive_and_keep() -> Message:
            message: Message = await receive()
            if message["type"] == "http.request":
                request.feed(message.get("body", b""))
            return message

        async def send_and_keep(message: Message) -> None:
            if message["type"] == "http.response.start":
                head["status"] = message["status"]
                head["headers"] = {k.decode("latin-1"): v.decode("latin-1")
                                   for k, v in message.get("headers", [])}
            elif message["type"] == "http.response.body":
                answer.feed(message.get("body", b""))
                head["complete"] = not message.get("more_body", False)
            await send(message)

        try:
            await self.app(scope, receive_and_keep, send_and_keep)
        finally:
            request.end()
            seq = self.writer.next_seq()
            # Outlining a big frame takes a while: off the event loop, which serves on.
            await asyncio.shield(asyncio.to_thread(self._record, scope, request, answer, head, started,
                                                   time.perf_counter() - t0, seq))

    def _record(self, scope: Scope, request: BodySink, answer: BodySink, head: dict[str, Any],
                started: float, seconds: float, seq: int) -> None:
        raw = scope.get("raw_path") or scope["path"].encode("latin-1")
        path = raw.decode("latin-1").split("?", 1)[0]
        method = scope.get("method", "?")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        self.writer.record(Exchange(
            method=method, path=path, query=query, request_headers=headers, request_body=request,
            status=head["status"], response_headers=head["headers"], response_body=answer,
            started=started, seconds=seconds, group=_group(path, method),
            error=None if head["complete"] else "the fake cut the connection before the answer was complete",
        ), seq)


def open_tape(settings: FakeSettings, admin_token: str | None = None) -> TapeWriter:
    """``admin_token``: the admin credential in force (a random one when none was set)."""
    writer = TapeWriter(str(settings.record), "fake-gs", tokens=settings.tokens, meta={"run": "fake-gs"},
                        bodies=settings.record_bodies, budget_mib=settings.record_budget_mib,
                        warn=logging.getLogger("fake_gs").warning)
    writer.add_admin(admin_token or settings.admin_token)
    writer.server("target", {"embedded": True, "settings": tape_settings(settings)})
    return writer
