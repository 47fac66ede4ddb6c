"""One writer per output format for the whole kit: ``text`` (the terminal), ``markdown``,
``html``, ``junit`` and ``json``; :func:`write` picks one by a path's suffix.

Every tool's report goes through these: the failures box and the verdict come first
(HTML and Markdown at the top, the terminal just before its verdict line), strings from a
server or a tape are made safe (``conformance.reporting.clean``), and every file is
scrubbed of credentials as it is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

from contract.redact import scrub_text

#: Suffix -> form name.
SUFFIXES = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown",
            ".xml": "junit", ".json": "json"}


def form_of(path: str | Path) -> str:
    """The form a report path asks for by its suffix (``text`` for any other)."""
    return SUFFIXES.get(Path(path).suffix.lower(), "text")


def write(path: str | Path, forms: dict[str, Callable[[], str]],
          secrets: Iterable[str | None] = ()) -> Path:
    """Write the form ``path``'s suffix names (``forms[name]()``), scrubbed of ``secrets``
    and of anything that looks like a credential."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    form = form_of(p)
    content = scrub_text(forms[form](), secrets)
    if form in ("html", "junit"):  # a label the scrub put in is text, never a tag
        content = _LABEL.sub(lambda m: "&lt;" + m[1] + "&gt;", content)
    p.write_text(content, encoding="utf-8")
    return p


#: The labels scrubbing writes (contract.redact): ``<redacted>``, ``<url-token-...>``.
_LABEL = re.compile(r"<(redacted|url-token-[0-9a-f]{12})>")
