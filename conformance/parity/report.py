"""The parity report, in every form the kit writes (conformance.reporting.formats).

Every form starts with the verdict and the failures box: each divergent exchange with its
first differing field, the exchange, ``gs-parity TAPE --only N`` to replay just it and, for
a URL, a ``curl`` line. Then, per tape: divergent exchanges (each field that differs, the
recorded and the new answer side by side) before the ones with accepted differences only,
and skipped exchanges with why. JUnit has one test case per exchange group (a conformance
property, or a job).
"""

from __future__ import annotations

import json
import shlex
import zlib
from collections import defaultdict
from typing import Any

from conformance.parity import matrix
from conformance.parity.replay import ExchangeResult, Replay
from conformance.reporting import formats
from conformance.reporting.clean import clip
from conformance.reporting.formats import html as html_form
from conformance.reporting.formats import json as json_form
from conformance.reporting.formats import junit as junit_form
from conformance.reporting.formats import markdown as md
from conformance.reporting.formats import text as text_form
from conformance.reporting.model import Failure, Verdict
from contract.redact import scrub_text

_SIDE_CHARS = 6000
#: How the embedded target's overrides read as gs-parity options.
_OPTION = {"mutant": "--mutant", "engine": "--engine", "status_style": "--status-style",
           "result_delivery": "--delivery"}


def headline(rep: Replay) -> str:
    n = len(rep.results)
    skipped = sum(r.skipped is not None for r in rep.results)
    accepted = sum(1 for r in rep.results for d in r.divergences if d.accepted)
    verdict = "PARITY" if rep.ok else "DIVERGES" if rep.divergent else "NOTHING COMPARED"
    rebuilt = f", {rep.rebuilt} request bodies rebuilt from their skeleton" if rep.rebuilt else ""
    only = f" (only #{', #'.join(map(str, rep.only))})" if rep.only else ""
    return (f"{verdict}: {rep.tape} against {rep.target}{only}: {n} exchanges, {rep.compared} compared, "
            f"{len(rep.divergent)} divergent, {accepted} accepted differences, {skipped} skipped{rebuilt}; "
            f"replay {rep.replay_s:.1f}s = {rep.ratio:.2f}x the recorded run ({rep.recorded_s:.1f}s)")


def _where(r: ExchangeResult) -> str:
    return f"#{r.seq} {r.method} {r.route} [{r.group or r.server}]"


def rerun_command(rep: Replay, seq: int) -> str:
    """``gs-parity TAPE --only N`` against the replay's target."""
    cmd = ["gs-parity", rep.tape, "--only", str(seq)]
    if rep.target.startswith(("http://", "https://")):
        cmd += ["--url", rep.target]
    else:
        for part in rep.target.split()[2:]:  # "embedded fake k=v ..."
            key, _, value = part.partition("=")
            if key in _OPTION:
                cmd += [_OPTION[key], value]
    return " ".join(shlex.quote(c) for c in cmd)


def _failure(rep: Replay, r: ExchangeResult, tapes: int) -> Failure:
    found = [d for d in r.divergences if d.accepted is None]
    reason = found[0].describe() + (f" (and {len(found) - 1} more fields)" if len(found) > 1 else "")
    new = r.new or {}
    exchange = f"{r.method} {r.path} -> recorded {r.recorded.get('status')}, now {new.get('status')}"
    curl = ""
    if rep.target.startswith(("http://", "https://")):
        curl = (f"curl -sS -X {r.method} {shlex.quote(rep.target.rstrip('/') + r.path)} "
                '-H "Authorization: Bearer $GS_TOKEN"')
    what = (f"{rep.tape} " if tapes > 1 else "") + _where(r)
    return Failure(what=what, reason=reason, exchange=exchange, rerun=rerun_command(rep, r.seq),
                   curl=curl, anchor=f"x{reps_index(rep)}-{r.seq}")


def reps_index(rep: Replay) -> int:
    """A short, stable number for a tape (the anchors of its exchanges in a page)."""
    return zlib.crc32(rep.tape.encode()) % 100_000


