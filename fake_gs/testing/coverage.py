"""Coverage of the contract by a client's tests: which routes, operation types, result
delivery forms, status dialects and error codes the tests exercised, out of all of them.

A route counts once it answered 2xx (a route only ever refused was not exercised), an
operation type once an ``operation`` call of it succeeded, a delivery form once a poll
delivered a result in it, a dialect once a test talked to a fake speaking it, an error
code once the fake answered it. The universes come from ``contract`` (routes, operation
types, error codes) and from the fake's own settings (dialects) and traffic log (forms).
Tallies are plain JSON so pytest-xdist workers can hand theirs to the controller.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contract.errors import ErrorCode
from contract.forms import StatusStyle
from contract.models import OPERATION_TYPES
from contract.routes import Profile, routes_for
from fake_gs.controls.traffic import RESULT_FORMS
from fake_gs.settings import FakeSettings

#: Settings of the fake that choose a dialect (``dialect`` exists once the fake has one).
DIALECT_FIELDS = ("status_style", "dialect")


def dialect_fields() -> dict[str, tuple[str, ...]]:
    """Each dialect setting of the fake and its values, read from the settings' types."""
    try:
        hints = typing.get_type_hints(FakeSettings)
    except (NameError, TypeError):  # an annotation that does not resolve at run time
        hints = {"status_style": StatusStyle}
    return {name: typing.get_args(hints[name]) for name in DIALECT_FIELDS if name in hints}


def dialects_of(settings: FakeSettings) -> set[str]:
    return {f"{name}={getattr(settings, name)}" for name in dialect_fields()}


@dataclass
class Tally:
    """What the tests exercised so far (sets of names; merged across workers)."""

    profiles: set[Profile] = field(default_factory=set)
    routes: set[str] = field(default_factory=set)
    operations: set[str] = field(default_factory=set)
    delivery: set[str] = field(default_factory=set)
    dialects: set[str] = field(default_factory=set)
    codes: set[str] = field(default_factory=set)

    def add_traffic(self, tally: Mapping[str, Any], settings: FakeSettings) -> None:
        """Fold in one account's ``tally`` block from ``GET /_fake/traffic``."""
        routes = tally.get("routes") or {}
        self.routes |= {key.rsplit(" ", 1)[0] for key in routes if key.endswith(" 2xx")}
        self.operations |= set(tally.get("operations") or ())
        self.delivery |= set(tally.get("delivery") or ())
        self.codes |= set(tally.get("codes") or ())
        if routes:
            self.profiles.add(settings.profile)
            self.dialects |= dialects_of(settings)

    def to_json(self) -> dict[str, list[str]]:
        return {name: sorted(getattr(self, name)) for name in self.__dataclass_fields__}

    def merge_json(self, data: Mapping[str, Any]) -> None:
        for name in self.__dataclass_fields__:
            getattr(self, name).update(data.get(name) or ())


def universes(tally: Tally) -> dict[str, tuple[str, ...]]:
    """Everything there is to exercise, per kind."""
    profiles = tally.profiles or {"proposed"}
    routes = sorted({r.name for p in profiles for r in routes_for(p)})
    dialects = sorted(f"{name}={v}" for name, values in dialect_fields().items() for v in values)
    return {
        "routes": tuple(routes),
        "operations": tuple(OPERATION_TYPES),
        "delivery": tuple(RESULT_FORMS),
        "dialects": tuple(dialects),
        "codes": tuple(code.value for code in ErrorCode),
    }


def percent(done: int, total: int) -> float:
    return 100.0 * done / total if total else 100.0


def route_percent(tally: Tally) -> float:
    universe = universes(tally)["routes"]
    return percent(len(tally.routes & set(universe)), len(universe))


LABELS = {"routes": "routes", "operations": "operation types", "delivery": "delivery forms",
          "dialects": "dialects", "codes": "error codes"}


def report(tally: Tally) -> list[str]:
    """The terminal report: one line per kind, then what was exercised and what was not."""
    lines = ["fake_gs coverage of the contract by these tests (routes: answered 2xx)"]
    for kind, universe in universes(tally).items():
        seen = sorted(getattr(tally, kind) & set(universe))
        missing = [name for name in universe if name not in seen]
        pct = percent(len(seen), len(universe))
        lines.append(f"  {LABELS[kind]:<16} {len(seen):>3}/{len(universe):<3} {pct:5.1f}%")
        lines.append(f"      exercised: {', '.join(seen) or '-'}")
        if missing:
            lines.append(f"      not exercised: {', '.join(missing)}")
    return lines
