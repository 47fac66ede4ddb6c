"""GET /{job_id}/requests/{request_id}: the request status object (spec §6.8, §9.4).

A poll of a request that is due but still executing waits briefly (``poll_wait_s``) so an
``instant`` request is terminal on the first poll after it completes, without spinning.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from starlette.responses import Response

from contract.errors import ErrorCode
from contract.models import RequestStatus
from contract.states import REQUEST_IN_FLIGHT, REQUEST_TERMINAL, RequestState
from fake_gs.answers import check as answers
from fake_gs.answers import forms as dialect
from fake_gs.answers.delivery import decode_cursor, encode_cursor, parse_max_events
from fake_gs.answers.refusals import ApiError
from fake_gs.http.handlers.context import Ctx, dumps
from fake_gs.ops.seams import Bend, Rewrite, Rule
from fake_gs.ops.traffic import result_form
from fake_gs.state import result_retention
from fake_gs.state.records import JobRec, RequestRec, rfc3339


def _page(ctx: Ctx, req: RequestRec, offset: int, max_events: int) -> tuple[list[bytes], str | None]:
    events = req.events_raw or []
    if ctx.settings.seams.bends(Bend.CURSOR_SHIFTS):
        reads = req.cursor_reads[offset] = req.cursor_reads.get(offset, 0) + 1
        offset = min(len(events), offset + reads - 1)
    if ctx.settings.seams.bends(Bend.CURSOR_PAGE_CONSUMED):
        reads = req.cursor_reads[offset] = req.cursor_reads.get(offset, 0) + 1
        if reads > 1:
            return [], None
    size = dialect.page_size(ctx.forms, req.request_id, offset, max_events, len(events) - offset)
    page = events[offset : offset + size]
    end = offset + len(page)
    return page, encode_cursor(req.request_id, end) if end < len(events) else None


def _drain_stream(ctx: Ctx, req: RequestRec, max_events: int) -> list[bytes]:
    count = min(max_events, len(req.stream_events))
    if ctx.settings.seams.bends(Bend.STREAM_EVENTS_REPEATED) and not req.cursor_reads.get(-1):
        req.cursor_reads[-1] = 1
        return [dumps(e) for e in list(req.stream_events)[:count]]
    return [dumps(req.stream_events.popleft()) for _ in range(count)]


def _expired(req: RequestRec) -> ApiError:
    return ApiError(ErrorCode.RESULT_EXPIRED,
                    f"the result of request {req.request_id} was freed (read to the end, or the job's "
                    "unread results passed their cap); it cannot be polled again")


def _done(ctx: Ctx, job: JobRec, req: RequestRec, offset: int, max_events: int
          ) -> tuple[str, bytes, list[bytes], str | None]:
    """A done request's (status, result JSON, events, cursor); frees it once read to the end."""
    if req.expired:
        raise _expired(req)
    if req.events_raw is not None:
        events, cursor = _page(ctx, req, offset, max_events)
        if cursor is None:
            result_retention.read_to_end(ctx.settings, job, req, ctx.store.clock.monotonic())
        return RequestState.DONE, b"null", events, cursor
    if req.stream:
        return RequestState.DONE, b"null", _drain_stream(ctx, req, max_events), None
    raw = req.result_raw if req.result_raw is not None else b"{}"
    if raw == b"{}" and ctx.forms.use("done-result-null", req.request_id):
        raw = b"null"  # spec §6.8: a successful request with no result (the client reads {})
    result_retention.read_to_end(ctx.settings, job, req, ctx.store.clock.monotonic())
    return RequestState.DONE, raw, [], None


def render(status: RequestStatus, result: bytes, events: Sequence[bytes]) -> bytes:
    """The poll answer as bytes, built from the contract's ``RequestStatus``: its fields in
    the model's order, the stored result and events (encoded once when the request
    finished) spliced in at theirs, copied once (:func:`fake_gs.answers.check.encode`)."""
    return answers.encode(status, {"result": [result], "events": answers.array(events)})


def _tail(ctx: Ctx, error: Any, cursor: str | None) -> dict[str, Any]:
    """The poll's error and cursor in the fake's dialect (spec: ``""`` for none), and in
    the any dialect maybe a field no model declares."""
    tail: dict[str, Any] = ctx.settings.seams.rewrite(Rewrite.POLL_TAIL, {"error": error, "next_cursor": cursor})
    if ctx.settings.dialect == "spec":
        return dialect.poll(tail)
    if ctx.settings.dialect == "any":
        return {**dialect.poll(tail, ctx.forms), **ctx.forms.extras()}
    return tail


def view(ctx: Ctx, job: JobRec, req: RequestRec, offset: int, max_events: int) -> bytes:
    with ctx.store.lock:
        status = ctx.store.queue.status(req)
        result, error, events, cursor = b"null", None, [], None
        inflight_empty = ctx.settings.seams.bends(Bend.INFLIGHT_RESULT_EMPTY)
        if inflight_empty and status == RequestState.DONE and req.polls <= 1 and not req.stream:
            status = RequestState.RUNNING  # its first poll shows it in flight, whatever its pace
        if status == RequestState.STREAMING:
            events = _drain_stream(ctx, req, max_events)
            if not req.stream_events:
                status = RequestState.DONE
        elif status == RequestState.DONE:
            status, result, events, cursor = _done(ctx, job, req, offset, max_events)
        elif status == RequestState.FAILED:
            error = ctx.settings.seams.rewrite(Rewrite.FAILED_REQUEST_ERROR, req.error)
        elif status in REQUEST_IN_FLIGHT and (inflight_empty or ctx.forms.use("inflight-result-empty")):
            result = b"{}"  # spec §6.8's own empty form, on a page of a request still in flight
        if status in REQUEST_TERMINAL and req.final_status is None:
            req.final_status = status
            req.updated_at = max(req.updated_at, req.created_at)
        forms = ctx.forms
        head = {"request_id": req.request_id, "status": ctx.request_status_text(status),
                "created_at": dialect.timestamp(forms, req.created_at, rfc3339(req.created_at)),
                "updated_at": dialect.timestamp(forms, req.updated_at, rfc3339(req.updated_at))}
    return render(RequestStatus(**head, **_tail(ctx, error, cursor)), result, events)


async def get_request(ctx: Ctx) -> Response:
    job = ctx.job()
    store = ctx.store
    req = store.queue.request_for(job, ctx.param("request_id"))
    query = ctx.request.query_params
    max_events = parse_max_events(query.get("max_events"), uncapped=not ctx.settings.seams.enforces(Rule.MAX_EVENTS_CAP),
                                  cap=ctx.settings.max_events_cap)
    offset = decode_cursor(req.request_id, query.get("cursor"))
    with store.lock:
        req.polls += 1
        due = req.final_status is None and not req.executed and store.queue.gate_passed(req)
    if due:
        fut = store.queue.waiter(req)
        if fut is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(fut, ctx.settings.poll_wait_s)
    answer = view(ctx, job, req, offset, max_events)
    ctx.expect(**answers.polled_result(req.op, req.result_form))
    ctx.note("delivery", result_form(req))
    return Response(answer, media_type="application/json")
