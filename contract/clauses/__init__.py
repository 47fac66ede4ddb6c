"""The clause registry: every checkable promise of the contract, numbered.

Each clause has an id (``AREA-TOPIC-N``), a level (MUST/SHOULD), a profile (``current``
is today's documented surface, ``proposed`` what the seed asks the server to add,
``semantic`` the numeric behaviour a real model must show), who must keep it (server or
client), its source (a section of the published spec, the client, a kit decision or a
proposal: :mod:`contract.specification.sections` lists the sections) and one sentence. Tests declare what they check with :func:`checks`; the
conformance report is per clause.

The rows themselves are :mod:`contract.clauses.table`, one block per area in the order of
:data:`AREAS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from contract.clauses.table import _TABLE, ClauseProfile, Level, Subject, _Row

F = TypeVar("F", bound=Callable[..., object])


@dataclass(frozen=True)
class Clause:
    id: str
    level: Level
    profile: ClauseProfile
    subject: Subject
    area: str
    text: str
    #: Where the rule comes from: ``spec §N.N`` (a section of the published specification),
    #: ``client`` (reference-client behaviour servers rely on), ``decided`` (the kit's choice
    #: where the spec is silent) or ``proposed`` (what the kit asks the server team to add).
    source: str

    @property
    def spec_section(self) -> str | None:
        """The section number a ``spec §N.N`` source names (None for the other sources)."""
        return self.source.removeprefix(SPEC_PREFIX) if self.source.startswith(SPEC_PREFIX) else None

    @property
    def terms(self) -> tuple[str, ...]:
        """The spec's terms a ``spec §N`` clause rests on (``contract.specification.clause_terms``)."""
        from contract.specification.clause_terms import TERMS

        return TERMS.get(self.id, ())

    @property
    def statuses(self) -> tuple[int, ...]:
        """The statuses the cited section names for what this clause judges (empty: the
        spec names none, and a refusal is judged as a 4xx with a spec §3.6 body)."""
        from contract.specification.clause_terms import STATUSES

        return STATUSES.get(self.id, ())

    @property
    def can_fail_a_url(self) -> bool:
        """Only rules the server team signed up to (the spec, the client they serve, the
        proposals when asked for) fail a run against a real server; ``decided`` never does."""
        return self.source != "decided"


#: Areas, in report order, with a title each.
AREAS: dict[str, str] = {
    "ADDR": "Addressing and framing",
    "AUTH": "Auth and isolation",
    "ERR": "Error envelopes",
    "JOB": "Job life",
    "JOBV": "Job validation",
    "CAP": "Capacity",
    "CANCEL": "Cancel",
    "CKPT": "Checkpoints",
    "REQ": "Asynchronous submission",
    "POLL": "Polling and delivery",
    "WIRE": "DSSST1 frames",
    "CHUNK": "Byte chunking",
    "CG": "Chunk groups",
    "FB": "Forward-backward",
    "STEP": "Step",
    "SAVE": "Save and load",
    "GEN": "Generate",
    "GENS": "Generate-stream",
    "OP": "Operations",
    "LIMIT": "Limits and bad input",
    "PROP": "Proposed routes",
    "CLIENT": "Client behaviour",
    "SEM": "Semantics",
    "IDEM": "Idempotency keys",
    "INTEG": "Integration surface (SkyRL, verl)",
}

#: How a source naming the published specification starts: ``spec §6.3``.
SPEC_PREFIX = "spec §"
#: The sources that are not a spec section.
OTHER_SOURCES = ("client", "decided", "proposed")


def _clause(row: _Row) -> Clause:
    cid, level, profile, subject, source, text = row
    return Clause(cid, level, profile, subject, cid.split("-", 1)[0], text, source)


CLAUSES: dict[str, Clause] = {row[0]: _clause(row) for row in _TABLE}

#: The attribute :func:`checks` sets on a test function.
CLAUSES_ATTR = "__gs_clauses__"


def clause(cid: str) -> Clause:
    """Look up a clause; unknown ids are a programming error."""
    try:
        return CLAUSES[cid]
    except KeyError:
        raise KeyError(f"unknown clause id {cid!r}") from None


def validate_ids(ids: Iterable[str]) -> tuple[str, ...]:
    """Return the ids as a tuple, raising KeyError on any unknown one."""
    out = tuple(ids)
    for cid in out:
        clause(cid)
    return out


def checks(*ids: str) -> Callable[[F], F]:
    """Declare the clauses a test checks: ``@checks("CG-RESTART-1")``."""
    valid = validate_ids(ids)

    def mark(fn: F) -> F:
        existing: tuple[str, ...] = getattr(fn, CLAUSES_ATTR, ())
        setattr(fn, CLAUSES_ATTR, existing + valid)
        return fn

    return mark


def clauses_of(fn: object) -> tuple[str, ...]:
    """The clause ids a test function declared (none when undecorated)."""
    return tuple(getattr(fn, CLAUSES_ATTR, ()))


def for_profile(profile: ClauseProfile, subject: Subject | None = None) -> list[Clause]:
    """Clauses a run of ``profile`` judges: proposed includes current; semantic is its own."""
    wanted = {"current"} if profile == "current" else {"current", "proposed"}
    if profile == "semantic":
        wanted = {"semantic"}
    return [
        c
        for c in CLAUSES.values()
        if c.profile in wanted and (subject is None or c.subject == subject)
    ]
