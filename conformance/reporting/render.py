"""Render a run's per-clause verdicts: terminal text, Markdown, self-contained HTML, JUnit XML.

Each form lists every clause as green, red (with the failing example: hypothesis' shrunk
input and the last HTTP exchanges), skipped (with why, and what would let the run judge it)
or not-applicable (outside the run's profile), with the side it is judged on (client or
server, :attr:`ClauseVerdict.side`) and the clause's source.
"""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

from conformance.reporting import formats
from conformance.reporting.clean import printable
from conformance.reporting.formats import html as html_form
from conformance.reporting.formats import json as json_form
from conformance.reporting.formats import junit as junit_form
from conformance.reporting.formats import markdown as md
from conformance.reporting.formats import text as text_form
from conformance.reporting.model import Failure, Verdict, curl_line
from conformance.reporting.summary import summary_lines
from conformance.reporting.verdicts import ClauseVerdict, RunResults
from contract.forms import DEFAULT_DIALECT

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
    verdict = ("CONFORMS" if res.ok else "INTERRUPTED" if res.interrupted
               else "NOTHING JUDGED" if res.judged_nothing else "DOES NOT CONFORM")
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


def rerun_command(res: RunResults, cid: str) -> str:
    """The command that reruns just clause ``cid`` against the run's target."""
    cmd = ["gs-conformance"]
    if res.target.startswith(("http://", "https://")):
        cmd += ["--url", res.target]
    if res.profile != "current":
        cmd += ["--profile", res.profile]
    for key in ("mutant", "dialect", "engine"):
        value = res.settings.get(key)
        if value and (key != "dialect" or value != DEFAULT_DIALECT):
            cmd += [f"--{key}", str(value)]
    return " ".join(shlex.quote(part) for part in [*cmd, "--clauses", cid])


_EXCHANGE = re.compile(r"^> [A-Z]+ \S+$", re.M)


def offending_exchange(example: str) -> str:
    """The last HTTP exchange a failing example shows ('' when it shows none)."""
    starts = [m.start() for m in _EXCHANGE.finditer(example)]
    if not starts:
        return ""
    tail = example[starts[-1]:].strip()
    return "\n".join(tail.splitlines()[:12])


def failure_of(res: RunResults, v: ClauseVerdict) -> Failure:
    example = v.examples[0]["text"] if v.examples else ""
    exchange = offending_exchange(example)
    return Failure(what=v.id, reason=v.reason or "red", side=v.side, exchange=exchange,
                   rerun=rerun_command(res, v.id), curl=curl_line(exchange), binding=v.binding,
                   anchor=v.id)


def verdict_of(res: RunResults) -> Verdict:
    """The run as the kit's one verdict model (conformance.reporting.model)."""
    red = res.by_status("red")
    causes = []
    for cause in res.root_causes:
        exchange = offending_exchange(cause.evidence)
        causes.append(Failure(
            what=cause.clause, anchor=cause.clause, exchange=exchange, curl=curl_line(exchange),
            reason=f"{cause.summary} ({len(cause.skipped)} clauses skipped because of it)",
            rerun=rerun_command(res, cause.clause)))
    return Verdict(
        tool="gs-conformance", target=res.target, ok=res.ok, headline=headline(res),
        judged=sum(v.status in ("green", "red") for v in res.verdicts), root_causes=causes,
        failures=[failure_of(res, v) for v in red if v.binding],
        decided=[failure_of(res, v) for v in red if not v.binding],
        passes=len(res.by_status("green")), skips=len(res.by_status("skipped")),
    )


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
        lines.extend("   | " + line for line in printable(ex["text"]).strip().splitlines()[:60])


