"""The parity report: terminal text, Markdown, self-contained HTML, JUnit XML.

Every form lists each divergent exchange (sequence number, group, route, the recorded and
the new request path) with each field that differs, and the recorded and new answers side
by side; accepted differences are listed with their reason; skipped exchanges with why.
JUnit has one test case per exchange group (a conformance property, or a job).
"""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Any

from conformance.parity import matrix
from conformance.parity.replay import ExchangeResult, Replay
from contract.redact import scrub_text

_SIDE_CHARS = 6000


def headline(rep: Replay) -> str:
    n = len(rep.results)
    skipped = sum(r.skipped is not None for r in rep.results)
    accepted = sum(1 for r in rep.results for d in r.divergences if d.accepted)
    verdict = "PARITY" if rep.ok else "DIVERGES" if rep.divergent else "NOTHING COMPARED"
    rebuilt = f", {rep.rebuilt} request bodies rebuilt from their skeleton" if rep.rebuilt else ""
    return (f"{verdict}: {rep.tape} against {rep.target}: {n} exchanges, {len(rep.divergent)} divergent, "
            f"{accepted} accepted differences, {skipped} skipped{rebuilt}; replay {rep.replay_s:.1f}s = "
            f"{rep.ratio:.2f}x the recorded run ({rep.recorded_s:.1f}s)")


def _where(r: ExchangeResult) -> str:
    return f"#{r.seq} {r.method} {r.route} [{r.group or r.server}]"


def text(reps: list[Replay], colour: bool = False, limit: int = 50) -> str:
    red, green, reset = ("\x1b[31m", "\x1b[32m", "\x1b[0m") if colour else ("", "", "")
    lines: list[str] = []
    for rep in reps:
        lines.append(f"== parity: {rep.tape} against {rep.target} ==")
        lines.extend(f"note: {n}" for n in rep.notes)
        for r in rep.divergent[:limit]:
            lines.append(f"{red}DIVERGES{reset} {_where(r)}")
            lines.append(f"   path {r.path}")
            lines.extend(f"   - {d.describe()}" for d in r.divergences if d.accepted is None)
        if len(rep.divergent) > limit:
            lines.append(f"... and {len(rep.divergent) - limit} more divergent exchanges (see the HTML report)")
        accepted = [(r, d) for r in rep.results for d in r.divergences if d.accepted]
        if accepted:
            lines.append(f"accepted differences ({len(accepted)}):")
            for reason, count in _count(d.accepted or "" for _, d in accepted):
                lines.append(f"   {count} x {reason}")
        skipped = [r for r in rep.results if r.skipped]
        if skipped:
            lines.append(f"skipped ({len(skipped)}):")
            for reason, count in _count(r.skipped or "" for r in skipped):
                lines.append(f"   {count} x {reason}")
        lines.append((green if rep.ok else red) + headline(rep) + reset)
    return scrub_text("\n".join(lines))


def _count(items: Any) -> list[tuple[str, int]]:
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[item] += 1
    return sorted(counts.items(), key=lambda p: -p[1])


def markdown(reps: list[Replay]) -> str:
    out: list[str] = []
    for rep in reps:
        out += [f"## Parity: `{rep.tape}` against {rep.target}", "", f"**{headline(rep)}**", ""]
        if rep.divergent:
            out += ["| exchange | path | field | difference | recorded | new |", "|---|---|---|---|---|---|"]
            for r in rep.divergent:
                for d in r.divergences:
                    if d.accepted is None:
                        out.append(f"| {_md(_where(r))} | `{_md(r.path)}` | `{_md(d.field)}` | {d.kind} "
                                   f"| `{_md(repr(d.recorded))[:80]}` | `{_md(repr(d.new))[:80]}` |")
            out.append("")
        accepted = [(r, d) for r in rep.results for d in r.divergences if d.accepted]
        if accepted:
            out += ["Accepted differences:", ""]
            out += [f"- {count} x {_md(reason)}" for reason, count in _count(d.accepted for _, d in accepted)]
            out.append("")
        skipped = [r for r in rep.results if r.skipped]
        if skipped:
            out += ["Skipped exchanges:", ""]
            out += [f"- {count} x {_md(reason)}" for reason, count in _count(r.skipped for r in skipped)]
            out.append("")
    return "\n".join(out) + "\n" + matrix.markdown(reps)