def verdict_of(reps: list[Replay]) -> Verdict:
    """The replays as the kit's one verdict model."""
    failures = [_failure(rep, r, len(reps)) for rep in reps for r in rep.divergent]
    ok = all(rep.ok for rep in reps)
    line = headline(reps[0]) if len(reps) == 1 else (
        f"{'PARITY' if ok else 'NOT PARITY'}: {len(reps)} tapes; " + "; ".join(headline(r) for r in reps))
    return Verdict(tool="gs-parity", target=", ".join(dict.fromkeys(r.target for r in reps)), ok=ok,
                   headline=line, judged=sum(r.compared for r in reps), failures=failures,
                   passes=sum(r.compared - len(r.divergent) for r in reps),
                   skips=sum(len(r.results) - r.compared for r in reps))


def text(reps: list[Replay], colour: bool = False, limit: int = 50) -> str:
    red, reset = (text_form.RED, text_form.RESET) if colour else ("", "")
    safe = text_form.safe
    lines: list[str] = []
    for rep in reps:
        lines.append(f"== parity: {safe(rep.tape)} against {safe(rep.target)} ==")
        lines.extend(f"note: {safe(n)}" for n in rep.notes)
        for r in rep.divergent[:limit]:
            lines.append(f"{red}DIVERGES{reset} {safe(_where(r))}")
            lines.append(f"   path {safe(clip(r.path, 300))}")
            lines.extend(f"   - {safe(d.describe())}" for d in r.divergences if d.accepted is None)
        if len(rep.divergent) > limit:
            lines.append(f"... and {len(rep.divergent) - limit} more divergent exchanges (see the HTML report)")
        accepted = [(r, d) for r in rep.results for d in r.divergences if d.accepted]
        if accepted:
            lines.append(f"accepted differences ({len(accepted)}):")
            for reason, count in _count(d.accepted or "" for _, d in accepted):
                lines.append(f"   {count} x {safe(reason)}")
        skipped = [r for r in rep.results if r.skipped]
        if skipped:
            lines.append(f"skipped ({len(skipped)}):")
            for reason, count in _count(r.skipped or "" for r in skipped):
                lines.append(f"   {count} x {safe(reason)}")
    v = verdict_of(reps)
    lines += text_form.failures_box(v, colour, limit=min(limit, 20))
    lines += [(text_form.GREEN if rep.ok else text_form.RED) + safe(headline(rep)) + text_form.RESET
              if colour else safe(headline(rep)) for rep in reps]
    return scrub_text("\n".join(lines))


def _count(items: Any) -> list[tuple[str, int]]:
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[item] += 1
    return sorted(counts.items(), key=lambda p: -p[1])


def markdown(reps: list[Replay]) -> str:
    out: list[str] = md.head("gs-parity report", verdict_of(reps))
    for rep in reps:
        out += [f"## Parity: {md.code(rep.tape)} against {md.code(rep.target)}", "",
                f"**{md.text(headline(rep))}**", ""]
        out += [f"- note: {md.text(n)}" for n in rep.notes] + ([""] if rep.notes else [])
        if rep.divergent:
            out += md.table(("exchange", "path", "field", "difference", "recorded", "new"), [
                (md.text(_where(r)), md.code(clip(r.path, 200)), md.code(d.field), md.text(d.kind),
                 md.code(clip(repr(d.recorded), 80)), md.code(clip(repr(d.new), 80)))
                for r in rep.divergent for d in r.divergences if d.accepted is None])
            out.append("")
        accepted = [(r, d) for r in rep.results for d in r.divergences if d.accepted]
        if accepted:
            out += ["Accepted differences:", ""]
            out += [f"- {count} x {md.text(reason)}" for reason, count in _count(d.accepted for _, d in accepted)]
            out.append("")
        skipped = [r for r in rep.results if r.skipped]
        if skipped:
            out += ["Skipped exchanges:", ""]
            out += [f"- {count} x {md.text(reason)}" for reason, count in _count(r.skipped for r in skipped)]
            out.append("")
    return "\n".join(out) + "\n" + matrix.markdown(reps)


