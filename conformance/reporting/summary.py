"""The summary under a run's report: how much of the contract the run judged, which options
would judge more, and (for a URL run) what it cost the target."""

from __future__ import annotations

from conformance.reporting.cost import cost_line
from conformance.reporting.verdicts import RunResults


def judged_line(res: RunResults) -> str:
    """``judged N of M MUST clauses on this target`` (green or red, of the run's MUSTs)."""
    musts = [v for v in res.verdicts if v.must and v.status != "not-applicable"]
    judged = sum(v.status in ("green", "red") for v in musts)
    return f"judged {judged} of {len(musts)} MUST clauses on this target"


def more_options(res: RunResults) -> list[tuple[str, list[str]]]:
    """(what would enable them, skipped MUST clause ids), most clauses first."""
    groups: dict[str, list[str]] = {}
    for v in res.verdicts:
        if v.must and v.status == "skipped":
            hint = (f"fix the root cause {v.root_cause}" if v.root_cause
                    else v.enable or "(no option known: see the clause's reason)")
            groups.setdefault(hint, []).append(v.id)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def summary_lines(res: RunResults) -> list[str]:
    """Judged fraction, what would judge more, and (for a URL run) the cost line."""
    lines = [judged_line(res)]
    more = more_options(res)
    if more:
        lines.append("would judge more:")
        for hint, ids in more:
            shown = ", ".join(ids[:8]) + (f", ... ({len(ids) - 8} more)" if len(ids) > 8 else "")
            lines.append(f"  {len(ids):>3} MUST  {hint}: {shown}")
    line = cost_line(res.cost)
    if line:
        lines.append(line)
    return lines
