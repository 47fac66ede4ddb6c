"""The passive judge's verdicts as the suite's report (:class:`RunResults`), so gs-proxy and
``gs-parity --judge`` write every format gs-conformance writes through its one writer
(:func:`conformance.reporting.render.write`).

A red clause names the side that broke it (client or server) in its reason and in each
example; a clause the traffic never exercised is skipped as not seen.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any, TextIO

from conformance.judge.passive import ClauseFinding, PassiveJudge
from conformance.judge.tape import tape_exchanges
from conformance.reporting import render
from conformance.reporting.verdicts import ClauseVerdict, RunResults
from contract.clauses import CLAUSES, ClauseProfile, for_profile
from contract.forms import forms_of, kit_form_judged, why_not_judged

NOT_SEEN = "not seen: no observed exchange exercised it"


def _verdict(cid: str, found: ClauseFinding | None, in_profile: bool, url: bool, forms: frozenset[str]) -> ClauseVerdict:
    """A clause's verdict, marked with the sides it is judged on (a red one: those that broke it)."""
    clause = CLAUSES[cid]
    binding = clause.can_fail_a_url or not url
    on = found.judged_on if found is not None else ()
    if not in_profile:
        return ClauseVerdict(**asdict(clause), status="not-applicable", reason="outside the profile",
                             binding=binding, sides=on)
    if not kit_form_judged(cid, forms):
        return ClauseVerdict(**asdict(clause), status="not-applicable", reason=why_not_judged(cid, forms),
                             binding=binding, sides=on)
    if found is None or found.status == "not seen":
        return ClauseVerdict(**asdict(clause), status="skipped", reason=NOT_SEEN, binding=binding,
                             enable="traffic that exercises it", sides=on)
    if found.status == "green":
        return ClauseVerdict(**asdict(clause), status="green", reason=f"judged {found.judged} time(s)",
                             binding=binding, sides=on)
    sides = " and ".join(found.sides)
    first = found.examples[0] if found.examples else ""
    examples = [{"test": f"{text.partition(']')[0].lstrip('[') or sides} side", "text": text}
                for text in found.examples]
    return ClauseVerdict(**asdict(clause), status="red", binding=binding, examples=examples,
                         reason=f"broken by the {sides} ({found.violations} time(s)): {first}"[:600],
                         tests=[f"{side} side" for side in found.sides], sides=found.sides)


def run_results(findings: Mapping[str, ClauseFinding], *, profile: ClauseProfile, target: str, url: bool,
                duration_s: float = 0.0, settings: Mapping[str, Any] | None = None,
                dialect: str | None = None) -> RunResults:
    """The report of a passive run: every clause the judge can judge, in ``profile``;
    ``dialect`` names the fake's answer forms (None: a server the kit did not build, which
    may answer in every form the spec allows, so a kit-form clause is not applicable)."""
    forms = forms_of(dialect)
    in_profile = {c.id for c in for_profile(profile)}
    ids = [cid for cid in findings if cid in CLAUSES]
    rows = [_verdict(cid, findings.get(cid), cid in in_profile, url, forms) for cid in ids]
    sides = {v.clause_id: list(v.sides) for v in findings.values() if v.sides}
    return RunResults(profile=profile, target=target, verdicts=rows, duration_s=duration_s,
                      selected=tuple(ids), settings={**dict(settings or {}), "red_sides": sides},
                      tests={"exchanges": int((settings or {}).get("exchanges", 0))})


def failing_must(results: RunResults) -> list[ClauseVerdict]:
    """Red MUST clauses that bind this target: any of them fails the run."""
    return [v for v in results.verdicts if v.status == "red" and v.binding and v.must]


def conclude(judge: PassiveJudge, *, profile: ClauseProfile, target: str, url: bool, duration_s: float,
             reports: Iterable[str], source: str, out: TextIO | None = None, dialect: str | None = None) -> int:
    """Write ``judge``'s report to each of ``reports`` and the terminal table to ``out``;
    the exit code: 0, 1 on a binding red MUST clause, 2 when nothing was observed."""
    out = out or sys.stdout
    res = run_results(judge.findings(), profile=profile, target=target, url=url, duration_s=duration_s,
                      settings={"exchanges": judge.exchanges, "source": source}, dialect=dialect)
    for path in reports:
        render.write(res, path)
    print(render.text(res), file=out, flush=True)
    if not judge.exchanges:
        print(f"{source}: no exchange was observed: nothing judged", file=sys.stderr, flush=True)
        return 2
    return 1 if failing_must(res) else 0


def judge_tape(path: str, *, profile: ClauseProfile = "current", url: bool = True,
               reports: Iterable[str] = (), out: TextIO | None = None) -> int:
    """``gs-parity --judge``: judge a recorded run without replaying it (exit code as
    :func:`conclude`'s)."""
    judge = PassiveJudge()
    for ex in tape_exchanges(path):
        judge.observe(ex)
    return conclude(judge, profile=profile, target=path, url=url, duration_s=0.0, reports=reports,
                    source="gs-parity --judge", out=out)
