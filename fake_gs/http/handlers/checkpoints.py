"""Checkpoint list, export (real safetensors bytes behind an opaque URL token), delete.

Checkpoint ids are opaque keys: never joined into a file-system path.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from contract import models as m
from fake_gs.answers import forms as dialect
from fake_gs.answers.forms import Forms
from fake_gs.http.handlers.context import Ctx, json_response
from fake_gs.http.handlers.jobs import no_body
from fake_gs.state.records import CheckpointRec, rfc3339

EXPORT_FILENAME = "model.safetensors"


def checkpoint_view(ckpt: CheckpointRec, forms: Forms) -> m.Checkpoint:
    created = dialect.timestamp(forms, ckpt.created_at, rfc3339(ckpt.created_at))
    return m.Checkpoint(checkpoint_id=ckpt.checkpoint_id, global_steps=ckpt.global_steps,
                        avg_loss=ckpt.avg_loss, created_at=created, checkpoint_type=ckpt.checkpoint_type)


async def list_checkpoints(ctx: Ctx) -> Response:
    job = ctx.job()
    with ctx.store.lock:
        items = [checkpoint_view(c, ctx.forms) for c in job.checkpoints.values()]
    return json_response(m.CheckpointList(checkpoints=items))


def _safetensors_bytes(ctx: Ctx, ckpt: CheckpointRec) -> bytes:
    from safetensors.torch import save

    tensors = ctx.store.engine.export_tensors(ckpt.snapshot)
    clean = {name: t.detach().cpu().contiguous().clone() for name, t in tensors.items()}
    meta = {"checkpoint_id": ckpt.checkpoint_id, "global_steps": str(ckpt.global_steps), "format": "pt"}
    return bytes(save(clean, metadata=meta))


async def export_checkpoint(ctx: Ctx) -> Response:
    job = ctx.job()
    await no_body(ctx)
    ckpt = ctx.store.table.checkpoint(job, ctx.param("checkpoint_id"))
    data = await run_in_threadpool(_safetensors_bytes, ctx, ckpt)
    # The file name is fixed: a checkpoint id never becomes part of a name or a path
    # (CKPT-PATH-1); bent (``export-name-from-id``), it is derived from the id instead.
    filename = f"{ckpt.checkpoint_id}.safetensors" if ctx.store.rules.export_name_from_id \
        else EXPORT_FILENAME
    token, rec = ctx.store.table.add_export(data, filename, job.owner)
    base = str(ctx.request.base_url).rstrip("/")
    files = [m.ExportFile(filename=rec.filename, url=f"{base}/_fake/exports/{token}", size_bytes=len(data))]
    expires = dialect.timestamp(ctx.forms, rec.expires_at, rfc3339(rec.expires_at))
    return json_response(m.ExportResponse(checkpoint_id=ckpt.checkpoint_id, files=files, expires_at=expires))


async def delete_checkpoint(ctx: Ctx) -> Response:
    job = ctx.job()
    await ctx.body.drain()
    ctx.store.table.delete_checkpoint(job, ctx.param("checkpoint_id"))
    if ctx.settings.dialect == "spec":
        return Response(status_code=204)
    return dialect.delete_answer(ctx.forms)


