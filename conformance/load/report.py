"""The load run's report: a per-route table (calls, failures, p50/p95/p99, MiB/s), the
clause-violation table and the cost line, as terminal text, Markdown, JUnit XML and an HTML
section (with the latency-over-time picture) that goes into Locust's own HTML report.
Everything here reads a finished :class:`Outcome`; nothing talks to a server.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from conformance.judge.answers import JUDGED
from conformance.judge.tally import Tally, percentile
from conformance.load.svg import latency_svg
from conformance.reporting.cost import MiB, cost_line
from conformance.reporting.formats import html as html_form
from conformance.reporting.formats import junit as junit_form
from conformance.reporting.formats import markdown as md
from conformance.reporting.formats import text as text_form
from conformance.reporting.model import Failure, Verdict
from contract.clauses import CLAUSES
from contract.redact import scrub_text


@dataclass(frozen=True)
class RouteRow:
    key: str
    calls: int
    failures: int
    p50: int
    p95: int
    p99: int
    mib_s_sent: float
    mib_s_received: float


@dataclass(frozen=True)
class ViolationRow:
    clause_id: str
    count: int
    #: Does it count toward --max-violations on this target?
    counts: bool
    examples: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        return CLAUSES[self.clause_id].source

    @property
    def level(self) -> str:
        return CLAUSES[self.clause_id].level


@dataclass
class Outcome:
    """A judged run: what every process counted, and what the master made of it."""

    tally: Tally
    duration_s: float
    target: str
    counts_decided: bool
    max_violations: int
    cost: dict[str, Any] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    jobs_end: dict[str, str] = field(default_factory=dict)
    fake_cpu_s: float | None = None
    load_cpu_s: float = 0.0
    error: str = ""

    def counts(self, clause_id: str) -> bool:
        return self.counts_decided or CLAUSES[clause_id].can_fail_a_url

    @property
    def violations(self) -> list[ViolationRow]:
        ids = list(dict.fromkeys((*JUDGED, *sorted(self.tally.violations))))
        rows = [ViolationRow(cid, self.tally.violations[cid], self.counts(cid),
                             tuple(self.tally.examples.get(cid, ()))) for cid in ids]
        # Violations first (counted ones, then decided ones), the most frequent first.
        return sorted(rows, key=lambda r: (not (r.count and r.counts), not r.count, -r.count))

    @property
    def counted(self) -> int:
        return sum(row.count for row in self.violations if row.counts)

    @property
    def exit_code(self) -> int:
        if self.error or not sum(self.tally.exchanges.values()):
            return 2
        return 1 if self.counted > self.max_violations else 0

    @property
    def routes(self) -> list[RouteRow]:
        seconds = max(self.duration_s, 1e-9)
        rows = []
        for key, calls in sorted(self.tally.exchanges.items(), key=lambda kv: (-kv[1], kv[0])):
            hist: Counter[int] = Counter()
            for bucket in self.tally.timeline.get(key, {}).values():
                hist.update({int(ms): n for ms, n in bucket.items()})
            rows.append(RouteRow(key, calls, self.tally.failures[key], percentile(hist, 0.5),
                                 percentile(hist, 0.95), percentile(hist, 0.99),
                                 self.tally.sent[key] / MiB / seconds,
                                 self.tally.received[key] / MiB / seconds))
        return rows

    @property
    def calls_per_s(self) -> float:
        return sum(self.tally.exchanges.values()) / max(self.duration_s, 1e-9)

    def verdict(self) -> str:
        if self.error:
            return f"RUN FAILED: {self.error}"
        word = "CONFORMS UNDER LOAD" if self.exit_code == 0 else "DOES NOT CONFORM UNDER LOAD"
        return (f"{word}: {self.counted} counted violation(s) (--max-violations "
                f"{self.max_violations}), {sum(self.tally.exchanges.values())} calls in "
                f"{self.duration_s:.1f} s ({self.calls_per_s:.1f}/s) against {self.target}")

    def cpu_line(self) -> str:
        load = f"load generator {self.load_cpu_s:.1f} CPU-s"
        if self.fake_cpu_s is None:
            return f"cpu: {load}"
        share = 100.0 * self.fake_cpu_s / max(self.duration_s, 1e-9)
        return f"cpu: embedded fake {self.fake_cpu_s:.1f} CPU-s ({share:.0f}% of one core), {load}"


ROUTE_HEAD = ("route", "calls", "failures", "p50 ms", "p95 ms", "p99 ms", "MiB/s out", "MiB/s in")
VIOLATION_HEAD = ("clause", "level", "source", "violations", "counts", "first example")


def _route_cells(row: RouteRow) -> tuple[str, ...]:
    return (row.key, str(row.calls), str(row.failures), str(row.p50), str(row.p95), str(row.p99),
            f"{row.mib_s_sent:.3f}", f"{row.mib_s_received:.3f}")


def _violation_cells(row: ViolationRow) -> tuple[str, ...]:
    return (row.clause_id, row.level, row.source, str(row.count),
            "yes" if row.counts else "no (decided)", row.examples[0] if row.examples else "")


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(head[i]), *(len(r[i][:90]) for r in rows)) if rows else len(head[i])
              for i in range(len(head))]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    return [line, "-" * len(line),
            *("  ".join(c[:90].ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)]


def verdict_of(out: Outcome) -> Verdict:
    """The run as the kit's one verdict model."""
    def failure(row: ViolationRow) -> Failure:
        first = row.examples[0] if row.examples else ""
        return Failure(what=row.clause_id, reason=f"{row.count} violation(s) under load"
                       + (f": {first}" if first else ""), binding=row.counts, anchor="gs-load")
    judged = out.violations
    return Verdict(tool="gs-load", target=out.target, ok=out.exit_code == 0, headline=out.verdict(),
                   judged=sum(out.tally.exchanges.values()),
                   failures=[failure(r) for r in judged if r.count and r.counts],
                   decided=[failure(r) for r in judged if r.count and not r.counts],
                   passes=sum(1 for r in judged if not r.count), cost=cost_line(out.cost))


