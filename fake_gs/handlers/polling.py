"""GET /{job_id}/requests/{request_id}: the request status object (facts, section 5).

A poll of a request that is due but still executing waits briefly (``poll_wait_s``) so an
``instant`` request is terminal on the first poll after it completes, without spinning.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from starlette.responses import Response

from fake_gs import dialect
from fake_gs.delivery import decode_cursor, encode_cursor, parse_max_events
from fake_gs.handlers.common import Ctx, json_response
from fake_gs.records import RequestRec, rfc3339
from fake_gs.traffic import result_form


def _status(ctx: Ctx, req: RequestRec) -> str:
    """The visible status before stream draining; fixes terminal ones (never change again)."""
    if req.final_status is not None:
        return req.final_status
    if not req.executed:
        return "running" if req.started else "pending"
    if not ctx.store.gate_passed(req):
        return "running"
    if req.error is not None:
        return "failed"
    return "streaming" if req.stream else "done"


def _page(ctx: Ctx, req: RequestRec, offset: int, max_events: int) -> tuple[list[dict[str, Any]], str | None]:
    events = req.events or []
    if ctx.state.mutant("unstable-cursor"):
        reads = req.cursor_reads[offset] = req.cursor_reads.get(offset, 0) + 1
        offset = min(len(events), offset + reads - 1)
    if ctx.state.mutant("cursor-page-consumed"):
        reads = req.cursor_reads[offset] = req.cursor_reads.get(offset, 0) + 1
        if reads > 1:
            return [], None
    page = events[offset : offset + max_events]
    end = offset + len(page)
    return page, encode_cursor(req.request_id, end) if end < len(events) else None


def _drain_stream(ctx: Ctx, req: RequestRec, max_events: int) -> list[dict[str, Any]]:
    count = min(max_events, len(req.stream_events))
    if ctx.state.mutant("stream-events-repeated") and not req.cursor_reads.get(-1):
        req.cursor_reads[-1] = 1
        return list(req.stream_events)[:count]
    return [req.stream_events.popleft() for _ in range(count)]


def view(ctx: Ctx, req: RequestRec, offset: int, max_events: int) -> dict[str, Any]:
    with ctx.store.lock:
        status = _status(ctx, req)
        result: Any = None
        error: Any = None
        events: list[dict[str, Any]] = []
        cursor: str | None = None
        if status == "streaming":
            events = _drain_stream(ctx, req, max_events)
            if not req.stream_events:
                status = "done"
        elif status == "done":
            if req.events is not None:
                events, cursor = _page(ctx, req, offset, max_events)
            elif req.inline is not None:
                result = req.inline
            elif req.stream:
                events = _drain_stream(ctx, req, max_events)
            else:
                result = req.result_json if req.result_json is not None else {}
        elif status == "failed":
            error = "" if ctx.state.mutant("failed-error-empty") else req.error
        if status in ("done", "failed", "cancelled") and req.final_status is None:
            req.final_status = status
            req.updated_at = max(req.updated_at, req.created_at)
        return {
            "request_id": req.request_id,
            "status": ctx.request_status_text(status),
            "created_at": rfc3339(req.created_at),
            "updated_at": rfc3339(req.updated_at),
            "result": result,
            "error": error,
            "events": events,
            "next_cursor": cursor,
        }


async def get_request(ctx: Ctx) -> Response:
    job = ctx.job()
    store = ctx.store
    req = store.request_for(job, ctx.param("request_id"))
    query = ctx.request.query_params
    max_events = parse_max_events(query.get("max_events"), uncapped=ctx.state.mutant("max-events-uncapped"),
                                  cap=ctx.settings.max_events_cap)
    offset = decode_cursor(req.request_id, query.get("cursor"))
    with store.lock:
        req.polls += 1
        due = req.final_status is None and not req.executed and store.gate_passed(req)
    if due:
        fut = store.waiter(req)
        if fut is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(fut, ctx.settings.poll_wait_s)
    answer = view(ctx, req, offset, max_events)
    ctx.note("delivery", result_form(req))
    if answer["next_cursor"] is None and ctx.state.mutant("poll-next-cursor-missing"):
        del answer["next_cursor"]
    return json_response(dialect.poll(answer) if ctx.settings.spec_dialect else answer)
