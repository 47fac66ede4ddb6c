"""Render a run's per-clause verdicts: terminal text, Markdown, self-contained HTML, JUnit XML.

Each form lists every clause as green, red (with the failing example: hypothesis' shrunk
input and the last HTTP exchanges), skipped (with why, and what would let the run judge it)
or not-applicable (outside the run's profile), with the clause's source.
"""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.reporting.summary import summary_lines
from conformance.reporting.verdicts import ClauseVerdict, RunResults

# Keyed by ClauseVerdict.shown: a decided clause's red against a URL is "advisory", in its
# own word and colour, so a server team never reads it as a failure.
_MARK = {"green": "PASS", "red": "FAIL", "advisory": "ADVI", "skipped": "SKIP", "not-applicable": "N/A "}
_ANSI = {"green": "\x1b[32m", "red": "\x1b[31m", "advisory": "\x1b[36m", "skipped": "\x1b[33m",
         "not-applicable": "\x1b[90m"}
_RESET = "\x1b[0m"
_COLOUR = {"green": "#2e9d4c", "red": "#d23b3b", "advisory": "#3b7dd2", "skipped": "#c9a227",
           "not-applicable": "#9a9a9a"}
_ICON = {"green": "🟢", "red": "🔴", "advisory": "🔵", "skipped": "🟡", "not-applicable": "⚪"}
#: Why an advisory clause does not fail the run.
NOT_BINDING = "advisory: the kit's choice where the spec is silent; never fails a run against a URL"


def _shown_counts(res: RunResults) -> dict[str, int]:
    """Clauses by the word a report shows (advisory apart from red)."""
    out = dict.fromkeys(_MARK, 0)
    for v in res.verdicts:
        out[v.shown] += 1
    return out


def _binding_reds(res: RunResults) -> list[ClauseVerdict]:
    return [v for v in res.verdicts if v.status == "red" and v.binding]


def _advisories(res: RunResults) -> list[ClauseVerdict]:
    return [v for v in res.verdicts if v.advisory]


def root_cause_lines(res: RunResults) -> list[str]:
    """One line per failed shared set-up: the clause it breaks, what failed, what it skipped."""
    return [f"root cause {c.clause}: {c.summary} ({len(c.skipped)} clauses skipped because of it)"
            for c in res.root_causes]


def tally(res: RunResults) -> str:
    """``3 green, 0 red, 1 advisory, 2 skipped, 1 not-applicable``."""
    return ", ".join(f"{n} {status}" for status, n in _shown_counts(res).items())


def headline(res: RunResults) -> str:
    musts = [v for v in res.verdicts if v.must and v.status in ("green", "red")]
    must_green = sum(v.status == "green" for v in musts)
    verdict = "CONFORMS" if res.ok else "DOES NOT CONFORM"
    causes = f"{len(res.root_causes)} root cause(s) ({', '.join(c.clause for c in res.root_causes)}), " \
        if res.root_causes else ""
    line = (
        f"{verdict}: profile {res.profile}, {causes}{len(res.verdicts)} clauses: {tally(res)}; "
        f"MUST {must_green}/{len(musts)} judged green "
        f"({res.duration_s:.1f}s, target {res.target})"
    )
    skipped = [v.id for v in res.failing() if v.status == "skipped"]
    if skipped:
        line += f"\n--require-all: {len(skipped)} skipped MUST clauses fail the run: " + ", ".join(
            skipped
        )
    return line


def note(v: ClauseVerdict) -> str:
    """The note a report shows beside a clause: why it is skipped (and what enables it),
    why a red one does not count, nothing for green and not-applicable."""
    if v.status == "skipped":
        return v.reason + (f" [enable: {v.enable}]" if v.enable else "")
    if v.status == "red":
        return v.reason + ("" if v.binding else f" [{NOT_BINDING}]")
    return ""


def _examples(v: ClauseVerdict, lines: list[str]) -> None:
    lines.append(f"-- {v.id}: {v.text}")
    for ex in v.examples[:2]:
        lines.append(f"   test {ex['test']}")
        lines.extend("   | " + line for line in ex["text"].strip().splitlines()[:60])


def text(res: RunResults, colour: bool = False, examples: bool = True) -> str:
    """The terminal table, one line per clause, failing examples after it."""

    def paint(status: str, word: str) -> str:
        return f"{_ANSI[status]}{word}{_RESET}" if colour else word

    lines = [f"== conformance: profile {res.profile} against {res.target} =="]
    lines.extend(paint("red", line) for line in root_cause_lines(res))
    if res.selected:
        lines.append(f"(restricted to {len(res.selected)} selected clauses)")
    for area, title, items in res.by_area():
        lines.append(f"-- {area}: {title}")
        for v in items:
            why = note(v)
            extra = f"  ({why[:240]})" if why else ""
            level = "MUST  " if v.must else "SHOULD"
            lines.append(
                f"  {paint(v.shown, _MARK[v.shown])} {level} {v.id:<20} {v.source:<10} "
                f"{v.text[:80]}{extra}"
            )
    red, advisory = _binding_reds(res), _advisories(res)
    if examples and red:
        lines.append("")
        lines.append("== failing examples ==")
        for v in red:
            _examples(v, lines)
    if examples and advisory:
        lines.append("")
        lines.append(f"== advisory ({NOT_BINDING}) ==")
        for v in advisory:
            _examples(v, lines)
    lines.append("")
    lines.extend(summary_lines(res))
    lines.append(paint("green" if res.ok else "red", headline(res)))
    return "\n".join(lines)


