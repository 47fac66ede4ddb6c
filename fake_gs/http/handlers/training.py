"""Training data plane: forward-backward, forward-no-grad, step, save, load.

Each handler parses the call, hands it to the training backend (``fake_gs.state.training``:
the rules and the work, beside the job state it changes) and answers the request id; a
frame goes through the frame intake first (``frame_requests.submit_frame``).
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from contract.models import LoadRequest, SaveRequest, StepRequest
from fake_gs.chunking.groups import ChunkGroup
from fake_gs.http.handlers.context import Ctx
from fake_gs.http.handlers.frame_requests import submit_frame
from fake_gs.state.records import JobRec, RequestRec
from fake_gs.state.training import Training


def build_forward_backward(ctx: Ctx, job: JobRec, obj: Any, group: ChunkGroup | None) -> RequestRec:
    return Training(ctx.store).forward_backward(job, obj, group)


def build_forward_no_grad(ctx: Ctx, job: JobRec, obj: Any, group: ChunkGroup | None) -> RequestRec:
    return Training(ctx.store).forward_no_grad(job, obj, group)


async def forward_backward(ctx: Ctx) -> Response:
    return await submit_frame(ctx, ctx.job(), build_forward_backward)


async def forward_no_grad(ctx: Ctx) -> Response:
    return await submit_frame(ctx, ctx.job(), build_forward_no_grad)


async def step(ctx: Ctx) -> Response:
    job = ctx.job()
    body = await ctx.json_model(StepRequest)
    return ctx.submitted(job, Training(ctx.store).step(job, body.learning_rate))


async def save(ctx: Ctx) -> Response:
    job = ctx.job()
    body = await ctx.json_model(SaveRequest)
    return ctx.submitted(job, Training(ctx.store).save(job, body))


async def load(ctx: Ctx) -> Response:
    job = ctx.job()
    body = await ctx.json_model(LoadRequest)
    return ctx.submitted(job, Training(ctx.store).load(job, ctx.owner, body))
