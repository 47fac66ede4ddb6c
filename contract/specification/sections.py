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
from typing import Literal, NamedTuple, cast, get_args

from contract.clauses import CLAUSES, OTHER_SOURCES, Clause

#: rules: a section that promises server (or reference-client) behaviour;
#: group: a heading whose rules live in its subsections; example / notes: not normative.
Kind = Literal["rules", "group", "example", "notes"]


class Section(NamedTuple):
    """One numbered heading of the specification, as the coverage table shows it."""

    number: str
    title: str
    kind: Kind = "rules"
    #: Why no clause cites the section (required for a rules section without one).
    unjudged: str = ""


#: One line per section: number, kind, title and, after " | ", why no clause judges it.
_OUTLINE = """
1      group    Core concepts
1.1    rules    Jobs and typed sub-jobs
1.2    rules    Sub-job id format
1.3    rules    Control plane and data plane | Which calls answer at once and which schedule work is judged route by route (§3.1, §5.x, §6.x, §7).
1.4    rules    Models in the cache
2      group    Connection, authentication, headers
2.1    rules    Base URL and prefix
2.2    rules    PAT authentication headers
2.3    rules    Request content types
2.4    rules    Request id header | Optional in the spec (a response may carry it), so nothing can fail; the kit's ADDR-REQID-1 requiring it is decided.
3      group    Status, polling, retries, errors
3.1    rules    Asynchronous request model
3.2    rules    Job states
3.3    rules    Request states
3.4    rules    Poll timing defaults
3.5    rules    Retries
3.6    rules    Error bodies
4      rules    Endpoint index | An index of the routes; each route is judged under its own section (§5, §6, §7).
5      group    Control-plane endpoints
5.1    rules    Create job
5.2    rules    Get job
5.3    rules    List jobs
5.4    rules    Capacity
5.5    rules    Cancel job
5.6    rules    Experiment run
5.7    rules    List checkpoints
5.8    rules    Export checkpoint
5.9    rules    Delete checkpoint
6      group    Data-plane endpoints
6.1    rules    Forward-backward
6.2    rules    Optimizer step
6.3    rules    Save checkpoint
6.4    rules    Runtime load
6.5    rules    Create-time checkpoint initialisation
6.6    rules    Generate
6.7    rules    Streaming generate
6.8    rules    Poll request
7      rules    Generic operation envelope
7.1    rules    Forward operation
7.2    rules    Weight sync
7.3    rules    LoRA adapter sync
7.4    rules    Bootstrap router replay
7.5    rules    Router replay discard | Its inline answer is judged under §7 (OP-ROUTER-1); the extra payload's precedence is the reference client's.
7.6    rules    Reset prefix cache | The payload shown is the reference client's defaults; the inline answer is judged under §7 (OP-RESET-1), refusing a training receiver is the kit's (OP-RESET-2).
7.7    rules    Cancel request
7.8    rules    Tail logs
7.9    rules    zmd-events (unsupported) | The spec marks the operation unsupported by today's server; there is nothing to hold a server to.
8      group    Create-job schemas
8.1    rules    SubJobConfig
8.2    rules    TrainingConfig
8.3    rules    InferenceConfig
8.4    rules    source_checkpoint_info
8.5    rules    Memory-diagnostics settings | peak_memory is judged under §6.2 (STEP-MEM-1); the allocator telemetry events go to a stream the API does not expose.
9      group    DSSST1 binary wire protocol
9.1    rules    Why DSSST1 (no pickle)
9.2    rules    Frame contents
9.3    rules    Request chunking and chunk groups
9.4    rules    Inline encoded results
9.5    rules    Result chunks
10     group    Forward-backward batch contract
10.1   rules    Transport-level batch object
10.2   rules    Readable payload helper | A client-side helper that builds frames; no server answer depends on it.
10.3   rules    ArcticTraining extensions | The spec leaves context and processing open to the deployed backend; no fixed rule to judge from outside.
10.4   rules    Shifted log-probability convention
11     rules    Result summary | Restates the conventional results of §6 and §7, which judge them; the spec calls the shapes open.
12     group    Logs and events
12.1   rules    Live logs | Judged through the tail-logs operation (§7.8, OP-LOGS-1), including empty non-EOF pages while placing.
12.2   rules    Execution-log download
12.3   rules    ZMD events | Unsupported by today's server (see §7.9).
13     example  End-to-end examples
13.1   example  Example: training and sampling sub-jobs
13.2   example  Example: generate, train, step, sync
13.3   example  Example: save and load
13.4   example  Example: sampling from saved weights
13.5   example  Example: LoRA training and sync
14     notes    Repository compatibility notes
"""


def _parse_outline(text: str) -> tuple[Section, ...]:
    """The sections of ``_OUTLINE``, in order (kept as text: it is a table, not code)."""
    out = []
    for line in text.strip().splitlines():
        head, _, unjudged = line.partition(" | ")
        number, kind, title = head.split(maxsplit=2)
        if kind not in get_args(Kind):
            raise ValueError(f"section {number}: unknown kind {kind!r}")
        out.append(Section(number, title.strip(), cast(Kind, kind), unjudged.strip()))
    return tuple(out)


