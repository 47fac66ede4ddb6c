"""Per-clause verdicts from per-test outcomes.

Each test names the clauses it checks; each outcome (passed / failed / skipped) is booked
against them. A clause is red when a test failed on it, green when some test passed it and
none failed on it, skipped otherwise (with the reasons). Under pytest-xdist the outcomes
travel to the controller in ``report.user_properties`` and are booked there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from contract.clauses import AREAS, CLAUSES, Clause, ClauseProfile, for_profile

Outcome = Literal["passed", "failed", "skipped"]
Status = Literal["green", "red", "skipped"]

#: user_properties keys the plugin sets on each test report.
PROP_CLAUSES = "gs_clauses"
PROP_FAILED = "gs_failed_clauses"
PROP_EXAMPLE = "gs_example"


@dataclass
class TestOutcome:
    """One test's outcome; ``failed_clauses`` may name cross-cutting clauses (an envelope
    broken in a validation test) the test was not tagged with: they are booked too."""

    __test__ = False

    nodeid: str
    clauses: tuple[str, ...]
    outcome: Outcome
    failed_clauses: tuple[str, ...] = ()
    skip_reason: str = ""
    example: str = ""
    duration: float = 0.0

    def __post_init__(self) -> None:
        self.clauses = tuple(dict.fromkeys(self.clauses + self.failed_clauses))

    def failed_on(self, cid: str) -> bool:
        """A failure with no clause attribution counts against every clause of the test."""
        return self.outcome == "failed" and (not self.failed_clauses or cid in self.failed_clauses)


@dataclass
class ClauseVerdict:
    id: str
    level: str
    profile: str
    subject: str
    area: str
    text: str
    status: Status
    reason: str = ""
    tests: list[str] = field(default_factory=list)
    examples: list[dict[str, str]] = field(default_factory=list)

    @property
    def must(self) -> bool:
        return self.level == "MUST"


def _verdict(clause: Clause, outcomes: Sequence[TestOutcome], why_absent: str) -> ClauseVerdict:
    mine = [o for o in outcomes if clause.id in o.clauses]

    def verdict(
        status: Status, reason: str = "", examples: list[dict[str, str]] | None = None
    ) -> ClauseVerdict:
        return ClauseVerdict(
            id=clause.id,
            level=clause.level,
            profile=clause.profile,
            subject=clause.subject,
            area=clause.area,
            text=clause.text,
            status=status,
            reason=reason,
            tests=sorted({o.nodeid for o in mine}),
            examples=examples or [],
        )

    failed = [o for o in mine if o.failed_on(clause.id)]
    if failed:
        examples = [{"test": o.nodeid, "text": o.example} for o in failed]
        first = failed[0].example.strip().splitlines()
        return verdict("red", first[0] if first else "failed", examples)
    if any(o.outcome == "passed" for o in mine):
        return verdict("green")
    stopped = [o for o in mine if o.outcome == "failed"]
    if stopped:
        others = sorted({c for o in stopped for c in o.failed_clauses})
        return verdict(
            "skipped", f"not reached: the test stopped at a failure of {', '.join(others)}"
        )
    reasons = sorted({o.skip_reason for o in mine if o.skip_reason})
    if mine:
        return verdict("skipped", "; ".join(reasons) or "skipped")
    return verdict("skipped", why_absent)


@dataclass
class RunResults:
    """Everything the report renders: the run's settings and the verdict of each clause."""

    profile: str
    target: str
    verdicts: list[ClauseVerdict]
    duration_s: float = 0.0
    selected: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    tests: dict[str, int] = field(default_factory=dict)

    def by_status(self, status: Status) -> list[ClauseVerdict]:
        return [v for v in self.verdicts if v.status == status]

    @property
    def ok(self) -> bool:
        """Exit-status rule: every MUST clause is green and no clause is red.

        A skipped SHOULD does not fail a run; a red one does (a counterexample was found).
        """
        return all(v.status == "green" for v in self.verdicts if v.must) and not self.by_status(
            "red"
        )

    def counts(self) -> dict[str, int]:
        out = {"green": 0, "red": 0, "skipped": 0}
        for v in self.verdicts:
            out[v.status] += 1
        return out

    def by_area(self) -> list[tuple[str, str, list[ClauseVerdict]]]:
        groups: list[tuple[str, str, list[ClauseVerdict]]] = []
        for area, title in AREAS.items():
            items = [v for v in self.verdicts if v.area == area]
            if items:
                groups.append((area, title, items))
        return groups

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "target": self.target,
            "duration_s": round(self.duration_s, 2),
            "selected": list(self.selected),
            "settings": self.settings,
            "tests": self.tests,
            "ok": self.ok,
            "counts": self.counts(),
            "verdicts": [asdict(v) for v in self.verdicts],
        }

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResults:
        return cls(
            profile=data["profile"],
            target=data["target"],
            verdicts=[ClauseVerdict(**v) for v in data["verdicts"]],
            duration_s=data.get("duration_s", 0.0),
            selected=tuple(data.get("selected", ())),
            settings=data.get("settings", {}),
            tests=data.get("tests", {}),
        )


class ClauseBook:
    """Outcomes of the run's tests, keyed by node id (last phase wins over earlier)."""

    def __init__(self) -> None:
        self.outcomes: dict[str, TestOutcome] = {}

    def book(self, outcome: TestOutcome) -> None:
        """Merge a phase outcome: failed beats passed beats skipped for one test."""
        seen = self.outcomes.get(outcome.nodeid)
        rank = {"skipped": 0, "passed": 1, "failed": 2}
        if seen is None:
            self.outcomes[outcome.nodeid] = outcome
            return
        if rank[outcome.outcome] > rank[seen.outcome] or (
            outcome.outcome == seen.outcome == "failed" and not seen.example
        ):
            outcome.clauses = tuple(dict.fromkeys(seen.clauses + outcome.clauses))
            outcome.duration += seen.duration
            self.outcomes[outcome.nodeid] = outcome
        else:
            seen.duration += outcome.duration

    def results(
        self,
        profile: ClauseProfile,
        target: str,
        selected: Iterable[str] = (),
        duration_s: float = 0.0,
        settings: dict[str, Any] | None = None,
    ) -> RunResults:
        chosen = tuple(selected)
        clauses = for_profile(profile)
        if chosen:
            clauses = [c for c in clauses if c.id in chosen]
        outcomes = list(self.outcomes.values())
        why = "no property in this run checks it"
        verdicts = [_verdict(c, outcomes, why) for c in clauses]
        tally = {"passed": 0, "failed": 0, "skipped": 0}
        for o in outcomes:
            tally[o.outcome] += 1
        return RunResults(
            profile=profile,
            target=target,
            verdicts=verdicts,
            duration_s=duration_s,
            selected=chosen,
            settings=settings or {},
            tests=tally,
        )


def clause_ids(raw: str | None) -> tuple[str, ...]:
    """Parse ``--gs-clauses A,B`` (prefix wildcards like ``CG-*`` allowed)."""
    if not raw:
        return ()
    out: list[str] = []
    for part in raw.replace(" ", ",").split(","):
        part = part.strip()
        if not part:
            continue
        if part.endswith("*"):
            matches = [cid for cid in CLAUSES if cid.startswith(part[:-1])]
            if not matches:
                raise ValueError(f"no clause matches {part!r}")
            out.extend(matches)
        elif part in CLAUSES:
            out.append(part)
        else:
            raise ValueError(f"unknown clause id {part!r}")
    return tuple(dict.fromkeys(out))
