"""Per-clause verdicts from per-test outcomes.

Each test names the clauses it checks; each outcome (passed / failed / skipped) is booked
against them. A clause of the run's profile is red when a test failed on it, green when some
test passed it and none failed on it, skipped otherwise (with the reason and what would let
this target be judged on it); a clause outside the profile is not-applicable. Under
pytest-xdist the outcomes travel to the controller in ``report.user_properties`` and are
booked there.

The exit-status rule (:attr:`RunResults.ok`): no binding clause is red, and with
``require_all`` no MUST clause is skipped. Against a URL a ``decided`` clause is reported but
not binding: the spec leaves the point open, so a real server may answer otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from conformance.reporting.model import side_label
from contract.clauses import AREAS, CLAUSES, Clause, ClauseProfile, for_profile
from contract.forms import kit_form_judged, why_not_judged

Outcome = Literal["passed", "failed", "skipped"]
Status = Literal["green", "red", "skipped", "not-applicable"]
STATUSES: tuple[Status, ...] = ("green", "red", "skipped", "not-applicable")

#: How a test skipped because shared set-up failed words its skip: the marker, the clause the
#: failure breaks, a colon, one line saying what failed, then the exchange that shows it.
ROOT_CAUSE_MARK = "because of root cause "


def root_cause_skip(cid: str, summary: str, evidence: str = "") -> str:
    """The skip reason of a test that needs set-up which failed on clause ``cid``."""
    line = " ".join(summary.split())
    return f"{ROOT_CAUSE_MARK}{cid}: {line}" + (f"\n\n{evidence.strip()}" if evidence.strip() else "")


def root_cause_of(reason: str) -> tuple[str, str, str] | None:
    """(clause, summary, evidence) of a :func:`root_cause_skip` reason, else None."""
    if not reason.startswith(ROOT_CAUSE_MARK):
        return None
    head, _, evidence = reason.partition("\n\n")
    cid, _, summary = head.removeprefix(ROOT_CAUSE_MARK).partition(": ")
    return cid, summary, evidence


@dataclass(frozen=True)
class RootCause:
    """A failure of shared set-up (the session job not created or not started), reported
    once: the clause it breaks, what failed, the exchange that shows it, and the clauses
    skipped because of it (never red on its account)."""

    clause: str
    summary: str
    evidence: str = ""
    skipped: tuple[str, ...] = ()


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


@dataclass(frozen=True)
class ClauseVerdict(Clause):
    """A clause, as registered, and how the run judged it."""

    status: Status
    reason: str = ""
    tests: list[str] = field(default_factory=list)
    examples: list[dict[str, str]] = field(default_factory=list)
    #: Whether a red here fails the run (False: a decided clause against a URL).
    binding: bool = True
    #: For a skipped clause: the option or target that would let the run judge it.
    enable: str = ""
    #: The clause whose failed set-up this verdict comes from: a clause skipped because of
    #: it, or the red clause that is the root cause itself ("" when neither).
    root_cause: str = ""
    #: The sides the run judged it on (a passive judge may judge one clause on both); empty:
    #: the clause's own subject.
    sides: tuple[str, ...] = ()

    @property
    def side(self) -> str:
        """The side every format marks the clause with (:func:`~conformance.reporting.model.side_label`)."""
        return side_label(self.sides or (self.subject,))

    @property
    def advisory(self) -> bool:
        """A red that fails nothing: a ``decided`` clause (the kit's choice where the spec is
        silent) against a URL, shown apart from the reds so no one reads it as a failure."""
        return self.status == "red" and not self.binding

    @property
    def shown(self) -> str:
        """The word a report shows: the status, or ``advisory`` for an :attr:`advisory` red."""
        return "advisory" if self.advisory else self.status

    @property
    def must(self) -> bool:
        return self.level == "MUST"


#: Skip reasons (as the properties and fixtures word them) -> what would enable the clause,
#: with the options spelled as the plugin spells them (gs-conformance respells them as its
#: own: ``conformance.options.cli_spelling``).
ENABLERS: tuple[tuple[str, str], ...] = (
    (r"second token|--gs-token2", "a second account's PAT: --gs-token2"),
    (r"no token given", "a token: --gs-token or $GS_TOKEN"),
    (r"--gs-max-jobs", "allow more jobs: --gs-max-jobs N"),
    (r"admin API|embedded fake with|embedded fake only",
     "the embedded fake (run without --gs-url): it needs the fake's admin API or one of its settings"),
    (r"delivered this result inline|chunks delivery",
     "a server that delivers this result in chunks (the embedded fake's variants force it)"),
    (r"never seen placing|running when first seen",
     "a job the run creates itself and sees before it is running (no --gs-job-id)"),
    (r"shape engine", "a real model: --gs-engine tiny on the fake, or a real server"),
    (r"not reached", "fix the red clause the property stopped at"),
    (r"no property in this run", "run without --gs-clauses (or name a property that checks it)"),
    (r"refused every candidate", "a server that accepts a request which then fails"),
    (r"working forward operation", "a server whose forward operation works, or the embedded fake"),
)


def enabler(reason: str) -> str:
    """What would let a run judge a clause skipped for ``reason`` ('' when unknown)."""
    hints = [hint for pattern, hint in ENABLERS if re.search(pattern, reason)]
    return "; ".join(dict.fromkeys(hints))


def _verdict(
    clause: Clause,
    outcomes: Sequence[TestOutcome],
    why_absent: str,
    not_applicable: str | None = None,
    url: bool = False,
    causes: dict[str, RootCause] | None = None,
) -> ClauseVerdict:
    mine = [o for o in outcomes if clause.id in o.clauses]

    def verdict(
        status: Status,
        reason: str = "",
        examples: list[dict[str, str]] | None = None,
        root_cause: str = "",
    ) -> ClauseVerdict:
        return ClauseVerdict(
            **asdict(clause),
            status=status,
            reason=reason,
            tests=sorted({o.nodeid for o in mine}),
            examples=examples or [],
            binding=clause.can_fail_a_url or not url,
            enable=enabler(reason) if status == "skipped" and not root_cause else "",
            root_cause=root_cause,
        )

    if not_applicable is not None:
        return verdict("not-applicable", not_applicable)
    cause = (causes or {}).get(clause.id)
    if cause is not None:
        text = f"{cause.summary}\n\n{cause.evidence}".strip()
        return verdict("red", f"root cause: {cause.summary}",
                       [{"test": "(shared set-up)", "text": text}], clause.id)

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
    found = [c for c in map(root_cause_of, reasons) if c is not None]
    if found and not any(o.outcome == "passed" for o in mine):
        cid, summary, _ = found[0]
        return verdict("skipped", f"skipped because of root cause {cid}: {summary}", root_cause=cid)
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
    require_all: bool = False
    #: What a URL run cost the target (conformance.reporting.cost.RunCost.summary); empty on the fake.
    cost: dict[str, Any] = field(default_factory=dict)
    #: Failures of shared set-up, each once (the headline counts these, not their skips).
    root_causes: list[RootCause] = field(default_factory=list)
    #: The run was stopped (Ctrl-C) before every property ran: what it judged is a part.
    interrupted: bool = False

    def by_status(self, status: Status) -> list[ClauseVerdict]:
        return [v for v in self.verdicts if v.status == status]

    def failing(self) -> list[ClauseVerdict]:
        """The clauses that fail the run: binding reds (MUST or SHOULD: a counterexample),
        and with ``require_all`` every skipped MUST."""
        return [
            v
            for v in self.verdicts
            if (v.status == "red" and v.binding)
            or (self.require_all and v.status == "skipped" and v.must)
        ]

    @property
    def judged_nothing(self) -> bool:
        """The run judged no MUST clause it had (or, with none in the run, no clause at all):
        a verdict on nothing is no verdict."""
        musts = [v for v in self.verdicts if v.must and v.status != "not-applicable"]
        pool = musts or [v for v in self.verdicts if v.status != "not-applicable"]
        return not any(v.status in ("green", "red") for v in pool)

    @property
    def ok(self) -> bool:
        """Exit-status rule: nothing :meth:`failing`, no binding root cause, and something judged; a
        clause this target cannot be judged on (skipped) does not fail the run unless
        ``require_all``. An interrupted run is never ok."""
        return (not self.failing() and not self.binding_causes() and not self.judged_nothing
                and not self.interrupted)

    def binding_causes(self) -> list[RootCause]:
        """The root causes that fail the run: all but those on a clause that cannot fail
        this target (a ``decided`` clause against a URL, shown advisory)."""
        by_id = {v.id: v for v in self.verdicts}
        return [c for c in self.root_causes if c.clause not in by_id or by_id[c.clause].binding]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = dict.fromkeys(STATUSES, 0)
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
            "require_all": self.require_all,
            "counts": self.counts(),
            "cost": self.cost,
            "root_causes": [asdict(c) for c in self.root_causes],
            "interrupted": self.interrupted,
            "verdicts": [{**asdict(v), "side": v.side} for v in self.verdicts],
        }

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResults:
        return cls(
            profile=data["profile"],
            target=data["target"],
            verdicts=[ClauseVerdict(**{k: v for k, v in row.items() if k not in ("side", "sides")},
                                    sides=tuple(row.get("sides") or ())) for row in data["verdicts"]],
            duration_s=data.get("duration_s", 0.0),
            selected=tuple(data.get("selected", ())),
            settings=data.get("settings", {}),
            tests=data.get("tests", {}),
            require_all=data.get("require_all", False),
            cost=data.get("cost", {}),
            root_causes=[RootCause(**{**c, "skipped": tuple(c.get("skipped", ()))})
                         for c in data.get("root_causes", [])],
            interrupted=data.get("interrupted", False),
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
        url: bool = False,
        require_all: bool = False,
        forms: Iterable[str] = (),
    ) -> RunResults:
        """Verdicts of every clause (of ``selected`` when given): those of ``profile`` judged,
        the rest not-applicable. ``url``: the target is a real server, not the embedded fake.
        ``forms``: the answer forms (contract.forms) the target may use; a decided clause
        pinning the kit's own form where one of them is allowed is not-applicable."""
        chosen = tuple(selected)
        judged = {c.id for c in for_profile(profile)}
        allowed = frozenset(forms)
        clauses = [c for c in CLAUSES.values() if not chosen or c.id in chosen]
        outcomes = list(self.outcomes.values())
        why = "no property in this run checks it"

        def outside(c: Clause) -> str | None:
            if c.id not in judged:
                return f"outside profile {profile}"
            return None if kit_form_judged(c.id, allowed) else why_not_judged(c.id, allowed)

        causes = _root_causes(outcomes)
        verdicts = [_verdict(c, outcomes, why, outside(c), url, causes) for c in clauses]
        for cid, cause in causes.items():
            skipped = tuple(v.id for v in verdicts if v.status == "skipped" and v.root_cause == cid)
            causes[cid] = RootCause(cause.clause, cause.summary, cause.evidence, skipped)
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
            require_all=require_all,
            root_causes=list(causes.values()),
        )


def _root_causes(outcomes: Iterable[TestOutcome]) -> dict[str, RootCause]:
    """Each failed set-up the skips name, once, by the clause it breaks (the first
    evidence kept)."""
    out: dict[str, RootCause] = {}
    for o in outcomes:
        found = root_cause_of(o.skip_reason) if o.outcome == "skipped" else None
        if found is not None and found[0] in CLAUSES and found[0] not in out:
            out[found[0]] = RootCause(*found)
    return out


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
