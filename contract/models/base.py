"""The base of every body model: extras kept, and :func:`unknown_fields` to list them.

Unknown fields are kept, not refused: real clients send extras.
:func:`unknown_fields` lists them so a strict server can refuse them by name, and so the
fake's answer check can refuse an answer field no model declares. Models whose extras are
documented pass-through keys (``training_config``, ``inference_config``, operation
payloads, result metrics) declare ``open_extras = True`` and are never flagged.
"""

from __future__ import annotations

import functools
import math
import types
import typing
from collections.abc import Iterator
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from contract.limits import MAX_BODY_INT, MIN_BODY_INT

JobType = Literal["training", "sampling", "log_probability"]
CheckpointType = Literal["resumable", "weights-only"]
WeightFormat = Literal["vllm", "hf", "lora"]


class Body(BaseModel):
    """Base: extras allowed (kept in ``model_extra``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    open_extras: ClassVar[bool] = False


#: Bad numbers named in one refusal (the first found; the rest wait for the next try).
_MAX_NUMBER_ERRORS = 20
Loc = tuple[str | int, ...]


#: An integer field of a request body: 64 bits, signed (``contract.limits.MAX_BODY_INT``).
Int64 = Annotated[int, Field(ge=MIN_BODY_INT, le=MAX_BODY_INT)]


def bad_number(value: Any) -> str | None:
    """Why no request body field can take ``value`` (None: one can, or it is no number):
    a number that is not finite as a double (an integer field's own 64-bit bound is
    :data:`Int64`'s)."""
    kind = type(value)
    if kind is int:
        try:
            float(value)
        except OverflowError:  # no str(): 10**5000 has no decimal repr here
            digits = value.bit_length() * 30103 // 100000 + 1
            return f"integer of about {digits} digits is too large for any numeric field"
        return None
    if kind is float and not math.isfinite(value):
        return f"{value!r} is not a finite number"
    return None


def _bad_numbers(data: Any, skip: frozenset[str]) -> list[tuple[Loc, str]]:
    """Every number of ``data`` no request body field can take, by location; the keys in
    ``skip`` hold nested request models, which check their own input. Iterative (a body may
    nest deeper than the recursion limit) and lazy: it holds one iterator per level, never a
    copy of a long array's items."""
    found: list[tuple[Loc, str]] = []
    top: Iterator[tuple[str | int, Any]] = ((k, v) for k, v in data.items() if k not in skip)
    stack: list[tuple[Loc, Iterator[tuple[str | int, Any]]]] = [((), top)]
    while stack and len(found) < _MAX_NUMBER_ERRORS:
        loc, items = stack[-1]
        step = next(items, None)
        if step is None:
            stack.pop()
            continue
        key, value = step
        kind = type(value)
        if kind is dict:
            stack.append((loc + (key,), ((str(k), v) for k, v in value.items())))
        elif kind is list or kind is tuple:
            stack.append((loc + (key,), enumerate(value)))
        else:
            why = bad_number(value)
            if why is not None:
                found.append((loc + (key,), why))
    return found


def _holds_request_models(hint: Any) -> bool:
    """Does a field of this type hold request models only (``M``, ``list[M]``, optional)?
    A union with other types (``M | list[M | None]``) is checked by its parent: pydantic
    would report a nested model's error once per union member."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return len(args) == 1 and _holds_request_models(args[0])
    if typing.get_origin(hint) is list:
        return len(args) == 1 and _holds_request_models(args[0])
    return isinstance(hint, type) and issubclass(hint, RequestBody)


class RequestBody(Body):
    """Base of every request body model: on top of its fields' own types (an integer field
    is an :data:`Int64`), no number anywhere in it, open extras and pass-through dicts
    included, may be past a double's range or non-finite; each one is refused by its
    location (``number_out_of_range``), so a server never meets a number it cannot use."""

    @classmethod
    @functools.cache
    def _nested_model_keys(cls) -> frozenset[str]:
        """Input keys of fields holding request models (by name and by alias)."""
        keys: set[str] = set()
        for name, info in cls.model_fields.items():
            if _holds_request_models(info.annotation):
                keys.add(name)
                if info.alias:
                    keys.add(info.alias)
        return frozenset(keys)

    @model_validator(mode="before")
    @classmethod
    def _numbers_in_range(cls, data: Any) -> Any:
        if type(data) is not dict:
            return data
        found = _bad_numbers(data, cls._nested_model_keys())
        if found:
            raise ValidationError.from_exception_data(cls.__name__, [
                InitErrorDetails(type=PydanticCustomError("number_out_of_range", why), loc=loc,
                                 input="<number>")
                for loc, why in found])
        return data


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
