"""The Markdown form: the verdict and the failures box at the top; every string from a
server or a tape escaped (text) or in a code span (ids, paths, commands)."""

from __future__ import annotations

from conformance.reporting.clean import clip, md_block, md_code, md_text
from conformance.reporting.model import Verdict

text = md_text
code = md_code
block = md_block


def table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """A Markdown table of plain-text cells (each escaped)."""
    return ["| " + " | ".join(md_text(h) for h in head) + " |",
            "|" + "---|" * len(head),
            *("| " + " | ".join(cell for cell in row) + " |" for row in rows)]


def head(title: str, v: Verdict) -> list[str]:
    """Title, verdict, then the failures box."""
    word = "passes" if v.ok else "fails"
    return [f"# {md_text(title)}", "", f"Target: {md_code(v.target)}  ",
            f"**{md_text(v.headline)}** ({word})", "", *failures_box(v)]


def failures_box(v: Verdict) -> list[str]:
    out: list[str] = []
    first = v.first
    if first:
        out += [f"> **{'Root causes' if v.root_causes else 'Failures'} ({len(first)})**", ">"]
        for f in first:
            side = f" ({md_text(f.side)})" if f.side else ""
            out.append(f"> - 🔴 {md_code(f.what)}{side}: {md_text(clip(f.reason, 300))}")
            if f.exchange:
                out.append(f">   - exchange: {md_code(clip(f.exchange.splitlines()[0], 200))}")
            if f.rerun:
                out.append(f">   - rerun: {md_code(f.rerun)}")
            if f.curl:
                out.append(f">   - curl: {md_code(clip(f.curl, 400))}")
        out.append("")
    if v.decided:
        out += [f"> **Decided by the kit, never binding ({len(v.decided)})**", ">"]
        out += [f"> - 🟠 {md_code(f.what)}: {md_text(clip(f.reason, 200))}" for f in v.decided]
        out.append("")
    return out