def _pretty(answer: dict[str, Any] | None) -> str:
    if answer is None:
        return "(not sent)"
    text = json.dumps(answer, indent=1, sort_keys=True, default=str)
    return text if len(text) <= _SIDE_CHARS else text[:_SIDE_CHARS] + f"\n... ({len(text)} chars)"


_CSS = """
h2{font-size:1.15em;margin-top:1.6em}
.ok{color:#2e7d32} .bad{color:#c62828} .acc{color:#8d6e00} .skip{color:#777}
.summary{padding:.6em 1em;border-radius:6px;background:#f4f6f8;display:inline-block}
table{margin:.4em 0} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f0}
.side{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:10px}
.side pre{background:#fafafa;margin:0;font-size:11.5px}
mark.bad{background:#ffcdd2} mark.acc{background:#ffe9b0}
details.x{margin:.5em 0 1em 0;border-left:4px solid #c62828;padding-left:.8em}
details.x.accepted{border-left-color:#c9a227}
details.matrix{margin:.5em 0 1em 0;border-left:4px solid #bbb;padding-left:.8em}
summary{cursor:pointer;font-weight:600}
"""


def _key(field: str) -> str:
    return f'"{field.rsplit(".", 1)[-1].split("[", 1)[0].split("<", 1)[0]}":'


def _marked(answer: dict[str, Any] | None, divergent: list[str], accepted: list[str]) -> str:
    """The pretty answer, escaped, the lines of differing keys marked: red for a divergence,
    amber for an accepted difference."""
    bad, ok = {_key(f) for f in divergent}, {_key(f) for f in accepted}
    lines = []
    for line in _pretty(answer).splitlines():
        text = html_form.safe(line)
        cls = "bad" if any(k in line for k in bad) else "acc" if any(k in line for k in ok) else ""
        lines.append(f"<mark class='{cls}'>{text}</mark>" if cls else text)
    return "\n".join(lines)


def _by_field(rep: Replay) -> str:
    counts = _count(f"{r.route}\t{d.field}\t{d.kind}" for r in rep.divergent
                    for d in r.divergences if d.accepted is None)
    if not counts:
        return ""
    return html_form.table(("route", "field", "difference", "exchanges"),
                           [(*key.split("\t"), str(n)) for key, n in counts[:40]])


def _panel(rep: Replay, r: ExchangeResult) -> str:
    esc = html_form.safe
    kind = "divergent" if r.diverged else "accepted"
    rows = "".join(
        f"<tr><td><code>{esc(d.field)}</code></td><td>{esc(d.kind)}</td>"
        f"<td><code>{esc(clip(repr(d.recorded), 400))}</code></td><td><code>{esc(clip(repr(d.new), 400))}</code></td>"
        f"<td>{'<span class=acc>accepted: ' + esc(d.accepted) + '</span>' if d.accepted else '<span class=bad>divergence</span>'}</td></tr>"
        for d in r.divergences)
    bad = [d.field for d in r.divergences if d.accepted is None]
    ok = [d.field for d in r.divergences if d.accepted]
    return (f'<details class="x {kind}" id="x{reps_index(rep)}-{r.seq}" {"open" if r.diverged else ""}>'
            f"<summary>{esc(_where(r))}</summary>"
            f"<p><code>{esc(r.method)} {esc(clip(r.path, 400))}</code></p>"
            f"<table><tr><th>field</th><th>difference</th><th>recorded</th><th>new</th><th></th></tr>{rows}</table>"
            f'<div class="side"><div><b>recorded answer</b><pre>{_marked(r.recorded, bad, ok)}</pre></div>'
            f"<div><b>new answer</b><pre>{_marked(r.new, bad, ok)}</pre></div></div></details>")


