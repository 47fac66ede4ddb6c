"""How what the state makes looks from outside: the ids it mints, the form a result is kept
in, how it is delivered, whether a cancelled job is seen ``cancelling`` for a moment.

The state asks an :class:`Outward` and never decides these itself; the answer side hands
the store its own (``fake_gs.answers``: the shapes the spec allows). Without one, the
state keeps the kit's own: UUIDs, results as the route built them, the delivery
the settings name, a cancelled job at once ``cancelled``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Container
from typing import Any, Protocol

#: The server's own name for a save: (global steps, the job's checkpoint ids) -> id.
SaveNaming = Callable[[int, Container[str]], str]


class Outward(Protocol):
    """What the state asks about the outside form of what it makes."""

    def job_id(self) -> str:
        """A new job id of the server's own."""

    def request_id(self) -> str:
        """A new request id."""

    def result(self, key: str, value: Any) -> Any:
        """A result as it is kept for every poll of request ``key``."""

    def delivery(self, mode: str, key: str) -> str:
        """How request ``key``'s result is delivered, given the settings' ``mode``."""

    def shows_cancelling(self, job_id: str) -> bool:
        """Whether job ``job_id``, just cancelled, is seen ``cancelling`` for a moment."""

    def page_size(self, request_id: str, offset: int, max_events: int, left: int) -> int:
        """Events of the page a cursor names (``left`` of them are there to send)."""

    def null_for_empty(self, request_id: str) -> bool:
        """Whether a done request with no result shows ``null`` rather than ``{}``."""

    def empty_while_in_flight(self) -> bool:
        """Whether a page of a request still in flight carries the empty result ``{}``."""

    def step_result(self, result: dict[str, Any]) -> dict[str, Any]:
        """A step's result as it is kept (its ``last_lr``'s form)."""

    def save_naming(self, wanted_id: str | None) -> SaveNaming | None:
        """The server's own naming of this save (the caller asked for ``wanted_id``), if it
        names it (spec §6.3: the control plane may drop the caller's id)."""

    def bare_save_result(self) -> bool:
        """Whether a save's result leaves out its path and tag."""


class KitOutward:
    """The kit's own outward form."""

    def job_id(self) -> str:
        return str(uuid.uuid4())

    def request_id(self) -> str:
        return str(uuid.uuid4())

    def result(self, key: str, value: Any) -> Any:
        return value

    def delivery(self, mode: str, key: str) -> str:
        return mode

    def shows_cancelling(self, job_id: str) -> bool:
        return False

    def page_size(self, request_id: str, offset: int, max_events: int, left: int) -> int:
        return min(max_events, left)

    def null_for_empty(self, request_id: str) -> bool:
        return False

    def empty_while_in_flight(self) -> bool:
        return False

    def step_result(self, result: dict[str, Any]) -> dict[str, Any]:
        return result

    def save_naming(self, wanted_id: str | None) -> SaveNaming | None:
        return None

    def bare_save_result(self) -> bool:
        return False


KIT_OUTWARD = KitOutward()
