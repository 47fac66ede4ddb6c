"""Training data plane: forward-backward, forward-no-grad, step, save, load.

Each handler parses the call, hands it to the training backend (``fake_gs.state.backends.training``:
the rules and the work, beside the job state it changes) and answers the request id; a
frame goes through the frame intake first (``frame_requests.take_frame``), which calls the
backend's method with the decoded frame.
"""

from __future__ import annotations

from starlette.responses import Response

from contract.models import LoadRequest, SaveRequest, StepRequest
from fake_gs.http.handlers.context import Ctx
from fake_gs.http.handlers.frame_requests import take_frame
from fake_gs.state.backends.training import Training


async def forward_backward(ctx: Ctx) -> Response:
    return await take_frame(ctx, Training(ctx.store).forward_backward)


async def forward_no_grad(ctx: Ctx) -> Response:
    return await take_frame(ctx, Training(ctx.store).forward_no_grad)


async def step(ctx: Ctx) -> Response:
    job = ctx.job()
    body = await ctx.json_model(StepRequest)
    req = Training(ctx.store).step(job, body.learning_rate)
    return ctx.way_out.submission(req.request_id, job.public_id)


async def save(ctx: Ctx) -> Response:
    job = ctx.job()
    body = await ctx.json_model(SaveRequest)
    req = Training(ctx.store).save(job, body)
    return ctx.way_out.submission(req.request_id, job.public_id)


async def load(ctx: Ctx) -> Response:
    job = ctx.job()
    body = await ctx.json_model(LoadRequest)
    req = Training(ctx.store).load(job, ctx.owner, body)
    return ctx.way_out.submission(req.request_id, job.public_id)
