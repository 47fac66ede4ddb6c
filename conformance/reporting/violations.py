"""Failing a property on a named clause, so the report can tell which promise broke.

A test usually checks several clauses; a plain ``assert`` would turn all of them red. A
:class:`ClauseViolation` names the clause(s) actually broken, and the plugin turns only
those red (the test's other clauses count as not reached).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn, TypeVar

from contract.clauses import validate_ids


class ClauseViolation(AssertionError):
    """An assertion failure attributed to one or more clause ids."""

    def __init__(self, clauses: Iterable[str], message: str) -> None:
        self.clauses = validate_ids(clauses)
        super().__init__(f"[{', '.join(self.clauses)}] {message}")
        self.message = message


Held = TypeVar("Held")


def _violation(cid: str | Iterable[str], message: str, context: tuple[Any, ...]) -> ClauseViolation:
    ids = [cid] if isinstance(cid, str) else list(cid)
    extra = "".join(
        f"\n  {item!r}" if not isinstance(item, str) else f"\n  {item}" for item in context
    )
    return ClauseViolation(ids, message + extra)


def expect(cid: str | Iterable[str], condition: object, message: str, *context: Any) -> None:
    """Raise :class:`ClauseViolation` for ``cid`` unless ``condition`` holds."""
    if not condition:
        raise _violation(cid, message, context)


def present(cid: str | Iterable[str], value: Held | None, message: str, *context: Any) -> Held:
    """``value``, which must be there (else a violation of ``cid``): :func:`expect` for a
    value the property goes on to use, so the type checker knows it is not None."""
    if value is None:
        raise _violation(cid, message, context)
    return value


def fail(cid: str | Iterable[str], message: str, *context: Any) -> NoReturn:
    """Unconditionally fail on ``cid``."""
    raise _violation(cid, message, context)


class Soft:
    """Collect violations of several clauses, then raise once naming all of them.

    Lets one exchange be judged against every clause it bears on, so a server that breaks
    one clause is not also reported for the others.
    """

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def expect(self, cid: str, condition: object, message: str) -> bool:
        if not condition:
            self.problems.append((cid, message))
        return bool(condition)

    def extend(self, cid: str, messages: Iterable[str]) -> None:
        for message in messages:
            self.problems.append((cid, message))

    def check(self) -> None:
        if not self.problems:
            return
        ids = list(dict.fromkeys(cid for cid, _ in self.problems))
        text = "; ".join(f"{cid}: {msg}" for cid, msg in self.problems)
        raise ClauseViolation(ids, text)
