"""Sampling data plane: generate (frame or chunks), generate-stream (events), log-probs."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from contract.errors import ErrorCode, detail_entry
from contract.limits import SAMPLING_BOUNDS
from contract.models import (
    GenerateRequest,
    GenerateResult,
    LogProbsRequest,
    LogProbsResult,
    StreamDoneEvent,
    StreamResultEvent,
)
from fake_gs.answers import check as answers
from fake_gs.answers.delivery import jsonable
from fake_gs.answers.refusals import ApiError
from fake_gs.answers.way_out import AnswerPart
from fake_gs.chunking.groups import ChunkGroup
from fake_gs.http.handlers.context import Ctx
from fake_gs.http.handlers.frame_requests import submit_frame
from fake_gs.state.records import JobRec, RequestRec, SubJobRec


def sampler(ctx: Ctx, job: JobRec) -> SubJobRec:
    """The sub-job generate runs on: the sampling one; a job without one cannot generate
    (spec §1.1: generation is a sampling call)."""
    subs = job.of_type("sampling")
    if not subs and not ctx.store.rules.generate_needs_sampler:
        subs = job.sub_jobs
    if not subs:
        raise ApiError(ErrorCode.SUB_JOB_NOT_FOUND, f"job {job.public_id} has no sampling sub-job to generate with")
    return subs[0]


def over_bound(name: str, value: int, loc: tuple[str | int, ...]) -> None:
    """400 ``limit_exceeded`` naming the bound (contract.limits.SAMPLING_BOUNDS)."""
    bound = SAMPLING_BOUNDS[name]
    if value > bound:
        raise ApiError(ErrorCode.LIMIT_EXCEEDED, f"{name} is {value}; this server's limit is {bound}",
                       [detail_entry(loc, f"must be <= {bound}", "less_than_equal")])


def _tokens_at_most(item: str | list[int]) -> int:
    """A prompt's token count, or for text its UTF-8 bytes (no tokenizer yields more)."""
    return len(item) if isinstance(item, list) else len(item.encode("utf-8", "surrogatepass")) + 1


def _check_log_probs(request: LogProbsRequest) -> None:
    over_bound("top_k", request.top_k or 0, ("top_k",))
    if request.top_k:
        texts = [*request.prompts, *(request.completions or [])]
        over_bound("top_k_entries", sum(map(_tokens_at_most, texts)) * request.top_k, ("top_k",))


def check_bounds(request: GenerateRequest | LogProbsRequest) -> None:
    """The decided sampling bounds: prompts per call, top_k, max_tokens, n and the work
    they multiply to."""
    over_bound("prompts", len(request.prompts), ("prompts",))
    if isinstance(request, LogProbsRequest):
        _check_log_probs(request)
        return
    listed = isinstance(request.sampling_params, list)
    generated = 0
    for i in range(len(request.prompts)):
        sp = request.params_for(i)
        loc: tuple[str | int, ...] = ("sampling_params", i) if listed else ("sampling_params",)
        over_bound("max_tokens", sp.max_tokens, (*loc, "max_tokens"))
        n = (sp.model_extra or {}).get("n")
        n = n if isinstance(n, int) and not isinstance(n, bool) else 1
        over_bound("n", n, (*loc, "n"))
        if isinstance(sp.logprobs, int) and not isinstance(sp.logprobs, bool):
            over_bound("top_k", sp.logprobs, (*loc, "logprobs"))
        generated += sp.max_tokens * max(n, 1)
    over_bound("generated_tokens", generated, ("sampling_params",))


def generate_request(ctx: Ctx, job: JobRec, obj: Any) -> GenerateRequest:
    """Validate a generate object; token prompts must fit the sampler's max_seq_len."""
    request = ctx.validate(GenerateRequest, obj)
    check_bounds(request)
    limit = sampler(ctx, job).max_seq_len
    too_long = [i for i, p in enumerate(request.prompts) if isinstance(p, list) and len(p) >= limit]
    if too_long:
        raise ApiError(ErrorCode.PROMPT_TOO_LONG,
                       f"token prompt(s) {too_long[:10]} have >= max_seq_len ({limit}) tokens",
                       [detail_entry(("prompts", i), f"prompt length must be < {limit}", "too_long")
                        for i in too_long[:50]])
    return request


def _results(ctx: Ctx, job: JobRec, request: GenerateRequest) -> list[dict[str, Any]]:
    results = list(ctx.store.engine.generate(job.job_id, request))
    return ctx.way_out.part(AnswerPart.GENERATE_RESULTS, results) if results else results


def build_generate(ctx: Ctx, job: JobRec, obj: Any, group: ChunkGroup | None) -> RequestRec:
    request = generate_request(ctx, job, obj)

    def work() -> dict[str, Any]:
        return answers.render(GenerateResult(job_id=job.public_id, results=_results(ctx, job, request)))

    return ctx.store.queue.submit(job, "generate", work, force_frame=True, group_id=group.group_id if group else None)


async def generate(ctx: Ctx) -> Response:
    job = ctx.job()
    return await submit_frame(ctx, job, build_generate)


async def generate_stream(ctx: Ctx) -> Response:
    job = ctx.job()
    request = generate_request(ctx, job, await ctx.json_object(octet=True))

    def work() -> list[dict[str, Any]]:
        results = _results(ctx, job, request)
        events = [StreamResultEvent(type="result", index=i, result=jsonable(r)) for i, r in enumerate(results)]
        done = StreamDoneEvent(type="done", completed=len(results), failed=0)
        return [answers.render(event) for event in (*events, done)]

    req = ctx.store.queue.submit(job, "generate_stream", work, stream=True)
    return ctx.submitted(job, req, count=len(request.prompts))


async def log_probs(ctx: Ctx) -> Response:
    job = ctx.job()
    request = await ctx.json_model(LogProbsRequest)
    check_bounds(request)

    def work() -> dict[str, Any]:
        return answers.render(LogProbsResult(job_id=job.public_id, **ctx.store.engine.log_probs(job.job_id, request)))

    return ctx.submitted(job, ctx.store.queue.submit(job, "log_probs", work, force_frame=True))