def text(res: RunResults, colour: bool = False, examples: bool = True) -> str:
    """The terminal table, one line per clause, failing examples after it."""

    def paint(status: str, word: str) -> str:
        return f"{_ANSI[status]}{word}{_RESET}" if colour else word

    lines = [f"== conformance: profile {res.profile} against {printable(res.target)} =="]
    lines.extend(paint("red", printable(line)) for line in root_cause_lines(res))
    if res.selected:
        lines.append(f"(restricted to {len(res.selected)} selected clauses)")
    for area, title, items in res.by_area():
        lines.append(f"-- {area}: {title}")
        for v in items:
            why = printable(" ".join(note(v).split()))
            extra = f"  ({why[:240]})" if why else ""
            level = "MUST  " if v.must else "SHOULD"
            lines.append(
                f"  {paint(v.shown, _MARK[v.shown])} {level} {v.id:<20} {v.side:<6} {v.source:<10} "
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
    lines.extend(text_form.ending(verdict_of(res), colour))
    return "\n".join(lines)


def markdown(res: RunResults) -> str:
    """The Markdown report: verdict and failures box first, then the clause tables."""
    out = [*md.head(f"Conformance report: profile {res.profile}", verdict_of(res)),
           f"Result: {md.text(tally(res))}; {res.duration_s:.1f}s", "",
           *(f"**{md.text(line)}**  " for line in root_cause_lines(res))]
    failing_skips = [v.id for v in res.failing() if v.status == "skipped"]
    if failing_skips:
        out += [
            "With `--require-all` these skipped MUST clauses fail the run: "
            + ", ".join(md.code(cid) for cid in failing_skips),
            "",
        ]
    if res.settings:
        out.append("Settings: " + ", ".join(md.code(f"{k}={v}") for k, v in res.settings.items()))
        out.append("")
    out += [f"    {printable(line)}" for line in summary_lines(res)] + [""]
    for title, shown in (("Failing examples", _binding_reds(res)),
                         (f"Advisory ({NOT_BINDING})", _advisories(res))):
        if not shown:
            continue
        out += [f"## {md.text(title)}", ""]
        for v in shown:
            out += [f"### {md.code(v.id)}", "", md.text(v.text)]
            for ex in v.examples[:3]:
                out += ["", f"test {md.code(ex['test'])}", "", md.block(ex["text"].strip())]
            out.append("")
    for area, title, items in res.by_area():
        out += [f"## {md.text(area)}: {md.text(title)}", ""]
        out += md.table(
            ("status", "level", "clause", "side", "source", "text", "note"),
            [(f"{_ICON[v.shown]} {v.shown}", v.level, md.code(v.id), md.text(v.side), md.text(v.source),
              md.text(v.text), md.text(note(v))) for v in items],
        )
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
table.detail{border-collapse:collapse;width:100%;margin-bottom:18px;font-size:13px;table-layout:fixed}
table.detail th,table.detail td{border-bottom:1px solid #e3e3e3;padding:4px 6px;text-align:left;vertical-align:top}
table.detail col.st{width:96px} table.detail col.lv{width:58px} table.detail col.id{width:190px}
table.detail col.src{width:90px} table.detail col.sd{width:64px} table.detail col.promise{width:40%}
.pill{display:inline-block;padding:1px 6px;border-radius:10px;color:#fff;font-size:11px;font-weight:600}
details summary{cursor:pointer;color:#a22}
"""


def _cell(v: ClauseVerdict) -> str:
    cls = "cell should" if not v.must else "cell"
    tip = html_form.safe(
        f"{v.id} [{v.level}, {v.side}, {v.source}] {v.shown}: {v.text}"
        + (f" - {note(v)}" if note(v) else "")
    )
    short = html.escape(v.id.split("-", 1)[1])
    return (
        f'<a class="{cls}" href="#{html.escape(v.id)}" title="{tip}" '
        f'style="background:{_COLOUR[v.shown]}">{short}</a>'
    )


def html_page(res: RunResults) -> str:
    """A self-contained page: verdict and failures box, colour matrix by area, then the
    clause tables."""
    e = html_form.safe
    parts = [*_html_summary(res), "<table class='matrix'>"]
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
            "<table class='detail'><colgroup><col class='st'><col class='lv'><col class='id'>"
            "<col class='sd'><col class='src'><col class='promise'><col></colgroup>"
            "<tr><th>status</th><th>level</th><th>clause</th><th>side</th>"
            "<th>source</th><th>promise</th><th>note</th></tr>"
        )
        parts.extend(_html_row(v) for v in items)
        parts.append("</table>")
    return html_form.page(f"Cortex Training conformance: profile {res.profile}", verdict_of(res),
                          "\n".join(parts), _CSS)


def _html_summary(res: RunResults) -> list[str]:
    """The page's head lines: target, verdict and legend, failing skips, settings, tally."""
    c = _shown_counts(res)
    e = html_form.safe
    legend = "".join(
        f"<span style='background:{_COLOUR[status]}'></span>{c[status]} {status}"
        for status in _COLOUR
    )
    parts = [
        f"<div class='sub'>target <code>{e(res.target)}</code> &middot; {res.duration_s:.1f}s"
        + (f" &middot; {len(res.selected)} selected clauses" if res.selected else "")
        + "</div>",
        f"<div><span class='legend'>{legend}"
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
    e = html_form.safe
    cell = f"<div>{e(note(v))}</div>" if note(v) else ""
    if v.status == "red":
        for ex in v.examples[:3]:
            cell += (
                f"<details><summary>failing example ({e(ex['test'])})</summary>"
                f"<pre>{html_form.safe(ex['text'].strip())}</pre></details>"
            )
    return (
        f"<tr id='{e(v.id)}'><td><span class='pill' style='background:{_COLOUR[v.shown]}'>"
        f"{v.shown}</span></td><td>{v.level}</td><td><code>{e(v.id)}</code></td><td>{e(v.side)}</td>"
        f"<td>{e(v.source)}</td><td>{e(v.text)}</td><td>{cell}</td></tr>"
    )


def junit(res: RunResults) -> str:
    """JUnit XML with one testcase per clause, for CI dashboards."""
    failing = {v.id for v in res.failing()}
    cases = [
        junit_form.Case(
            name=v.id, classname=f"gs.{v.area}",
            status=(junit_form.FAILED if v.id in failing else junit_form.PASSED if v.status == "green"
                    else junit_form.SKIPPED),
            message=f"[{v.level}, {v.side}, {v.shown}] {note(v) or v.reason}",
            text="\n\n".join(f"{ex['test']}\n{ex['text']}" for ex in v.examples[:3]),
            properties={"status": v.shown, "side": v.side, "source": v.source, "level": v.level},
            out=f"[{v.level}, {v.side}, {v.source}] {v.text}",
        )
        for v in res.verdicts
    ]
    suite = junit_form.Suite(f"gs-conformance-{res.profile}", cases, res.duration_s,
                             {"target": res.target, "profile": res.profile})
    return junit_form.document([suite])


def write(res: RunResults, path: str | Path) -> Path:
    """Write the report form the suffix asks for (.html/.htm, .md, .xml, .json, else text)."""
    return formats.write(path, {
        "html": lambda: html_page(res), "markdown": lambda: markdown(res),
        "junit": lambda: junit(res), "text": lambda: text(res),
        "json": lambda: json_form.document(verdict_of(res), res.to_json()),
    })
