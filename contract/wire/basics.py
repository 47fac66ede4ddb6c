"""What every part of the codec shares: its one error type and strict bytes/JSON handling.

Every refusal is a ``WireError``; JSON is written in the one pinned form and read strictly
(no NaN/Infinity, no key named twice), so two readers can never see two different frames.
"""

from __future__ import annotations

import collections
import hashlib
import json
from collections.abc import Iterable
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


#: Bytes copied into the scratch buffer at a time before they are hashed (fits in L2).
_HASH_STAGE = 256 * 1024


def sha256_hex(parts: Iterable[Any]) -> str:
    """The sha256 of ``parts`` (bytes-like) in order, nothing joined.

    A large part is copied into a small scratch buffer a stage at a time and the scratch is
    hashed: hashing a large buffer in place can stall on its reads where a plain copy does
    not, and how often depends on where the buffer's pages happen to lie. The staged hash
    takes the same time wherever they lie; ``benchmarks/bench_upload.py`` prints both side
    by side for its frames.
    """
    hasher = hashlib.sha256()
    scratch: memoryview | None = None
    for part in parts:
        view = memoryview(part).cast("B")
        if len(view) <= _HASH_STAGE:
            hasher.update(view)
            continue
        if scratch is None:
            scratch = memoryview(bytearray(_HASH_STAGE))
        for start in range(0, len(view), _HASH_STAGE):
            piece = view[start : start + _HASH_STAGE]
            stage = scratch[: len(piece)]
            stage[:] = piece
            hasher.update(stage)
    return hasher.hexdigest()
