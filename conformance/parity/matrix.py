"""The parity matrix: per operation, how much of a tape a replay covered and how it came out.

One table per tape, headed by when and against what it was recorded: for every operation
of the contract (then the fake's admin API and anything else the tape holds), the
exchanges recorded, replayed, equal (no difference at all), with accepted differences
only, divergent, and skipped, with why. An operation the tape never recorded is listed as
such, so "how far is the fake from the service, and since when" is one page. ``gs-parity``
writes it as Markdown and HTML next to its report (``REPORT.matrix.md``, ``.matrix.html``)
and puts it in the report itself.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from conformance.parity.replay import ExchangeResult, Replay
from conformance.reporting.formats import markdown as md
from conformance.reporting.formats.html import safe
from contract.routes import ROUTES

COLUMNS = ("recorded", "replayed", "equal", "accepted", "divergent", "skipped")
#: How a skip's kind reads in the matrix (the report lists each reason in full); a skip for
#: want of a server at the target reads as its reason, less the server's name.
SKIP_LABELS = {
    "after": "after an exchange that was not replayed",
    "bytes": "request body not in the tape",
    "form": "continued a cursor chain the new server ended sooner (an allowed form)",
    "loop": "loop settled sooner",
}
NEVER = "never recorded"


@dataclass
class Row:
    operation: str
    profile: str
    counts: Counter[str] = field(default_factory=Counter)
    why: Counter[str] = field(default_factory=Counter)

    def add(self, r: ExchangeResult) -> None:
        self.counts["recorded"] += 1
        if r.skipped is not None:
            self.counts["skipped"] += 1
            self.why[SKIP_LABELS.get(r.skip_kind or "", re.sub(r"server '[^']*' ", "server ", r.skipped))] += 1
            return
        self.counts["replayed"] += 1
        kind = "divergent" if r.diverged else "accepted" if r.divergences else "equal"
        self.counts[kind] += 1

    @property
    def reasons(self) -> str:
        if not self.counts["recorded"]:
            return NEVER
        return "; ".join(f"{n} {why}" for why, n in self.why.most_common())


def rows(rep: Replay) -> list[Row]:
    """Every contract operation (in the contract's order), then the other routes the tape holds."""
    table = {r.name: Row(r.name, r.profile) for r in ROUTES}
    for result in rep.results:
        name = result.route
        if name not in table:
            table[name] = Row(name if name != "-" else "(no route)", "admin" if name.startswith("admin:") else "other")
        table[name].add(result)
    return list(table.values())


def provenance(rep: Replay) -> str:
    """When and against what the tape was recorded."""
    meta = rep.meta
    target = meta.get("target")
    if target is None:
        settings = (rep.servers.get("target") or {}).get("settings") or {}
        shown = {k: settings[k] for k in ("profile", "dialect", "engine", "status_style") if k in settings}
        target = "the fake (" + ", ".join(f"{k}={v}" for k, v in shown.items()) + ")" if shown else "the fake"
    return (f"recorded {meta.get('created', 'at an unknown date')} by {meta.get('source', '?')} "
            f"against {target}; replayed against {rep.target}")


def totals(table: list[Row]) -> Counter[str]:
    out: Counter[str] = Counter()
    for row in table:
        out.update(row.counts)
    return out


def markdown(reps: list[Replay]) -> str:
    out: list[str] = []
    for rep in reps:
        table = rows(rep)
        out += [f"### Parity matrix: {md.code(rep.tape)}", "", md.text(provenance(rep)), "",
                "| operation | profile | " + " | ".join(COLUMNS) + " | skipped: why |",
                "|---|---|" + "---:|" * len(COLUMNS) + "---|"]
        for row in table:
            cells = " | ".join(str(row.counts[c]) for c in COLUMNS)
            out.append(f"| {md.code(row.operation)} | {md.text(row.profile)} | {cells} | {md.text(row.reasons)} |")
        total = totals(table)
        never = sum(1 for row in table if not row.counts["recorded"])
        out += [f"| **all** | | {' | '.join(str(total[c]) for c in COLUMNS)} | {never} operations {NEVER} |", ""]
    return "\n".join(out)


MATRIX_CSS = """
table.matrix{border-collapse:collapse;margin:.4em 0 1.2em 0}
.matrix td,.matrix th{border:1px solid #ddd;padding:3px 8px;text-align:right}
.matrix td:first-child,.matrix td:nth-child(2),.matrix td:last-child,.matrix th{text-align:left}
.matrix th{background:#f0f0f0} .matrix tr.never td{color:#999}
.matrix td.bad{color:#c62828;font-weight:600} .matrix td.acc{color:#8d6e00} .matrix td.skip{color:#777}
"""


def html_table(rep: Replay) -> str:
    """One tape's matrix as an HTML table (with its provenance above it)."""
    esc = safe
    head = "".join(f"<th>{c}</th>" for c in ("operation", "profile", *COLUMNS, "skipped: why"))
    body = []
    for row in rows(rep):
        cls = {"divergent": "bad", "accepted": "acc", "skipped": "skip"}
        cells = "".join(f'<td class="{cls.get(c, "") if row.counts[c] else ""}">{row.counts[c]}</td>'
                        for c in COLUMNS)
        never = "" if row.counts["recorded"] else ' class="never"'
        body.append(f"<tr{never}><td><code>{esc(row.operation)}</code></td><td>{esc(row.profile)}</td>"
                    f"{cells}<td>{esc(row.reasons)}</td></tr>")
    return (f"<p>{esc(provenance(rep))}</p><table class=\"matrix\"><tr>{head}</tr>{''.join(body)}</table>")


def html_page(reps: list[Replay]) -> str:
    parts = [f"<h2>{safe(rep.tape)}</h2>{html_table(rep)}" for rep in reps]
    return ("<!doctype html><html><head><meta charset='utf-8'><title>gs-parity matrix</title>"
            f"<style>body{{font:14px/1.4 system-ui,sans-serif;margin:1.5em}}{MATRIX_CSS}</style></head>"
            f"<body><h1>Parity matrix</h1>{''.join(parts)}</body></html>")



def write_beside(report: str, reps: list[Replay], infix: str = ".matrix") -> list[str]:
    """Write the matrix next to a report (``parity.html`` -> ``parity.matrix.md``/``.html``;
    with ``infix=""`` to ``PATH.md``/``PATH.html``)."""
    stem = Path(report)
    stem = stem.with_suffix("") if stem.suffix in (".html", ".htm", ".md", ".txt", ".json", ".xml") else stem
    paths = [f"{stem}{infix}.md", f"{stem}{infix}.html"]
    Path(paths[0]).write_text(markdown(reps), encoding="utf-8")
    Path(paths[1]).write_text(html_page(reps), encoding="utf-8")
    return paths
