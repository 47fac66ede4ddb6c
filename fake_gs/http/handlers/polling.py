"""GET /{job_id}/requests/{request_id}: the request status object (spec §6.8, §9.4).

The handler parses the query, asks the request queue (``RequestQueue.begin_poll``, then
``poll``: what the poll shows, the one place it is decided) and renders the page in the
fake's answer forms. A poll of a request that is due but still executing waits briefly
(``poll_wait_s``) so an ``instant`` request is terminal on the first poll after it
completes, without spinning.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from starlette.responses import Response

from contract.models import RequestStatus
from fake_gs.answers import check as answers
from fake_gs.answers import delivery
from fake_gs.answers import forms as dialect
from fake_gs.answers.way_out import AnswerPart
from fake_gs.http.handlers.context import Ctx


def render(status: RequestStatus, result: bytes, events: Sequence[bytes]) -> bytes:
    """A poll answer from its model, result and events: its fields in the model's order,
    the stored result and events (encoded once when the request finished) spliced in at
    theirs, copied once (:func:`fake_gs.answers.check.encode`; what :func:`get_request`
    does, which ``benchmarks/bench_hardening.py`` measures)."""
    return answers.encode(status, {"result": [result], "events": answers.array(events)})


async def get_request(ctx: Ctx) -> Response:
    """Find the job and the request, read the query (its refusal comes after the lookups:
    an unknown request is 404 whatever the query), wait briefly for a due request, take the page the
    request queue decides, and render it in the answer forms (rewrites first, then the
    forms)."""
    job = ctx.job()
    settings, forms, way_out, request_id = ctx.settings, ctx.forms, ctx.way_out, ctx.param("request_id")
    queue, query = ctx.store.queue, ctx.request.query_params
    try:
        max_events = delivery.parse_max_events(query.get("max_events"), uncapped=not ctx.store.rules.max_events_capped,
                                               cap=settings.max_events_cap)
        offset = delivery.decode_cursor(request_id, query.get("cursor"))
    except Exception:
        queue.request_for(job, request_id)  # an unknown request is 404 whatever the query
        raise
    req = queue.request_for(job, request_id)
    waiting = queue.begin_poll(req)
    if waiting is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waiting, settings.poll_wait_s)
    page = queue.poll(job, req, offset, max_events)
    error = way_out.part(AnswerPart.FAILED_REQUEST_ERROR, page.error) if page.error is not None else None
    tail: dict[str, Any] = way_out.part(AnswerPart.POLL_TAIL, {"error": error, "next_cursor": page.cursor})
    status = dialect.request_state(forms, page.status, settings.status_style == "enum")
    created = dialect.timestamp(forms, page.created_at)
    updated = dialect.timestamp(forms, page.updated_at)
    if settings.dialect == "spec":
        tail = dialect.poll(tail)
    elif settings.dialect == "any":
        tail = {**dialect.poll(tail, forms), **forms.extras()}
    answer = RequestStatus(request_id=page.request_id, status=status, created_at=created, updated_at=updated, **tail)
    body = answers.encode(answer, {"result": [page.result], "events": answers.array(page.events)})
    answers.expect(ctx.request.scope, **answers.polled_result(req.op, req.result_form))
    ctx.state.traffic.note(ctx.request.scope, "delivery", req.delivered_as())
    return Response(body, media_type="application/json")
