"""Checkpoint list, export, delete: each handler parses the call, calls the checkpoint
routes' backend (``fake_gs.state.backends.checkpoints``) and renders its answer."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from contract import models as m
from fake_gs.answers import forms as dialect
from fake_gs.http.handlers.context import Ctx, json_response
from fake_gs.state.backends.checkpoints import Checkpoints


async def list_checkpoints(ctx: Ctx) -> Response:
    job = ctx.job()
    items = [m.Checkpoint(checkpoint_id=c.checkpoint_id, global_steps=c.global_steps, avg_loss=c.avg_loss,
                          created_at=dialect.timestamp(ctx.forms, c.created_at), checkpoint_type=c.checkpoint_type)
             for c in Checkpoints(ctx.store).list_checkpoints(job)]
    return json_response(m.CheckpointList(checkpoints=items))


async def export_checkpoint(ctx: Ctx) -> Response:
    job = ctx.job()
    await ctx.no_body()
    ckpt, token, rec = await run_in_threadpool(Checkpoints(ctx.store).export, job, ctx.param("checkpoint_id"))
    base = str(ctx.request.base_url).rstrip("/")
    files = [m.ExportFile(filename=rec.filename, url=f"{base}/_fake/exports/{token}", size_bytes=len(rec.data))]
    expires = dialect.timestamp(ctx.forms, rec.expires_at)
    return json_response(m.ExportResponse(checkpoint_id=ckpt.checkpoint_id, files=files, expires_at=expires))


async def delete_checkpoint(ctx: Ctx) -> Response:
    job = ctx.job()
    await ctx.body.drain()
    Checkpoints(ctx.store).delete(job, ctx.param("checkpoint_id"))
    if ctx.settings.dialect == "spec":
        return Response(status_code=204)
    return dialect.delete_answer(ctx.forms)