_SECTIONS: tuple[Section, ...] = _parse_outline(_OUTLINE)

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
    """Rules sections with neither a clause nor a written reason (must be empty), and
    sections holding a checkable rule (``contract.specification.checkable_rules``) that no clause cites."""
    from contract.specification.checkable_rules import RULES

    ruled = {r.section for r in RULES}
    return [
        s.number
        for s in _SECTIONS
        if (s.kind == "rules" or s.number in ruled) and not citing(s.number) and not s.unjudged
    ]


def rule_problems() -> list[str]:
    """Rules (``contract.specification.checkable_rules``) without a clause, naming an unknown clause, form or
    section, and forms no rule shows (must be empty)."""
    from contract.forms import FORMS
    from contract.specification.checkable_rules import RULES

    out = [f"§{r.section} {r.text!r}: no clause judges it" for r in RULES if not r.clauses]
    out += [f"§{r.section} {r.text!r}: unknown clause {c}" for r in RULES for c in r.clauses if c not in CLAUSES]
    out += [f"§{r.section} {r.text!r}: unknown form {f}" for r in RULES for f in r.forms if f not in FORMS]
    out += [f"§{r.section} {r.text!r}: no such section" for r in RULES if r.section not in SECTIONS]
    shown = {f for r in RULES for f in r.forms}
    out += [f"form {name} is exercised on no rule" for name in FORMS if name not in shown]
    return out


def by_source() -> dict[str, int]:
    """Clause counts by kind of source: spec, client, decided, proposed."""
    out = {"spec": 0, "client": 0, "decided": 0, "proposed": 0}
    for c in CLAUSES.values():
        out["spec" if c.spec_section else c.source] += 1
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def must_counts(profile: str = "current") -> dict[str, int]:
    """MUST clauses of ``profile`` by kind of source."""
    out = {"spec": 0, "client": 0, "decided": 0, "proposed": 0}
    for c in CLAUSES.values():
        if c.level == "MUST" and c.profile == profile:
            out["spec" if c.spec_section else c.source] += 1
    return out


def _rule_lines() -> list[str]:
    """The rule-by-rule table: clauses with level and source, the fake, the any dialect."""
    from contract.specification.checkable_rules import RULES

    lines = [
        "## Rules",
        "",
        "Each checkable rule of the spec, in the kit's words: the clauses judging it (level,",
        "source), whether the fake enforces it, and the rows of `contract.forms` through which",
        "`fake-gs --dialect any` answers in the rule's other allowed forms (`-`: the spec allows",
        "one form). Generated from `contract/specification/checkable_rules.py`.",
        "",
        "| § | rule | clauses | fake enforces | `--dialect any` exercises |",
        "|---|---|---|---|---|",
    ]
    for r in RULES:
        ids = ", ".join(f"`{c}` ({CLAUSES[c].level}, {CLAUSES[c].source})" for c in r.clauses if c in CLAUSES)
        forms = ", ".join(f"`{f}`" for f in r.forms) or "-"
        lines.append(f"| §{r.section} | {_cell(r.text)} | {ids or '-'} | {_cell(r.fake)} | {forms} |")
    return lines + [""]


def coverage_markdown() -> str:
    """The section-by-section coverage table (``docs/spec-coverage.md``)."""
    counts = by_source()
    musts = must_counts()
    lines = [
        "# Spec coverage",
        "",
        "Generated by `python -m contract coverage` from `contract/specification/sections.py`,",
        "`contract/specification/checkable_rules.py`, `contract/clauses.py` and `contract/forms.py`; a test fails",
        "when this file drifts from them, and when a section holding a checkable rule has no clause.",
        "",
        "Each section of the published service specification (kept beside the project as",
        "`DSS-Server-API-Specification.md`) with the clauses that cite it as their source,",
        "or the reason no clause judges it from outside. Examples and notes are not normative.",
        "",
        "Clauses by source: "
        + ", ".join(f"{kind} {n}" for kind, n in counts.items())
        + f" (total {sum(counts.values())}); MUST clauses of profile current: "
        + ", ".join(f"{kind} {n}" for kind, n in musts.items() if n) + ".",
        "",
        "## Sections",
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
    return "\n".join(lines + _rule_lines() + _reread_lines())


def _reread_lines() -> list[str]:
    """The clauses moved or rephrased on re-reading their sections, before and after."""
    from contract.clauses import CLAUSES
    from contract.specification.rereads import REREADS

    lines = [
        "## Clauses moved or rephrased",
        "",
        "Each binding clause re-read against its section: a demand the section does not state",
        "moved to a `decided` clause (advisory against a URL) or was rephrased, and test inputs",
        "kept inside what the section shows (`contract/specification/rereads.py`).",
        "",
        "| clause | source now | before | after | why |",
        "|---|---|---|---|---|",
    ]
    for r in REREADS:
        source = CLAUSES[r.clause].source if r.clause in CLAUSES else "(missing)"
        lines.append(f"| `{r.clause}` | {source} | {_cell(r.before)} | {_cell(r.after)} | {_cell(r.why)} |")
    return lines + [""]
