"""Sampling data plane: generate (frame or chunks), generate-stream (events), log-probs.

Each handler parses the call, hands it to the sampling backend (``fake_gs.state.backends.sampling``:
the bounds, the sampler's rules and the work) and answers the request id; a frame goes
through the frame intake first (``frame_requests.submit_frame``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.responses import Response

from contract.models import GenerateRequest, LogProbsRequest
from fake_gs.answers.way_out import AnswerPart
from fake_gs.http.handlers.context import Ctx
from fake_gs.http.handlers.frame_requests import submit_frame
from fake_gs.state.backends.sampling import Sampling


def shape_results(ctx: Ctx) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """A generate's results as they leave (the answer's hook chain)."""
    return lambda results: ctx.way_out.part(AnswerPart.GENERATE_RESULTS, results)


async def generate(ctx: Ctx) -> Response:
    job = ctx.job()
    return await submit_frame(ctx, job, lambda ctx, job, obj, group: Sampling(ctx.store).generate(
        job, ctx.validate(GenerateRequest, obj), group, shape_results(ctx)))


async def generate_stream(ctx: Ctx) -> Response:
    job = ctx.job()
    request = ctx.validate(GenerateRequest, await ctx.json_object(octet=True))
    req = Sampling(ctx.store).generate_stream(job, request, shape_results(ctx))
    return ctx.way_out.submission(req.request_id, job.public_id, count=len(request.prompts))


async def log_probs(ctx: Ctx) -> Response:
    job = ctx.job()
    request = await ctx.json_model(LogProbsRequest)
    req = Sampling(ctx.store).log_probs(job, request)
    return ctx.way_out.submission(req.request_id, job.public_id)
