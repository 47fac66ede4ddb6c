"""The checkpoint routes' backend: list, export (real safetensors bytes behind an opaque
URL token), delete (spec §5.7-§5.9).

Checkpoint ids are opaque keys: never joined into a file-system path, nor (unless a
variation bends it) into a file name.
"""

from __future__ import annotations

from fake_gs.state.records import CheckpointRec, ExportRec, JobRec
from fake_gs.state.store import Store

EXPORT_FILENAME = "model.safetensors"


class Checkpoints:
    """The checkpoint routes over one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def list_checkpoints(self, job: JobRec) -> list[CheckpointRec]:
        with self.store.lock:
            return list(job.checkpoints.values())

    def safetensors_bytes(self, ckpt: CheckpointRec) -> bytes:
        """The checkpoint's weights as a safetensors file (blocking: run it off the event loop)."""
        from safetensors.torch import save

        tensors = self.store.engine.export_tensors(ckpt.snapshot)
        clean = {name: t.detach().cpu().contiguous().clone() for name, t in tensors.items()}
        meta = {"checkpoint_id": ckpt.checkpoint_id, "global_steps": str(ckpt.global_steps), "format": "pt"}
        return bytes(save(clean, metadata=meta))

    def export(self, job: JobRec, checkpoint_id: str) -> tuple[CheckpointRec, str, ExportRec]:
        """Export a checkpoint of ``job``: the checkpoint, its download's URL token and the
        kept export. Blocking (it builds the file): run it off the event loop."""
        table = self.store.table
        ckpt = table.checkpoint(job, checkpoint_id)
        data = self.safetensors_bytes(ckpt)
        # The file name is fixed: a checkpoint id never becomes part of a name or a path
        # (CKPT-PATH-1); bent (``export-name-from-id``), it is derived from the id instead.
        filename = f"{ckpt.checkpoint_id}.safetensors" if self.store.rules.export_name_from_id else EXPORT_FILENAME
        token, rec = table.add_export(data, filename, job.owner)
        return ckpt, token, rec

    def delete(self, job: JobRec, checkpoint_id: str) -> None:
        self.store.table.delete_checkpoint(job, checkpoint_id)
