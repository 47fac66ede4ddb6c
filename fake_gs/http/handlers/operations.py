"""POST /{job_id}/operation: the envelope and payload parsed, the operation route's
backend (``fake_gs.state.backends.operations``: routing hints, each operation's rules and work)
called, and its answer rendered in the fake's answer forms (spec §7).

``forward`` and ``weight-sync`` answer a request id to poll; the rest answer inline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.responses import Response

from contract import models as m
from fake_gs.answers import forms
from fake_gs.answers.render import render
from fake_gs.answers.way_out import AnswerPart
from fake_gs.http.handlers.context import Ctx, json_response
from fake_gs.state.backends.operations import OperationCall, Operations


async def op_forward(ctx: Ctx, backend: Operations, call: OperationCall) -> Response:
    req = await backend.forward(call)
    return ctx.way_out.submission(req.request_id, call.job.public_id)


async def op_weight_sync(ctx: Ctx, backend: Operations, call: OperationCall) -> Response:
    req = backend.weight_sync(call)
    return ctx.way_out.submission(req.request_id, call.job.public_id)


async def op_bootstrap(ctx: Ctx, backend: Operations, call: OperationCall) -> Response:
    result = backend.bootstrap(call)
    if ctx.forms.use("bootstrap-polled"):  # spec §7: "poll if a deployment returns a request id"
        ctx.expect(model=m.SubmitResponse)
        req = backend.submit_answered(call.job, "bootstrap-router-replay", result)
        return ctx.way_out.submission(req.request_id, call.job.public_id)
    return json_response(result)


async def op_discard(ctx: Ctx, backend: Operations, call: OperationCall) -> Response:
    return json_response(backend.discard(call))


async def op_reset_prefix_cache(ctx: Ctx, backend: Operations, call: OperationCall) -> Response:
    return json_response(backend.reset_prefix_cache(call))


async def op_cancel_request(ctx: Ctx, backend: Operations, call: OperationCall) -> Response:
    request_id, cancelled, status = backend.cancel_request(call)
    # No "request_id" key: an operation answer holding one is a request to poll (spec §7).
    return json_response(m.CancelRequestResult(cancelled_request_id=request_id, cancelled=cancelled,
                                               status=ctx.request_status_text(status)))


async def op_tail_logs(ctx: Ctx, backend: Operations, call: OperationCall) -> Response:
    payload = call.payload
    assert isinstance(payload, m.TailLogsPayload)
    spec = ctx.forms.use("log-cursor")
    cursor_in = forms.log_cursor(payload.cursor) if ctx.settings.dialect != "kit" else payload.cursor
    page = backend.tail_logs(call.job, cursor_in, payload.max_lines)
    if spec:
        placing = backend.placing(call.job)
        return json_response(m.TailLogsResult(**forms.log_page(page.entries, page.end, page.eof, placing,
                                                               payload.cursor)))
    answer = render(m.TailLogsResult(entries=page.entries, next_cursor=str(page.end), eof=page.eof))
    return json_response(ctx.way_out.part(AnswerPart.TAIL_LOGS_PAGE, answer))


Answer = Callable[[Ctx, Operations, OperationCall], Awaitable[Response]]
#: Each operation type this server runs -> how its answer is made.
OPERATIONS: dict[str, Answer] = {
    "forward": op_forward,
    "weight-sync": op_weight_sync,
    "bootstrap-router-replay": op_bootstrap,
    "router-replay-discard": op_discard,
    "reset-prefix-cache": op_reset_prefix_cache,
    "cancel-request": op_cancel_request,
    "tail-logs": op_tail_logs,
}


async def operation(ctx: Ctx) -> Response:
    ctx.job(allowed=frozenset())  # 404 before anything else
    env = await ctx.json_model(m.OperationEnvelope)
    op = env.operation_type
    ctx.note("op", op)
    backend = Operations(ctx.store)
    if not backend.admit(op, OPERATIONS):
        return json_response({})
    job = ctx.job(allowed=backend.states(op))
    payload = await ctx.validated(m.OPERATION_PAYLOADS[op], env.payload, ("payload",))
    ctx.expect(model=m.OPERATION_ANSWERS[op])
    return await OPERATIONS[op](ctx, backend, backend.call(job, env, payload))
