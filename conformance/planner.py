"""Before a run: which clauses this target, with these options, can be judged on, and why not.

The plan is read off the collected properties: each asks for fixtures, and some fixtures
cannot serve every target (the fake's admin API and its settings only exist on the embedded
fake, a second account needs ``--token2`` or ``$GS_TOKEN2``, an extra job needs room in ``--max-jobs``);
two markers say what fixtures cannot: ``gs_fake_optional`` (the property asks for the fake's
admin API or settings only when the target is the embedded fake) and ``gs_needs_token`` (it
judges authentication, which needs a token). A clause is plannable when at least one of its
properties needs nothing the target lacks. It is a
forecast (a property may still skip at run time, e.g. a server that answers a large result
inline); the report states what was judged, "judged N of M MUST clauses on this target",
and which options would judge more.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.target import GsOptions, main_token
from contract.clauses import CLAUSES, clauses_of, for_profile

#: The stash key of the plan computed at collection (controller or single process).
PLAN_KEY = pytest.StashKey[dict[str, str]]()

#: The markers a property declares its needs with (registered by the plugin), and what each says.
MARKERS = {
    "gs_fake_optional": "the property uses the fake's admin API or settings only on the embedded "
                        "fake; against a URL it judges without them",
    "gs_needs_token": "the property judges authentication: against a URL it needs a token",
}

#: What a property may need, and the option that gives it (as the plugin spells it;
#: gs-conformance respells it as its own).
ADMIN = "the fake's admin API (embedded fake only)", "run without --gs-url"
SETTING = "a setting of the embedded fake", "run without --gs-url"
TOKEN = "a token (auth clauses)", "--gs-token or $GS_TOKEN"
TOKEN2 = "a second account", "--gs-token2 or $GS_TOKEN2"
MORE_JOBS = "a job beyond the session's", "--gs-max-jobs N"


@dataclass(frozen=True)
class Need:
    why: str
    enable: str


def unmet(fixtures: Iterable[str], options: GsOptions, marks: Collection[str] = ()) -> list[Need]:
    """What a property using these fixtures, with these markers (:data:`MARKERS`), needs
    that this target does not offer. ``gs_source`` reaches a fake variant on the embedded
    fake only (against a URL: the target itself)."""
    names = set(fixtures)
    fake_only_branch = "gs_fake_optional" in marks
    if options.embedded:
        return []
    out: list[Need] = []
    if "gs_admin" in names and not fake_only_branch:
        out.append(Need(*ADMIN))
    if "gs_variant" in names and not fake_only_branch and "gs_source" not in names:
        out.append(Need(*SETTING))
    if (names & {"gs_anon"} or "gs_needs_token" in marks) and not main_token(options):
        out.append(Need(*TOKEN))
    if "gs_raw2" in names and not options.with_env("token2"):
        out.append(Need(*TOKEN2))
    budget = options.job_budget
    extra = None if budget is None else budget - (0 if options.job_id else 1)
    if names & {"gs_new_job", "gs_budget"} and extra is not None and extra < 1:
        out.append(Need(*MORE_JOBS))
    return out


def _needs(item: pytest.Item) -> tuple[tuple[str, ...], frozenset[str]]:
    """The fixtures a property uses (with those of its fixtures), and its need markers."""
    marks = frozenset(m.name for m in item.iter_markers() if m.name in MARKERS)
    return tuple(getattr(item, "fixturenames", ())), marks


def plan(options: GsOptions, items: Iterable[pytest.Item]) -> dict[str, str]:
    """Clause id -> '' when some property can judge it here, else why not (and the option)."""
    reasons: dict[str, list[str]] = {}
    can: set[str] = set()
    for item in items:
        ids = clauses_of(getattr(item, "function", None)) or clauses_of(getattr(item, "cls", None))
        names, marks = _needs(item)
        needs = unmet(names, options, marks)
        for cid in ids:
            if not needs:
                can.add(cid)
            else:
                reasons.setdefault(cid, []).extend(f"needs {n.why} [{n.enable}]" for n in needs)
    out: dict[str, str] = {}
    for clause in for_profile(options.profile):
        if options.clauses and clause.id not in options.clauses:
            continue
        if clause.id in can:
            out[clause.id] = ""
        else:
            why = "; ".join(dict.fromkeys(reasons.get(clause.id, [])))
            out[clause.id] = why or "no property in this run checks it"
    return out


def render_plan(rows: Mapping[str, str]) -> str:
    """The plan as a terminal table: one line per clause, then the tally."""
    lines = [
        "== plan (a forecast from the fixtures each property uses; a property may still skip "
        "at run time): can this target, with these options, judge each clause? =="
    ]
    for cid, why in rows.items():
        level = CLAUSES[cid].level
        lines.append(f"  {'yes' if not why else 'no ':<3} {level:<6} {cid:<20} {why}")
    musts = [cid for cid in rows if CLAUSES[cid].level == "MUST"]
    yes = sum(1 for cid in musts if not rows[cid])
    lines.append(f"planned: {yes} of {len(musts)} MUST clauses can be judged on this target")
    return "\n".join(lines)


def write_plan(rows: Mapping[str, str], path: str) -> None:
    Path(path).write_text(json.dumps(dict(rows), indent=1))


# --- after the run ---------------------------------------------------------------------------


def record(config: pytest.Config, options: GsOptions, items: Any) -> dict[str, str]:
    """Compute the plan at collection, keep it on ``config``, write it when asked to."""
    rows = plan(options, items)
    config.stash[PLAN_KEY] = rows
    return rows
