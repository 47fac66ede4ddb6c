"""The one home of making server, tape and run strings safe for what people read.

Every writer (terminal, Markdown, HTML, JUnit, JSON) of every tool takes strings that came
from outside (a server's answer, a tape, an exception's text) through here:

- :func:`clip` scrubs credentials *before* it cuts (a cut token no longer looks like one,
  so redacting after a cut leaks its first characters);
- :func:`printable` drops control bytes (an ESC sequence from a server would drive the
  reader's terminal; a NUL or form feed breaks a CI log);
- :func:`md_text` / :func:`md_code` escape for Markdown (no raw tag, link or table break);
- :func:`xml_text` keeps only what XML 1.0 can hold, so a JUnit file always parses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from contract.redact import scrub_text

#: C0 controls but tab and newline, DEL, and the C1 controls (CSI among them).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: What XML 1.0 cannot hold at all (surrogates and U+FFFE/U+FFFF too).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|~])")


def clip(text: str, limit: int, secrets: Iterable[str | None] = ()) -> str:
    """``text`` scrubbed of credentials, then cut to ``limit`` characters (with a mark)."""
    text = scrub_text(str(text), secrets)
    if len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text)} chars)"


def printable(text: str) -> str:
    """``text`` without control bytes (tab and newline kept; CR as a newline)."""
    return _CONTROL.sub("", str(text).replace("\r\n", "\n").replace("\r", "\n"))


def one_line(text: str, limit: int = 200, secrets: Iterable[str | None] = ()) -> str:
    """A printable, scrubbed, single line of at most ``limit`` characters (a reason)."""
    return clip(" ".join(printable(text).split()), limit, secrets)


def md_text(text: str) -> str:
    """Plain text for a Markdown paragraph or table cell: specials escaped, one line."""
    flat = " ".join(printable(scrub_text(str(text))).split()).replace("&", "&amp;")
    return _MD_SPECIAL.sub(r"\\\1", flat)


def md_code(text: str) -> str:
    """An inline code span holding ``text`` verbatim (a fence longer than any backtick run
    inside it; ``|`` escaped so a table cell holds it)."""
    flat = " ".join(printable(scrub_text(str(text))).split())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{fence}{pad}{flat.replace('|', chr(92) + '|')}{pad}{fence}"


def md_block(text: str) -> str:
    """A fenced code block holding ``text`` (a fence longer than any inside it)."""
    body = printable(scrub_text(str(text)))
    longest = max((len(run) for run in re.findall(r"`{3,}|~{3,}", body)), default=2)
    fence = "`" * max(longest + 1, 3)
    return f"{fence}\n{body}\n{fence}"


def xml_text(text: str) -> str:
    """``text`` as XML 1.0 can hold it (ElementTree escapes the rest)."""
    return _NOT_XML.sub("", str(text))
