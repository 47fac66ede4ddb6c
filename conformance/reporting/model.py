"""One model of a verdict, for every tool of the kit (gs-conformance, gs-parity, gs-load).

Each tool reduces its run to a :class:`Verdict`: whether it holds, its headline, what it
judged (so a verdict on nothing is never green), and the failures a reader must see first,
each with its one-line reason, the side that broke it (:data:`Side`: the client's requests
or the server's answers), the offending exchange, a command that reruns just it and, where
one exchange shows it, a ``curl`` line. ``conformance.reporting.formats`` writes the
parts every output shares from it (the failures box, the verdict banner, the page shell),
once for the whole kit.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from contract.auth import AUTHORIZATION_HEADER

#: The party a clause is judged on (and a red one was broken by): the client, by its
#: requests, or the server, by its answers.
Side = Literal["client", "server"]
SIDES: tuple[Side, ...] = ("client", "server")


def side_label(sides: Iterable[str]) -> str:
    """``client``, ``server`` or ``client and server`` ('' for none), as every format prints a side."""
    present = set(sides)
    return " and ".join(side for side in SIDES if side in present)


@dataclass(frozen=True)
class Failure:
    """One red clause, divergent exchange or violation under load."""

    #: What failed, as the reader looks it up (``JOB-LOGS-1``, ``#12 POST fwd_bwd``).
    what: str
    #: Why, in one line.
    reason: str
    #: The side that broke it (:func:`side_label`: ``client``, ``server`` or both; '' when the
    #: tool does not judge by side, as a parity divergence).
    side: str = ""
    #: The offending exchange (``> GET /url`` ... ``< 500``), when one shows it.
    exchange: str = ""
    #: A command that reruns just this failure.
    rerun: str = ""
    #: The exchange as a curl line (credentials as ``$GS_TOKEN``).
    curl: str = ""
    #: False: a clause the kit decided where the spec is silent (reported, never binding).
    binding: bool = True
    #: The id of the failure's details in an HTML page (a link from the box).
    anchor: str = ""


@dataclass
class Verdict:
    """A run, reduced to what a reader must see first."""

    tool: str
    target: str
    ok: bool
    #: The one-line verdict (``CONFORMS: ...``, ``DIVERGES: ...``, ``NOTHING COMPARED: ...``).
    headline: str
    #: How many things the run judged (clauses, compared exchanges, calls): 0 is never green.
    judged: int
    #: The failures a fix should start from (one per root cause, when the run knows them; else the
    #: failures themselves are the causes).
    root_causes: list[Failure] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    #: Results the kit decided, reported apart and never binding.
    decided: list[Failure] = field(default_factory=list)
    passes: int = 0
    skips: int = 0
    #: What the run cost the target (one line), when it was a real service.
    cost: str = ""

    @property
    def first(self) -> list[Failure]:
        """What the failures box lists: the root causes when known, else every failure."""
        return self.root_causes or self.failures


_REQUEST_LINE = re.compile(r"^> (?P<method>[A-Z]+) (?P<url>\S+)$")


def curl_line(exchange: str) -> str:
    """A ``curl`` command repeating the first request of ``exchange`` (the recorder's
    ``> METHOD URL`` / ``> header: value`` / ``> body`` lines), the token as ``$GS_TOKEN``;
    '' when the exchange shows no full URL."""
    lines = exchange.splitlines()
    start = next((i for i, line in enumerate(lines) if _REQUEST_LINE.match(line)), None)
    if start is None:
        return ""
    m = _REQUEST_LINE.match(lines[start])
    assert m is not None
    if not m["url"].startswith(("http://", "https://")):
        return ""
    parts = ["curl", "-sS", "-X", m["method"], shlex.quote(m["url"])]
    body = ""
    for line in lines[start + 1:]:
        if not line.startswith("> "):
            break
        name, sep, value = line[2:].partition(": ")
        if sep and re.fullmatch(r"[A-Za-z0-9-]+", name):
            if name.lower() == AUTHORIZATION_HEADER.lower():
                parts += ["-H", '"Authorization: Bearer $GS_TOKEN"']
            elif name.lower() != "content-length":
                parts += ["-H", shlex.quote(f"{name}: {value}")]
        else:
            body = line[2:]
    if body and not body.startswith("<"):  # a binary body shows as <N bytes: ...>
        parts += ["--data-binary", shlex.quote(body)]
    return " ".join(parts)
