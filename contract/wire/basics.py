"""What every part of the codec shares: its one error type and strict bytes/JSON handling.

Every refusal is a ``WireError``; JSON is written in the one pinned form and read strictly
(no NaN/Infinity, no key named twice), so two readers can never see two different frames.
"""

from __future__ import annotations

import collections
import json
from typing import Any


class WireError(ValueError):
    """Every refusal of the codec: garbage, limits, unsupported values, bad chunks."""


def json_text(value: Any, what: str) -> str:
    """Compact, order-keeping, strict JSON (the pinned serialisation)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise WireError(f"{what} is not JSON-serialisable: {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise WireError(f"non-standard JSON constant {name} is refused")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Refuse an object naming a key twice, as safetensors does: a parser keeping the first
    and one keeping the last would read two different frames from the same bytes."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        counts = collections.Counter(k for k, _ in pairs)
        dup = next(k for k, n in counts.items() if n > 1)
        raise WireError(f"duplicate key {dup[:80]!r} in a JSON object")
    return obj


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)


def json_value(text: str, what: str) -> Any:
    """Parse strict JSON, mapping every failure (incl. deep nesting) to WireError."""
    try:
        return _DECODER.decode(text)
    except WireError:
        raise
    except (ValueError, RecursionError) as exc:
        raise WireError(f"{what} is not valid JSON: {exc}") from None


def byte_view(data: Any, what: str = "frame") -> memoryview:
    """A flat byte view of ``data`` without copying; WireError for non-bytes input."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"{what} must be bytes, bytearray or memoryview, not {type(data).__name__}")
    try:
        mv = memoryview(data)
        if mv.ndim != 1 or mv.format != "B":
            mv = mv.cast("B")
    except (TypeError, ValueError) as exc:
        raise WireError(f"{what} is not a contiguous byte buffer: {exc}") from None
    return mv


def as_bytes(data: Any) -> bytes:
    """``data`` as ``bytes``, copied only when it is not ``bytes`` already."""
    return data if isinstance(data, bytes) else bytes(data)
