"""The sections of the published service specification, and which clauses judge each.

The specification (``DSS-Server-API-Specification.md``, kept beside the project, see
``docs/spec-coverage.md``) is cited by section number: a clause whose source is
``spec §6.3`` enforces a rule of section 6.3. This module is the one home of the section
numbers (with short titles in the kit's own words) and, for each section that no clause
cites, the reason it is not judged. ``python -m contract coverage`` renders the table;
the committed ``docs/spec-coverage.md`` is checked against it for drift.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from contract.clauses import CLAUSES, OTHER_SOURCES, Clause

#: rules: a section that promises server (or reference-client) behaviour;
#: group: a heading whose rules live in its subsections; example / notes: not normative.
Kind = Literal["rules", "group", "example", "notes"]


@dataclass(frozen=True)
class Section:
    number: str
    title: str
    kind: Kind = "rules"
    #: Why no clause cites the section (required for a rules section without one).
    unjudged: str = ""


def _s(number: str, title: str, kind: Kind = "rules", unjudged: str = "") -> Section:
    return Section(number, title, kind, unjudged)


_SECTIONS: tuple[Section, ...] = (
    _s("1", "Core concepts", "group"),
    _s("1.1", "Jobs and typed sub-jobs"),
    _s("1.2", "Sub-job id format"),
    _s("1.3", "Control plane and data plane", unjudged="Which calls answer at once and which schedule work is judged route by route (§3.1, §5.x, §6.x, §7)."),
    _s("1.4", "Models in the cache"),
    _s("2", "Connection, authentication, headers", "group"),
    _s("2.1", "Base URL and prefix"),
    _s("2.2", "PAT authentication headers"),
    _s("2.3", "Request content types"),
    _s("2.4", "Request id header", unjudged="Optional in the spec (a response may carry it), so nothing can fail; the kit's ADDR-REQID-1 requiring it is decided."),
    _s("3", "Status, polling, retries, errors", "group"),
    _s("3.1", "Asynchronous request model"),
    _s("3.2", "Job states"),
    _s("3.3", "Request states"),
    _s("3.4", "Poll timing defaults", unjudged="Defaults of the reference client's poller; they promise nothing about a server's answers."),
    _s("3.5", "Retries"),
    _s("3.6", "Error bodies"),
    _s("4", "Endpoint index", unjudged="An index of the routes; each route is judged under its own section (§5, §6, §7)."),
    _s("5", "Control-plane endpoints", "group"),
    _s("5.1", "Create job"),
    _s("5.2", "Get job"),
    _s("5.3", "List jobs"),
    _s("5.4", "Capacity"),
    _s("5.5", "Cancel job"),
    _s("5.6", "Experiment run"),
    _s("5.7", "List checkpoints"),
    _s("5.8", "Export checkpoint"),
    _s("5.9", "Delete checkpoint"),
    _s("6", "Data-plane endpoints", "group"),
    _s("6.1", "Forward-backward"),
    _s("6.2", "Optimizer step"),
    _s("6.3", "Save checkpoint"),
    _s("6.4", "Runtime load"),
    _s("6.5", "Create-time checkpoint initialisation"),
    _s("6.6", "Generate"),
    _s("6.7", "Streaming generate"),
    _s("6.8", "Poll request"),
    _s("7", "Generic operation envelope"),
    _s("7.1", "Forward operation"),
    _s("7.2", "Weight sync"),
    _s("7.3", "LoRA adapter sync"),
    _s("7.4", "Bootstrap router replay"),
    _s("7.5", "Router replay discard", unjudged="Judged together with §7.4 by OP-ROUTER-1 (both router-replay operations answer inline)."),
    _s("7.6", "Reset prefix cache"),
    _s("7.7", "Cancel request"),
    _s("7.8", "Tail logs"),
    _s("7.9", "zmd-events (unsupported)", unjudged="The spec marks the operation unsupported by today's server; there is nothing to hold a server to."),
    _s("8", "Create-job schemas", "group"),
    _s("8.1", "SubJobConfig"),
    _s("8.2", "TrainingConfig"),
    _s("8.3", "InferenceConfig"),
    _s("8.4", "source_checkpoint_info", unjudged="Judged with create-time initialisation under §6.5 (CKPT-INIT-2 needs its checkpoint_id)."),
    _s("8.5", "Memory-diagnostics settings", unjudged="peak_memory is judged under §6.2 (STEP-MEM-1); the allocator telemetry events go to a stream the API does not expose."),
    _s("9", "DSSST1 binary wire protocol", "group"),
    _s("9.1", "Why DSSST1 (no pickle)"),
    _s("9.2", "Frame contents"),
    _s("9.3", "Request chunking and chunk groups"),
    _s("9.4", "Inline encoded results"),
    _s("9.5", "Result chunks"),
    _s("10", "Forward-backward batch contract", "group"),
    _s("10.1", "Transport-level batch object"),
    _s("10.2", "Readable payload helper", unjudged="A client-side helper that builds frames; no server answer depends on it."),
    _s("10.3", "ArcticTraining extensions", unjudged="The spec leaves context and processing open to the deployed backend; no fixed rule to judge from outside."),
    _s("10.4", "Shifted log-probability convention"),
    _s("11", "Result summary", unjudged="Restates the conventional results of §6 and §7, which judge them; the spec calls the shapes open."),
    _s("12", "Logs and events", "group"),
    _s("12.1", "Live logs", unjudged="Judged through the tail-logs operation (§7.8, OP-LOGS-1), including empty non-EOF pages while placing."),
    _s("12.2", "Execution-log download"),
    _s("12.3", "ZMD events", unjudged="Unsupported by today's server (see §7.9)."),
    _s("13", "End-to-end examples", "example"),
    _s("13.1", "Example: training and sampling sub-jobs", "example"),
    _s("13.2", "Example: generate, train, step, sync", "example"),
    _s("13.3", "Example: save and load", "example"),
    _s("13.4", "Example: sampling from saved weights", "example"),
    _s("13.5", "Example: LoRA training and sync", "example"),
    _s("14", "Repository compatibility notes", "notes"),
)

SECTIONS: dict[str, Section] = {s.number: s for s in _SECTIONS}


def citing(number: str) -> list[Clause]:
    """The clauses whose source is ``spec §<number>``."""
    return [c for c in CLAUSES.values() if c.spec_section == number]


def source_problems(clauses: Iterable[Clause] | None = None) -> list[str]:
    """Clauses without a valid source: empty, unknown kind, or a section that does not exist."""
    problems = []
    for c in CLAUSES.values() if clauses is None else clauses:
        section = c.spec_section
        if section is None and c.source not in OTHER_SOURCES:
            problems.append(f"{c.id}: source {c.source!r} is not spec §N.N, client, decided or proposed")
        elif section is not None and section not in SECTIONS:
            problems.append(f"{c.id}: source {c.source!r} names no section of the spec")
    return problems


def coverage_gaps() -> list[str]:
    """Rules sections with neither a clause nor a written reason (must be empty)."""
    return [
        s.number
        for s in _SECTIONS
        if s.kind == "rules" and not citing(s.number) and not s.unjudged
    ]


def by_source() -> dict[str, int]:
    """Clause counts by kind of source: spec, client, decided, proposed."""
    out = {"spec": 0, "client": 0, "decided": 0, "proposed": 0}
    for c in CLAUSES.values():
        out["spec" if c.spec_section else c.source] += 1
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def coverage_markdown() -> str:
    """The section-by-section coverage table (``docs/spec-coverage.md``)."""
    counts = by_source()
    lines = [
        "# Spec coverage",
        "",
        "Generated by `python -m contract coverage` from `contract/spec.py` and",
        "`contract/clauses.py`; a test fails when this file drifts from them.",
        "",
        "Each section of the published service specification (kept beside the project as",
        "`DSS-Server-API-Specification.md`) with the clauses that cite it as their source,",
        "or the reason no clause judges it from outside. Examples and notes are not normative.",
        "",
        "Clauses by source: "
        + ", ".join(f"{kind} {n}" for kind, n in counts.items())
        + f" (total {sum(counts.values())}).",
        "",
        "| section | title | clauses | not judged because |",
        "|---|---|---|---|",
    ]
    for s in _SECTIONS:
        ids = ", ".join(f"`{c.id}`" for c in citing(s.number))
        if s.kind == "group":
            why = "(see its subsections)"
        elif s.kind in ("example", "notes"):
            why = "(not normative)"
        else:
            why = "" if ids and not s.unjudged else s.unjudged
        lines.append(f"| §{s.number} | {_cell(s.title)} | {ids or '-'} | {_cell(why) or '-'} |")
    lines.append("")
    return "\n".join(lines)
