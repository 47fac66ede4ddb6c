"""DSSST1 bodies of the octet routes: one call to the frame intake (``fake_gs.chunking.intake``)
and its answer.

A route supplies a *builder* that validates the decoded frame object and submits the
request; the intake owns decoding, the legacy-payload refusal and every chunk-group rule
(spec §9.3): restart, conflict, missing chunks, at-most-once on replay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.responses import Response

from contract.models import ForwardBackwardResult
from contract.routes import OCTET
from fake_gs.answers import check as answers
from fake_gs.chunking import intake
from fake_gs.chunking.groups import ChunkGroup
from fake_gs.http.handlers.context import Ctx, json_response
from fake_gs.state.records import JobRec, RequestRec

#: (ctx, job, decoded frame object, chunk group or None) -> submitted request.
Builder = Callable[[Ctx, JobRec, Any, ChunkGroup | None], RequestRec]


def unread_submit(ctx: Ctx, job: JobRec, op: str, group: ChunkGroup | None = None) -> RequestRec:
    """What a fake that waives the payload rules runs instead of a real frame."""

    def work() -> dict[str, Any]:
        ctx.store.note_execution(job, group, forward_backward=op == "forward_backward")
        return answers.render(ForwardBackwardResult(job_id=job.public_id, avg_loss=0.0, metrics={},
                                                    post_process_outputs={}))

    return ctx.store.queue.submit(job, op, work)


async def submit_frame(ctx: Ctx, job: JobRec, builder: Builder) -> Response:
    """Hand an octet body to the frame intake: a chunk's acknowledgement, or the request it submitted."""
    store, route = ctx.store, ctx.route.name
    taken = await intake.take(intake.Frames(
        groups=store.chunk_groups, rules=ctx.settings.seams, route=route, job_key=job.job_id,
        job_id=job.public_id, owner=job.owner, body=ctx.body, body_limit=ctx.body_limit(),
        check_media_type=lambda: ctx.require_media_type(OCTET),
        build=lambda obj, group: builder(ctx, job, obj, group),
        build_unread=lambda group: unread_submit(ctx, job, route, group),
        original=lambda request_id: store.queue.request_for(job, request_id)))
    if isinstance(taken, intake.Acknowledged):
        return json_response(taken.answer, status=202)
    return ctx.submitted(job, taken)