def text(out: Outcome) -> str:
    """The terminal report: routes, violations (the clauses with none in one line), cost,
    then the failures box and the verdict."""
    safe = text_form.safe
    judged = out.violations
    bad = [r for r in judged if r.count]
    lines = ["", "gs-load: per route", *_table(ROUTE_HEAD, [_route_cells(r) for r in out.routes]),
             "", "gs-load: contract violations under load"]
    lines += _table(VIOLATION_HEAD, [_violation_cells(r) for r in bad]) if bad else ["none"]
    clean = [r.clause_id for r in judged if not r.count]
    lines.append(f"no violation of {len(clean)} judged clause(s): {', '.join(clean)}")
    if out.tally.loop_errors:
        errors = ", ".join(f"{k} x{v}" for k, v in out.tally.loop_errors.most_common(8))
        lines.append(f"calls that raised in the loops: {errors}")
    lines += [out.cpu_line(), cost_line(out.cost)]
    lines = [safe(line) for line in lines]
    lines += text_form.ending(verdict_of(out))
    return scrub_text("\n".join(lines))


def markdown(out: Outcome) -> str:
    rows = [*md.head(f"gs-load against {out.target}", verdict_of(out)), "## Contract violations", "",
            *md.table(VIOLATION_HEAD, [tuple(md.text(c) for c in _violation_cells(r)) for r in out.violations]),
            "", "## Per route", "",
            *md.table(ROUTE_HEAD, [tuple(md.text(c) for c in _route_cells(r)) for r in out.routes]),
            "", md.text(out.cpu_line()), "", md.text(cost_line(out.cost)), ""]
    return "\n".join(rows)


def junit(out: Outcome) -> str:
    """One testcase per clause judged under load: a failure when it has counted violations,
    its examples as the message; uncounted ones (decided, against a URL) pass with a note."""
    cases = []
    for row in out.violations:
        classname = f"gs-load.{CLAUSES[row.clause_id].area}"
        if row.count and row.counts:
            cases.append(junit_form.Case(row.clause_id, classname, junit_form.FAILED,
                                         f"{row.count} violation(s) under load", "\n".join(row.examples)))
        else:
            note = (f"{row.count} violation(s) of a decided clause, reported only: " + "\n".join(row.examples)
                    if row.count else "")
            cases.append(junit_form.Case(row.clause_id, classname, out=note))
    props = {"target": out.target, "calls": str(sum(out.tally.exchanges.values())),
             "cost": cost_line(out.cost), "verdict": out.verdict()}
    return junit_form.document([junit_form.Suite("gs-load", cases, out.duration_s, props)])


def html_section(out: Outcome) -> str:
    """gs-load's part of the HTML report: verdict, picture, both tables, CPU and cost."""
    esc = html_form.safe
    return (
        '<section id="gs-load" style="font-family:sans-serif;margin:2em;overflow-wrap:anywhere">'
        f"<h2>gs-load: {esc(out.verdict())}</h2>"
        "<h3>Contract violations under load</h3>"
        f"{html_form.table(VIOLATION_HEAD, [_violation_cells(r) for r in out.violations])}"
        "<h3>Latency over time per route (p95 of each second)</h3>"
        f"<div style='max-width:100%;overflow-x:auto'>{latency_svg(out.tally)}</div>"
        f"<h3>Per route</h3>{html_form.table(ROUTE_HEAD, [_route_cells(r) for r in out.routes])}"
        f"<p>{esc(out.cpu_line())}</p><p>{esc(cost_line(out.cost))}</p>"
        "</section>"
    )


def banner(out: Outcome) -> str:
    """What goes above Locust's own tables: the verdict and the failures box."""
    v = verdict_of(out)
    return (f"<div id='gs-load-verdict' style='margin:12px 20px'><style>{html_form.BOX_CSS}</style>"
            f"{html_form.banner(v)}{html_form.failures_box(v)}"
            "<a href='#gs-load'>gs-load's tables: below Locust's</a></div>")


def inject(page: str, out: Outcome) -> str:
    """Locust's HTML report with the verdict banner at the top of its body and gs-load's
    section at the end."""
    section = html_section(out)
    at = page.rfind("</body>")
    page = page[:at] + section + page[at:] if at >= 0 else page + section
    # The page's own <body> tag is the last one: Locust's inline script bundle, in the
    # head, holds the string "<body" too.
    tops = list(re.finditer(r"<body[^>]*>", page))
    if not tops:
        return banner(out) + page
    top = tops[-1]
    return page[:top.end()] + banner(out) + page[top.end():]