def _md(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _pretty(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return "(not sent)"
    text = json.dumps(answer, indent=1, sort_keys=True, default=str)
    return text if len(text) <= _SIDE_CHARS else text[:_SIDE_CHARS] + f"\n... ({len(text)} chars)"


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:1.6em}
.ok{color:#2e7d32} .bad{color:#c62828} .acc{color:#8d6e00} .skip{color:#777}
.summary{padding:.6em 1em;border-radius:6px;background:#f4f6f8;display:inline-block}
table{border-collapse:collapse;margin:.4em 0} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0} code{font:12px ui-monospace,monospace}
.side{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:10px}
.side pre{background:#fafafa;border:1px solid #e0e0e0;padding:6px;overflow:auto;max-height:420px;font-size:11.5px;margin:0;white-space:pre-wrap;word-break:break-all}
mark{background:#ffe08a}
details{margin:.5em 0 1em 0;border-left:4px solid #c62828;padding-left:.8em}
details.accepted{border-left-color:#c9a227}
summary{cursor:pointer;font-weight:600}
"""


def _marked(answer: dict[str, Any] | None, fields: list[str]) -> str:
    """The pretty answer, escaped, with the lines of the differing keys highlighted."""
    keys = {f'"{f.rsplit(".", 1)[-1].split("[", 1)[0].split("<", 1)[0]}":' for f in fields}
    lines = []
    for line in _pretty(answer).splitlines():
        text = html.escape(line)
        lines.append(f"<mark>{text}</mark>" if any(k in line for k in keys) else text)
    return "\n".join(lines)


def _by_field(rep: Replay) -> str:
    counts = _count(f"{r.route}\t{d.field}\t{d.kind}" for r in rep.divergent
                    for d in r.divergences if d.accepted is None)
    if not counts:
        return ""
    rows = "".join("<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>".format(
        *(html.escape(p) for p in key.split("\t")), n) for key, n in counts[:40])
    return ("<table><tr><th>route</th><th>field</th><th>difference</th><th>exchanges</th></tr>"
            f"{rows}</table>")


def html_report(reps: list[Replay]) -> str:
    esc = html.escape
    body: list[str] = ["<h1>gs-parity report</h1>"]
    for rep in reps:
        cls = "ok" if rep.ok else "bad"
        body.append(f"<h2>{esc(rep.tape)} against {esc(rep.target)}</h2>")
        body.append(f'<p class="summary"><b class="{cls}">{esc(headline(rep))}</b></p>')
        body += [f'<p class="skip">note: {esc(n)}</p>' for n in rep.notes]
        body.append(_by_field(rep))
        body.append(f"<details><summary>Parity matrix (per operation)</summary>{matrix.html_table(rep)}</details>")
        shown = [r for r in rep.results if r.divergences]
        if not shown and rep.compared:
            body.append('<p class="ok">Every replayed answer matches its recording.</p>')
        for r in shown:
            kind = "accepted" if not r.diverged else "divergent"
            fields = [d.field for d in r.divergences]
            rows = "".join(
                f"<tr><td><code>{esc(d.field)}</code></td><td>{esc(d.kind)}</td>"
                f"<td><code>{esc(repr(d.recorded))}</code></td><td><code>{esc(repr(d.new))}</code></td>"
                f"<td>{'<span class=acc>accepted: ' + esc(d.accepted) + '</span>' if d.accepted else '<span class=bad>divergence</span>'}</td></tr>"
                for d in r.divergences)
            body.append(
                f'<details class="{kind}" {"open" if r.diverged else ""}><summary>{esc(_where(r))}</summary>'
                f"<p><code>{esc(r.method)} {esc(r.path)}</code></p>"
                f"<table><tr><th>field</th><th>difference</th><th>recorded</th><th>new</th><th></th></tr>{rows}</table>"
                f'<div class="side"><div><b>recorded answer</b><pre>{_marked(r.recorded, fields)}</pre></div>'
                f"<div><b>new answer</b><pre>{_marked(r.new, fields)}</pre></div></div></details>")
        skipped = [r for r in rep.results if r.skipped]
        if skipped:
            items = "".join(f"<li>{n} x {esc(reason)}</li>" for reason, n in _count(r.skipped for r in skipped))
            body.append(f'<p class="skip">Skipped exchanges:</p><ul class="skip">{items}</ul>')
    return ("<!doctype html><html><head><meta charset='utf-8'><title>gs-parity report</title>"
            f"<style>{_CSS}{matrix.MATRIX_CSS}</style></head><body>{''.join(body)}</body></html>")


def junit(reps: list[Replay]) -> str:
    """One test suite per tape, one test case per exchange group."""
    suites = ET.Element("testsuites", name="gs-parity")
    for rep in reps:
        groups: dict[str, list[ExchangeResult]] = defaultdict(list)
        for r in rep.results:
            groups[r.group or r.server].append(r)
        failures = sum(any(r.diverged for r in rs) for rs in groups.values())
        suite = ET.SubElement(suites, "testsuite", name=f"parity {rep.tape}", tests=str(len(groups)),
                              failures=str(failures), time=f"{rep.replay_s:.3f}")
        for name, rs in groups.items():
            case = ET.SubElement(suite, "testcase", classname=rep.tape, name=name)
            bad = [r for r in rs if r.diverged]
            if bad:
                msg = "; ".join(d.describe() for r in bad for d in r.divergences if d.accepted is None)
                fail = ET.SubElement(case, "failure", message=msg[:500])
                fail.text = "\n".join(f"{_where(r)} {r.path}\n" + "\n".join(
                    f"  - {d.describe()}" for d in r.divergences if d.accepted is None) for r in bad)
            elif all(r.skipped for r in rs):
                ET.SubElement(case, "skipped", message=rs[0].skipped or "")
    return ET.tostring(suites, encoding="unicode")


def write(reps: list[Replay], path: str) -> None:
    """Write the report in the form the suffix names (.html, .md, .xml, .json, else text)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".html", ".htm"):
        content = html_report(reps)
    elif suffix == ".md":
        content = markdown(reps)
    elif suffix == ".xml":
        content = junit(reps)
    elif suffix == ".json":
        content = json.dumps([as_json(rep) for rep in reps], indent=1, default=str)
    else:
        content = text(reps)
    p.write_text(scrub_text(content), encoding="utf-8")


def as_json(rep: Replay) -> dict[str, Any]:
    return {
        "tape": rep.tape, "target": rep.target, "ok": rep.ok, "recorded_s": rep.recorded_s,
        "replay_s": rep.replay_s, "ratio": rep.ratio, "exchanges": len(rep.results),
        "divergent": [{"seq": r.seq, "group": r.group, "route": r.route, "path": r.path,
                       "divergences": [vars(d) for d in r.divergences]} for r in rep.divergent],
        "skipped": sum(r.skipped is not None for r in rep.results),
    }
