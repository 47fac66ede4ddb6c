"""Control plane: create, list, get, cancel jobs; capacity; experiment-run names.

Each handler parses the call, calls the control plane's backend (``fake_gs.state.backends.jobs``:
the rules and the work, beside the job table) and renders the answer in the fake's
answer forms.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from contract import models as m
from fake_gs.answers import forms as dialect
from fake_gs.answers.render import render
from fake_gs.answers.way_out import AnswerPart
from fake_gs.http.handlers.context import Ctx, json_response
from fake_gs.state.backends.jobs import JobFacts, Jobs


def job_view(ctx: Ctx, facts: JobFacts) -> m.Job:
    """The job object with every field (spec §5.2), in the configured answer forms."""
    shown = ctx.job_status_text(facts.status)
    reason = ctx.way_out.part(AnswerPart.FAILED_JOB_REASON, facts.reason) if facts.failed else facts.reason
    forms = ctx.forms
    fields: dict[str, Any] = dict(
        job_id=facts.job_id,
        status=shown,
        reason=reason,
        created_at=dialect.timestamp(forms, facts.created_at),
        updated_at=dialect.timestamp(forms, facts.updated_at),
        image_tag=facts.image_tag,
        submitted_by=facts.submitted_by,
        owner_role=facts.owner_role,
        experiment_name=facts.experiment_name,
        sub_jobs=[m.SubJob(status=shown, **sub) for sub in facts.sub_jobs],
    )
    return m.Job(**dialect.job_object(forms, fields))


async def create_job(ctx: Ctx) -> Response:
    body = await ctx.json_model(m.CreateJobRequest)
    job = await run_in_threadpool(Jobs(ctx.store).create, ctx.owner, body, ctx.job_status_text)
    return json_response(*ctx.way_out.created(job.public_id))


async def list_jobs(ctx: Ctx) -> Response:
    """Every job of the caller, rendered off the event loop: a list of big configs takes
    seconds to render, and other accounts' calls go on meanwhile."""
    backend = Jobs(ctx.store)
    jobs = backend.list_jobs(ctx.owner, ctx.request.query_params.get("status"))

    def listed() -> Response:
        entries = [dialect.list_entry(ctx.forms, render(job_view(ctx, backend.facts(j)))) for j in jobs]
        return json_response(m.JobList(jobs=entries))

    return await run_in_threadpool(listed)


async def get_capacity(ctx: Ctx) -> Response:
    cap = ctx.way_out.part(AnswerPart.CAPACITY, render(Jobs(ctx.store).capacity(ctx.owner)))
    cap = dialect.capped(cap, ctx.forms)
    return json_response(dialect.capacity(cap) if ctx.forms.use("capacity-proto3") else cap)


async def get_job(ctx: Ctx) -> Response:
    job = ctx.job()
    return json_response(job_view(ctx, Jobs(ctx.store).facts(job, count_poll=True)))


async def cancel_job(ctx: Ctx) -> Response:
    job = ctx.job()
    await ctx.no_body()
    status = Jobs(ctx.store).cancel(job)
    return dialect.cancel_answer(ctx.forms, job.public_id, ctx.job_status_text(status))


async def get_experiment_run(ctx: Ctx) -> Response:
    return json_response(Jobs.experiment_run(ctx.job()))