def _md_cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def markdown(res: RunResults) -> str:
    out = [
        f"# Conformance report: profile `{res.profile}`",
        "",
        f"Target: `{res.target}`  ",
        f"Result: **{'conforms' if res.ok else 'does not conform'}** "
        f"({tally(res)}; {res.duration_s:.1f}s)",
        "",
        *(f"**{_md_cell(line)}**  " for line in root_cause_lines(res)),
    ]
    failing_skips = [v.id for v in res.failing() if v.status == "skipped"]
    if failing_skips:
        out += [
            "With `--require-all` these skipped MUST clauses fail the run: "
            + ", ".join(f"`{cid}`" for cid in failing_skips),
            "",
        ]
    if res.settings:
        out.append("Settings: " + ", ".join(f"`{k}={v}`" for k, v in res.settings.items()))
        out.append("")
    out += [f"    {line}" for line in summary_lines(res)] + [""]
    for area, title, items in res.by_area():
        out += [
            f"## {area}: {title}",
            "",
            "| status | level | clause | source | text | note |",
            "|---|---|---|---|---|---|",
        ]
        for v in items:
            out.append(
                f"| {_ICON[v.shown]} {v.shown} | {v.level} | `{v.id}` | {v.source} | "
                f"{_md_cell(v.text)} | {_md_cell(note(v))} |"
            )
        out.append("")
    for title, shown in (("Failing examples", _binding_reds(res)),
                         (f"Advisory ({NOT_BINDING})", _advisories(res))):
        if not shown:
            continue
        out += [f"## {title}", ""]
        for v in shown:
            out.append(f"### `{v.id}`")
            out.append("")
            out.append(v.text)
            for ex in v.examples[:3]:
                out += ["", f"test `{ex['test']}`", "", "```", ex["text"].strip(), "```"]
            out.append("")
    return "\n".join(out)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:22px;margin:0 0 4px} .sub{color:#555;margin-bottom:16px}
.verdict{display:inline-block;padding:4px 10px;border-radius:4px;color:#fff;font-weight:600}
.legend span{display:inline-block;width:12px;height:12px;border-radius:2px;margin:0 4px 0 12px;vertical-align:middle}
table.matrix{border-collapse:collapse;margin:12px 0 24px}
table.matrix td{padding:2px 4px;vertical-align:middle}
table.matrix td.area{font-weight:600;white-space:nowrap;padding-right:12px}
.cell{display:inline-block;min-width:14px;height:18px;margin:1px;border-radius:3px;color:#fff;
font-size:10px;line-height:18px;padding:0 4px;text-decoration:none;font-family:ui-monospace,monospace}
.should{opacity:.75;border:1px dashed #fff}
table.detail{border-collapse:collapse;width:100%;margin-bottom:18px;font-size:13px}
table.detail th,table.detail td{border-bottom:1px solid #e3e3e3;padding:4px 6px;text-align:left;vertical-align:top}
.pill{display:inline-block;padding:1px 6px;border-radius:10px;color:#fff;font-size:11px;font-weight:600}
code{font-family:ui-monospace,monospace;font-size:12px}
pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px;max-height:480px}
details summary{cursor:pointer;color:#a22}
"""


def _cell(v: ClauseVerdict) -> str:
    cls = "cell should" if not v.must else "cell"
    tip = html.escape(
        f"{v.id} [{v.level}, {v.source}] {v.shown}: {v.text}"
        + (f" - {note(v)}" if note(v) else "")
    )
    short = html.escape(v.id.split("-", 1)[1])
    return (
        f'<a class="{cls}" href="#{html.escape(v.id)}" title="{tip}" '
        f'style="background:{_COLOUR[v.shown]}">{short}</a>'
    )


def html_page(res: RunResults) -> str:
    """A self-contained page: colour matrix by area, then the clause tables."""
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Conformance: {e(res.profile)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Cortex Training conformance: profile <code>{e(res.profile)}</code></h1>",
        *_html_summary(res),
        "<table class='matrix'>",
    ]
    for area, title, items in res.by_area():
        parts.append(
            f"<tr><td class='area' title='{e(title)}'>{e(area)}</td><td>"
            + "".join(_cell(v) for v in items)
            + "</td></tr>"
        )
    parts.append("</table>")
    for area, title, items in res.by_area():
        parts.append(f"<h2 style='font-size:16px'>{e(area)}: {e(title)}</h2>")
        parts.append(
            "<table class='detail'><tr><th>status</th><th>level</th><th>clause</th>"
            "<th>source</th><th>promise</th><th>note</th></tr>"
        )
        parts.extend(_html_row(v) for v in items)
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _html_summary(res: RunResults) -> list[str]:
    """The page's head lines: target, verdict and legend, failing skips, settings, tally."""
    c = _shown_counts(res)
    e = html.escape
    legend = "".join(
        f"<span style='background:{_COLOUR[status]}'></span>{c[status]} {status}"
        for status in _COLOUR
    )
    parts = [
        f"<div class='sub'>target <code>{e(res.target)}</code> &middot; {res.duration_s:.1f}s"
        + (f" &middot; {len(res.selected)} selected clauses" if res.selected else "")
        + "</div>",
        f"<div><span class='verdict' style='background:{_COLOUR['green' if res.ok else 'red']}'>"
        f"{'CONFORMS' if res.ok else 'DOES NOT CONFORM'}</span>"
        f"<span class='legend'>{legend}"
        "<span style='background:#999;border:1px dashed #fff'></span>dashed = SHOULD</span></div>",
    ]
    parts.extend(f"<div class='sub' style='color:{_COLOUR['red']}'>{e(line)}</div>"
                 for line in root_cause_lines(res))
    failing_skips = [v.id for v in res.failing() if v.status == "skipped"]
    if failing_skips:
        parts.append(
            "<div class='sub'>With <code>--require-all</code> these skipped MUST clauses fail "
            "the run: " + ", ".join(f"<code>{e(cid)}</code>" for cid in failing_skips) + "</div>"
        )
    if res.settings:
        shown = (f"<code>{e(str(k))}={e(str(v))}</code>" for k, v in res.settings.items())
        parts.append("<div class='sub'>" + " &middot; ".join(shown) + "</div>")
    parts.append("<pre class='sub'>" + e("\n".join(summary_lines(res))) + "</pre>")
    return parts


def _html_row(v: ClauseVerdict) -> str:
    """One clause's row of its area's table (a red one with up to three failing examples)."""
    e = html.escape
    cell = f"<div>{e(note(v))}</div>" if note(v) else ""
    if v.status == "red":
        for ex in v.examples[:3]:
            cell += (
                f"<details><summary>failing example ({e(ex['test'])})</summary>"
                f"<pre>{e(ex['text'].strip())}</pre></details>"
            )
    return (
        f"<tr id='{e(v.id)}'><td><span class='pill' style='background:{_COLOUR[v.shown]}'>"
        f"{v.shown}</span></td><td>{v.level}</td><td><code>{e(v.id)}</code></td>"
        f"<td>{e(v.source)}</td><td>{e(v.text)}</td><td>{cell}</td></tr>"
    )


def junit(res: RunResults) -> str:
    """JUnit XML with one testcase per clause, for CI dashboards."""
    failing = {v.id for v in res.failing()}
    suite = ET.Element(
        "testsuite",
        name=f"gs-conformance-{res.profile}",
        tests=str(len(res.verdicts)),
        failures=str(len(failing)),
        skipped=str(sum(v.status != "green" and v.id not in failing for v in res.verdicts)),
        errors="0",
        time=f"{res.duration_s:.2f}",
    )
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="target", value=res.target)
    ET.SubElement(props, "property", name="profile", value=res.profile)
    for v in res.verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"gs.{v.area}", name=v.id, time="0")
        ET.SubElement(case, "properties").extend(
            [ET.Element("property", name=k, value=val)
             for k, val in (("status", v.shown), ("source", v.source), ("level", v.level))]
        )
        message = f"[{v.level}, {v.status}] {note(v) or v.reason}"[:500]
        if v.id in failing:
            fail = ET.SubElement(case, "failure", message=message)
            fail.text = "\n\n".join(f"{ex['test']}\n{ex['text']}" for ex in v.examples[:3])
        elif v.status != "green":
            ET.SubElement(case, "skipped", message=message)
        ET.SubElement(case, "system-out").text = f"[{v.level}, {v.source}] {v.text}"
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(res: RunResults, path: str | Path) -> Path:
    """Write the report form the suffix asks for (.html/.htm, .md, .xml, .json, else text)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    suffix = p.suffix.lower()
    if suffix in (".html", ".htm"):
        p.write_text(html_page(res), encoding="utf-8")
    elif suffix in (".md", ".markdown"):
        p.write_text(markdown(res), encoding="utf-8")
    elif suffix == ".xml":
        p.write_text(junit(res), encoding="utf-8")
    elif suffix == ".json":
        res.write_json(p)
    else:
        p.write_text(text(res), encoding="utf-8")
    return p