def html_report(reps: list[Replay]) -> str:
    esc = html_form.safe
    body: list[str] = []
    for rep in reps:
        cls = "ok" if rep.ok else "bad"
        body.append(f"<h2>{esc(rep.tape)} against {esc(rep.target)}</h2>")
        body.append(f'<p class="summary"><b class="{cls}">{esc(headline(rep))}</b></p>')
        body += [f'<p class="skip">note: {esc(n)}</p>' for n in rep.notes]
        body.append(_by_field(rep))
        body.append(f"<details class='matrix'><summary>Parity matrix (per operation)</summary>"
                    f"{matrix.html_table(rep)}</details>")
        if rep.compared and not rep.divergent and not any(r.divergences for r in rep.results):
            body.append('<p class="ok">Every replayed answer matches its recording.</p>')
        if rep.divergent:
            body.append(f"<h3 class='bad'>Divergent exchanges ({len(rep.divergent)})</h3>")
            body += [_panel(rep, r) for r in rep.divergent]
        accepted = [r for r in rep.results if r.divergences and not r.diverged]
        if accepted:
            body.append(f"<h3 class='acc'>Exchanges with accepted differences only ({len(accepted)})</h3>")
            body += [_panel(rep, r) for r in accepted]
        skipped = [r for r in rep.results if r.skipped]
        if skipped:
            items = "".join(f"<li>{n} x {esc(reason)}</li>" for reason, n in _count(r.skipped for r in skipped))
            body.append(f'<p class="skip">Skipped exchanges:</p><ul class="skip">{items}</ul>')
    return html_form.page("gs-parity report", verdict_of(reps), "".join(body), _CSS + matrix.MATRIX_CSS)


def junit(reps: list[Replay]) -> str:
    """One test suite per tape, one test case per exchange group."""
    suites = []
    for rep in reps:
        groups: dict[str, list[ExchangeResult]] = defaultdict(list)
        for r in rep.results:
            groups[r.group or r.server].append(r)
        cases = []
        for name, rs in groups.items():
            bad = [r for r in rs if r.diverged]
            if bad:
                msg = "; ".join(d.describe() for r in bad for d in r.divergences if d.accepted is None)
                text = "\n".join(f"{_where(r)} {r.path}\n" + "\n".join(
                    f"  - {d.describe()}" for d in r.divergences if d.accepted is None) for r in bad)
                cases.append(junit_form.Case(name, rep.tape, junit_form.FAILED, msg, text))
            elif all(r.skipped for r in rs):
                cases.append(junit_form.Case(name, rep.tape, junit_form.SKIPPED, rs[0].skipped or ""))
            else:
                cases.append(junit_form.Case(name, rep.tape))
        if not rep.compared:  # nothing compared is no evidence: a failure CI shows
            cases.append(junit_form.Case("nothing compared", rep.tape, junit_form.FAILED, headline(rep)))
        suites.append(junit_form.Suite(f"parity {rep.tape}", cases, rep.replay_s))
    return junit_form.document(suites)


def write(reps: list[Replay], path: str) -> None:
    """Write the report in the form the suffix names (.html, .md, .xml, .json, else text)."""
    formats.write(path, {
        "html": lambda: html_report(reps), "markdown": lambda: markdown(reps),
        "junit": lambda: junit(reps), "text": lambda: text(reps),
        "json": lambda: json_form.document(verdict_of(reps), {"tapes": [as_json(rep) for rep in reps]}),
    })


def as_json(rep: Replay) -> dict[str, Any]:
    return {
        "tape": rep.tape, "target": rep.target, "ok": rep.ok, "recorded_s": rep.recorded_s,
        "replay_s": rep.replay_s, "ratio": rep.ratio, "exchanges": len(rep.results),
        "compared": rep.compared,
        "divergent": [{"seq": r.seq, "group": r.group, "route": r.route, "path": r.path,
                       "divergences": [vars(d) for d in r.divergences]} for r in rep.divergent],
        "skipped": sum(r.skipped is not None for r in rep.results),
        "rebuilt": rep.rebuilt,
        # What the tape itself holds, as recorded: its size, when and by what, its end line.
        "recorded": {"created": rep.meta.get("created"), "source": rep.meta.get("source"),
                     "tape_bytes": rep.tape_bytes, "exchanges": rep.end.get("exchanges"),
                     "bodies": rep.end.get("bodies")},
    }
