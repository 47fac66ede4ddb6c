"""verl's nested batches made dense before they are encoded (DSSST1 carries dense tensors).

verl's Arctic adapter turns its jagged ``input_ids`` into the dense layout the service
reads: each row's prompt left-padded to the batch's longest prompt, its response
right-padded to the longest response, ``pad_token_id`` in the gaps, the widths sent as
``meta.max_prompt_len``/``meta.max_response_len``. It passes ``prompts`` and ``responses``
on as they are: ``torch.jagged`` nested tensors. Here they get the layout the adapter gave
``input_ids`` (prompts left-padded, responses right-padded to those widths), so each row
of ``responses`` is the last ``max_response_len`` columns of its ``input_ids`` row.

Any other nested tensor of the batch (or a prompts/responses whose layout does not fit
``input_ids``) has no layout the client could know: it is refused before a byte is sent,
with :class:`NestedTensorRefused` naming the field and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from client.errors import NestedTensorRefused

#: The nested fields the client pads itself, and the side their padding goes on.
PAD_SIDE: dict[str, str] = {"prompts": "left", "responses": "right"}
#: The ``meta`` key holding each padded field's width (verl's adapter sends both).
WIDTH_KEY: dict[str, str] = {"prompts": "max_prompt_len", "responses": "max_response_len"}
FIX = ("send it dense in the layout of input_ids (torch.nested.to_padded_tensor, or pad each "
       "row as input_ids is padded)")


def is_nested(value: Any) -> bool:
    return bool(getattr(value, "is_nested", False))


def dense_batch(kwargs: Mapping[str, Any], meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """``kwargs`` with a nested ``prompts``/``responses`` padded as verl's adapter pads
    ``input_ids``; unchanged (the same tensors) when nothing in it is nested."""
    nested = [key for key, value in kwargs.items() if is_nested(value)]
    if not nested:
        return dict(kwargs)
    meta = meta if isinstance(meta, Mapping) else {}
    for key in nested:
        if key not in PAD_SIDE:
            raise NestedTensorRefused(
                f"batch field {key!r} is a nested ({kwargs[key].layout}) tensor; the client pads only "
                f"a nested prompts (left) and responses (right), whose layout input_ids fixes: {FIX}",
                field=key)
    pad = meta.get("pad_token_id", 0)
    if not isinstance(pad, int) or isinstance(pad, bool):
        raise NestedTensorRefused(f"meta.pad_token_id {pad!r} is not an integer: the nested batch "
                                  "fields cannot be padded with it", field="pad_token_id")
    out = dict(kwargs)
    for key in nested:
        out[key] = _padded(key, kwargs[key], meta.get(WIDTH_KEY[key]), pad)
    _check_against_input_ids(out, nested)
    return out


def _padded(key: str, value: Any, width: Any, pad: int) -> Any:
    """Rows of ``value`` padded on ``PAD_SIDE[key]`` to ``width`` (the longest row when None)."""
    import torch

    rows = list(value.unbind())
    if any(row.dim() != 1 for row in rows):
        raise NestedTensorRefused(f"nested {key!r} has rows of {rows[0].dim()} dimensions; the client "
                                  f"pads token rows (1-D) only: {FIX}", field=key)
    longest = max((int(row.shape[0]) for row in rows), default=0)
    if width is None:
        width = longest
    if not isinstance(width, int) or isinstance(width, bool) or width < longest:
        raise NestedTensorRefused(f"meta.{WIDTH_KEY[key]} {width!r} is not an integer of at least "
                                  f"{key}'s longest row ({longest})", field=key)
    dense = torch.full((len(rows), width), pad, dtype=value.dtype)
    for i, row in enumerate(rows):
        n = int(row.shape[0])
        if n:
            if PAD_SIDE[key] == "left":
                dense[i, width - n:] = row
            else:
                dense[i, :n] = row
    return dense


def _check_against_input_ids(batch: Mapping[str, Any], padded: list[str]) -> None:
    """The padded fields fit input_ids' dense layout (rows; prompt + response widths), else
    the layout assumed is not the one the batch has."""
    ids = batch.get("input_ids")
    if ids is None:
        return
    if is_nested(ids) or not hasattr(ids, "dim") or ids.dim() != 2:
        raise NestedTensorRefused(f"input_ids must be a dense [batch, seq] tensor beside a nested "
                                  f"{' and '.join(padded)}: {FIX}", field="input_ids")
    rows, seq = (int(d) for d in ids.shape)
    for key in padded:
        if int(batch[key].shape[0]) != rows:
            raise NestedTensorRefused(f"nested {key!r} has {int(batch[key].shape[0])} rows, input_ids {rows}",
                                      field=key)
    if len(padded) == len(PAD_SIDE):
        width = sum(int(batch[key].shape[1]) for key in PAD_SIDE)
        if width != seq:
            raise NestedTensorRefused(
                f"prompts and responses padded to {int(batch['prompts'].shape[1])} + "
                f"{int(batch['responses'].shape[1])} columns, but input_ids has {seq}: pass "
                "meta.max_prompt_len and meta.max_response_len as input_ids was padded", field="input_ids")
