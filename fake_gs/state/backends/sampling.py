"""The sampling routes' backend: generate (frame or chunks), generate-stream (events), log-probs.

One method per route, next to the request queue it submits to: each checks the decided
sampling bounds (``contract.limits.SAMPLING_BOUNDS``) and the sampler's rules (spec §1.1,
§8.2), asking the store's :class:`~fake_gs.state.rules.Rules` for those a variation may
waive, and submits the engine's work. The handlers (``fake_gs.http.handlers.sampling``)
parse the call, call a method and answer the request id; how a result's list is shaped
on its way out they hand in (``shape_results``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
from fake_gs.answers.delivery import jsonable
from fake_gs.answers.refusals import ApiError
from fake_gs.answers.render import render
from fake_gs.chunking.groups import ChunkGroup
from fake_gs.state.records import JobRec, RequestRec, SubJobRec
from fake_gs.state.store import Store

#: A generate's results on their way out (the answer's hook chain, applied to a non-empty list).
ShapeResults = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


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


class Sampling:
    """The sampling routes over one store (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def sampler(self, job: JobRec) -> SubJobRec:
        """The sub-job generate runs on: the sampling one; a job without one cannot generate
        (spec §1.1: generation is a sampling call)."""
        subs = job.of_type("sampling")
        if not subs and not self.store.rules.generate_needs_sampler:
            subs = job.sub_jobs
        if not subs:
            raise ApiError(ErrorCode.SUB_JOB_NOT_FOUND, f"job {job.public_id} has no sampling sub-job to generate with")
        return subs[0]

    def check_generate(self, job: JobRec, request: GenerateRequest) -> GenerateRequest:
        """A validated generate request within the bounds; token prompts must fit the
        sampler's max_seq_len."""
        check_bounds(request)
        limit = self.sampler(job).max_seq_len
        too_long = [i for i, p in enumerate(request.prompts) if isinstance(p, list) and len(p) >= limit]
        if too_long:
            raise ApiError(ErrorCode.PROMPT_TOO_LONG,
                           f"token prompt(s) {too_long[:10]} have >= max_seq_len ({limit}) tokens",
                           [detail_entry(("prompts", i), f"prompt length must be < {limit}", "too_long")
                            for i in too_long[:50]])
        return request

    def _results(self, job: JobRec, request: GenerateRequest, shape: ShapeResults) -> list[dict[str, Any]]:
        results = list(self.store.engine.generate(job.job_id, request))
        return shape(results) if results else results

    def generate(self, job: JobRec, request: GenerateRequest, group: ChunkGroup | None,
                 shape: ShapeResults) -> RequestRec:
        request = self.check_generate(job, request)

        def work() -> dict[str, Any]:
            return render(GenerateResult(job_id=job.public_id, results=self._results(job, request, shape)))

        return self.store.queue.submit(job, "generate", work, force_frame=True,
                                       group_id=group.group_id if group else None)

    def generate_stream(self, job: JobRec, request: GenerateRequest, shape: ShapeResults) -> RequestRec:
        """A generate whose results are a stream of events, one per prompt, then done."""
        request = self.check_generate(job, request)

        def work() -> list[dict[str, Any]]:
            results = self._results(job, request, shape)
            events = [StreamResultEvent(type="result", index=i, result=jsonable(r)) for i, r in enumerate(results)]
            done = StreamDoneEvent(type="done", completed=len(results), failed=0)
            return [render(event) for event in (*events, done)]

        return self.store.queue.submit(job, "generate_stream", work, stream=True)

    def log_probs(self, job: JobRec, request: LogProbsRequest) -> RequestRec:
        check_bounds(request)
        engine = self.store.engine

        def work() -> dict[str, Any]:
            return render(LogProbsResult(job_id=job.public_id, **engine.log_probs(job.job_id, request)))

        return self.store.queue.submit(job, "log_probs", work, force_frame=True)
