"""One difference between a recorded answer and its replay: what ``compare`` finds and the
equivalences (the answer forms the spec allows) accept."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Divergence:
    """One difference between the recorded and the new answer of one exchange."""

    field: str
    kind: str
    recorded: Any
    new: Any
    accepted: str | None = None

    def describe(self) -> str:
        return f"{self.field}: {self.kind} differs (recorded {_short(self.recorded)}, new {_short(self.new)})"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
