"""The words every answer is written in: an answer model rendered as the dict the fake
sends, and JSON as the bytes it sends (``render``, ``dumps``).

Every room that answers uses them (the backends' results, the chunk intake's progress, the
way out, the answer check, result delivery), so they sit apart from the answer check
(:mod:`fake_gs.answers.check`), which writes and checks a whole answer.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def render(answer: BaseModel) -> dict[str, Any]:
    """An answer model as the dict the fake sends: its fields in declaration order, exactly
    those it was given (an omitted optional field stays absent, an explicit None is null);
    values keep their Python types (a result frame's tensors stay tensors)."""
    return answer.model_dump(by_alias=True, exclude_unset=True)


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes, as every answer is sent (NaN and infinities refused)."""
    return _ENCODER.encode(obj).encode("utf-8")
