"""The base of every body model: extras kept, and :func:`unknown_fields` to list them.

Unknown fields are kept, not refused: real clients send extras.
:func:`unknown_fields` lists them so a strict server can refuse them by name, and so the
fake's answer check can refuse an answer field no model declares. Models whose extras are
documented pass-through keys (``training_config``, ``inference_config``, operation
payloads, result metrics) declare ``open_extras = True`` and are never flagged.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

JobType = Literal["training", "sampling", "log_probability"]
CheckpointType = Literal["resumable", "weights-only"]
WeightFormat = Literal["vllm", "hf", "lora"]


class Body(BaseModel):
    """Base: extras allowed (kept in ``model_extra``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    open_extras: ClassVar[bool] = False


def unknown_fields(model: BaseModel, loc: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Locations of fields a model did not declare, recursively (for strict servers)."""
    found: list[tuple[str | int, ...]] = []
    if isinstance(model, Body) and not model.open_extras:
        found.extend(loc + (name,) for name in (model.model_extra or {}))
    for name in type(model).model_fields:
        value = getattr(model, name)
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for index, item in items:
            if isinstance(item, BaseModel):
                where = loc + (name,) if index is None else loc + (name, index)
                found.extend(unknown_fields(item, where))
    return found
