"""The HTML form: a self-contained page whose first screen holds the verdict banner and
the failures box; long content scrolls inside its own box, so the page never grows wider
than the window (tests/conformance/test_report_layout.py measures it in Chromium)."""

from __future__ import annotations

import html

from conformance.reporting.clean import clip, printable
from conformance.reporting.model import Failure, Verdict
from contract.redact import scrub_text

RED, GREEN, AMBER, GREY = "#c62828", "#2e7d32", "#b26a00", "#777"

#: What every page of the kit shares: nothing wider than the window, boxes that scroll.
CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:20px;color:#222;
overflow-wrap:anywhere}
code{font:12px ui-monospace,monospace;overflow-wrap:anywhere}
pre{font:12px ui-monospace,monospace;background:#f6f6f6;border:1px solid #e3e3e3;padding:8px;
max-width:100%;max-height:420px;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0}
table{border-collapse:collapse;max-width:100%}
td,th{overflow-wrap:anywhere}
"""
#: The verdict banner and the failures box alone (for a page the kit does not own, such as
#: Locust's report, whose own body styles stay as they are).
BOX_CSS = f"""
.banner{{color:#fff;font-weight:700;font-size:16px;padding:10px 14px;border-radius:6px;margin:8px 0}}
.banner.verdict-ok{{background:{GREEN}}} .banner.verdict-bad{{background:{RED}}}
.failures{{border:2px solid {RED};border-radius:6px;padding:8px 14px;margin:10px 0;background:#fff5f5}}
.failures h2{{color:{RED};font-size:16px;margin:4px 0 8px}}
.failures li{{margin:0 0 8px}}
.failures pre{{max-height:120px;margin:2px 0}}
.decided{{border:2px solid {AMBER};border-radius:6px;padding:8px 14px;margin:10px 0;background:#fffaf0}}
.decided h2{{color:{AMBER};font-size:15px;margin:4px 0 8px}}
.failures pre,.decided pre{{font:12px ui-monospace,monospace;background:#f6f6f6;padding:6px;max-width:100%;
overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere}}
.side{{display:inline-block;padding:0 5px;border:1px solid #999;border-radius:8px;font-size:11px;color:#444}}
.failures,.decided,.banner{{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;overflow-wrap:anywhere}}
"""

esc = html.escape


def safe(text: str) -> str:
    """A server's or a tape's string as HTML text (scrubbed, escaped, no control bytes)."""
    return html.escape(printable(scrub_text(str(text))))


def banner(v: Verdict) -> str:
    return f"<div class='banner {'verdict-ok' if v.ok else 'verdict-bad'}' id='verdict'>{safe(v.headline)}</div>"


def _item(f: Failure) -> str:
    what = safe(f.what)
    link = f"<a href='#{esc(f.anchor)}'><code>{what}</code></a>" if f.anchor else f"<code>{what}</code>"
    side = f" <span class='side'>{safe(f.side)}</span>" if f.side else ""
    parts = [f"<li>{link}{side}: {safe(clip(f.reason, 300))}"]
    if f.exchange:
        parts.append(f"<pre>{safe(clip(f.exchange, 600))}</pre>")
    if f.rerun:
        parts.append(f"<div>rerun: <code>{safe(f.rerun)}</code></div>")
    if f.curl:
        parts.append(f"<pre>{safe(clip(f.curl, 400))}</pre>")
    return "".join(parts) + "</li>"


def failures_box(v: Verdict, limit: int = 30) -> str:
    out = ""
    first = v.first
    if first:
        more = f"<p>... and {len(first) - limit} more below.</p>" if len(first) > limit else ""
        out += (f"<div class='failures' id='failures'><h2>{'Root causes' if v.root_causes else 'Failures'} "
                f"({len(first)})</h2><ol>{''.join(_item(f) for f in first[:limit])}</ol>{more}</div>")
    if v.decided:
        items = "".join(f"<li><code>{safe(f.what)}</code>: {safe(clip(f.reason, 200))}</li>"
                        for f in v.decided[:limit])
        out += (f"<div class='decided'><h2>Decided by the kit, never binding ({len(v.decided)})</h2>"
                f"<ul>{items}</ul></div>")
    return out


def page(title: str, v: Verdict, body: str, css: str = "") -> str:
    """A whole page: title, verdict banner, failures box, then the tool's own ``body``."""
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width,initial-scale=1'>"
            f"<title>{esc(title)}</title><style>{CSS}{BOX_CSS}{css}</style></head><body>"
            f"<h1 style='font-size:20px;margin:0 0 4px'>{esc(title)}</h1>"
            f"{banner(v)}{failures_box(v)}{body}</body></html>")


def table(head: tuple[str, ...], rows: list[tuple[str, ...]], cls: str = "") -> str:
    """An HTML table of plain-text cells (each escaped)."""
    cells = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{safe(c)}</td>" for c in r) + "</tr>" for r in rows)
    klass = f" class='{cls}'" if cls else ""
    return f"<table{klass}><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"
