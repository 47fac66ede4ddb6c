"""The terminal form: the failures box just before the verdict line, control bytes gone."""

from __future__ import annotations

from conformance.reporting.clean import clip, printable
from conformance.reporting.model import Verdict

RED, GREEN, AMBER, RESET = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[0m"


def paint(colour: str, text: str, on: bool) -> str:
    return f"{colour}{text}{RESET}" if on else text


def safe(text: str) -> str:
    """A server's or a tape's string as the terminal may show it (no ESC, no control byte)."""
    return printable(text)


def failures_box(v: Verdict, colour: bool = False, limit: int = 20) -> list[str]:
    """The failures, each with its reason, exchange, rerun command and curl line."""
    first = v.first
    if not first and not v.decided:
        return []
    lines = []
    if first:
        word = "root causes" if v.root_causes else "failures"
        lines.append(paint(RED, f"== {word} ({len(first)}) ==", colour))
        for f in first[:limit]:
            side = f" [{f.side}]" if f.side else ""
            lines.append(paint(RED, f"FAIL {safe(f.what)}{side}", colour) + f": {safe(clip(f.reason, 300))}")
            if f.exchange:
                lines.append(f"     exchange: {safe(clip(f.exchange.splitlines()[0], 200))}")
            if f.rerun:
                lines.append(f"     rerun:    {safe(f.rerun)}")
            if f.curl:
                lines.append(f"     curl:     {safe(clip(f.curl, 400))}")
        if len(first) > limit:
            lines.append(f"... and {len(first) - limit} more (see the report files)")
    if v.decided:
        lines.append(paint(AMBER, f"-- decided by the kit, never binding ({len(v.decided)}) --", colour))
        lines += [f"  {safe(f.what)}: {safe(clip(f.reason, 200))}" for f in v.decided[:limit]]
    return lines


def verdict_line(v: Verdict, colour: bool = False) -> str:
    return paint(GREEN if v.ok else RED, safe(v.headline), colour)


def ending(v: Verdict, colour: bool = False) -> list[str]:
    """What every terminal report ends with: the failures box, then the verdict."""
    return [*failures_box(v, colour), verdict_line(v, colour)]
