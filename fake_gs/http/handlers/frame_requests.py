"""DSSST1 bodies of the octet routes: one call to the frame intake (``fake_gs.chunking.intake``)
and its answer.

A route supplies a *builder*, the backend's method that validates the decoded frame object
and submits the request; the intake owns decoding, the legacy-payload refusal and every
chunk-group rule (spec §9.3): restart, conflict, missing chunks, at-most-once on replay. It
reads the rules in force from the store (``Rules``), decided when the store was built.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from starlette.responses import Response

from contract.routes import OCTET
from fake_gs.answers.refusals import ApiError
from fake_gs.chunking import intake
from fake_gs.http.handlers.context import Ctx, json_response
from fake_gs.state.backends.training import Training
from fake_gs.state.records import JobRec, RequestRec

#: (job, decoded frame object, chunk group or None) -> submitted request: a backend method.
Build = Callable[[JobRec, Any, intake.ChunkGroup | None], RequestRec]
#: (ctx, job, decoded frame object, chunk group or None) -> submitted request.
Builder = Callable[[Ctx, JobRec, Any, intake.ChunkGroup | None], RequestRec]


async def submit_frame(ctx: Ctx, job: JobRec, builder: Builder) -> Response:
    """:func:`take_frame` for a route that found its job itself."""
    return await take_frame(ctx, partial(builder, ctx), job)


async def take_frame(ctx: Ctx, build: Build, job: JobRec | None = None) -> Response:
    """Hand an octet body to the frame intake: a chunk's acknowledgement, or the request
    ``build`` submitted. The content type is read first (its refusal is answered once the
    body's head is in: an oversized body is 413 first), then the job is found (unless given)."""
    try:
        ctx.require_media_type(OCTET)
        wrong_type = None
    except ApiError as exc:
        wrong_type = exc
    job = ctx.job() if job is None else job
    store, route = ctx.store, ctx.route.name
    taken = await intake.take(intake.Frames(
        groups=store.chunk_groups, rules=store.rules, route=route, job_key=job.job_id, job_id=job.public_id,
        owner=job.owner, body=ctx.body, media_refusal=wrong_type, build=partial(build, job),
        build_unread=partial(Training(store).unread, job, route), original=partial(store.queue.request_for, job)))
    if isinstance(taken, intake.Acknowledged):
        return json_response(taken.answer, status=202)
    return ctx.way_out.submission(taken.request_id, job.public_id)
