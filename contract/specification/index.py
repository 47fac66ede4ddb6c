"""A derived index of the published spec: per numbered section, the terms its code shows.

A clause whose source is ``spec §N`` names the key terms of the spec it rests on (field
names, state words, status codes: ``contract.specification.clause_terms``); a test checks each occurs in
section N. The spec itself is kept beside the project, not in it (it is not the kit's
text), so CI's clean clone checks against this index instead: for each section, the
identifiers, literals and status codes of its code spans and blocks, and the three-digit
statuses its prose names. Facts only, never a sentence of the spec. ``python -m contract
spec-index --spec PATH -o contract/specification/spec_index.json`` rebuilds it; a test compares it with
the spec where the spec is present.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

INDEX_PATH = Path(__file__).with_name("spec_index.json")
SPEC_NAME = "DSS-Server-API-Specification.md"

_HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", re.M)
_FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_TOKEN = re.compile(r"[A-Za-z0-9_$][A-Za-z0-9_$./\-]*[A-Za-z0-9_$]|[A-Za-z0-9_$]")
_STATUS = re.compile(r"(?<![\d.])([1-5]\d\d)(?![\d.])")


def sections(text: str) -> dict[str, str]:
    """The body of each numbered section (``## N.`` / ``### N.N``), its subheadings'
    (``####``) text included; a section's body ends at the next numbered heading."""
    marks = list(_HEADING.finditer(text))
    out: dict[str, str] = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        out[mark.group(1)] = text[mark.end():end]
    return out


def _tokens(code: str) -> set[str]:
    found = set(_TOKEN.findall(code))
    for token in list(found):  # a path or template names its parts too: /{job_id}/requests
        found.update(p for p in re.split(r"[/.:{}\-]+", token) if p)
    return found


def terms_of(body: str) -> set[str]:
    """The terms of one section body: tokens of its code, statuses named anywhere."""
    code = [m.group(1) for m in _FENCE.finditer(body)]
    prose = _FENCE.sub("", body)
    code += [m.group(1) for m in _SPAN.finditer(prose)]
    found: set[str] = set()
    for piece in code:
        found |= _tokens(piece)
    found |= set(_STATUS.findall(prose))
    return found


def build_index(text: str) -> dict[str, list[str]]:
    """``{section: sorted terms}`` of the whole spec text."""
    return {number: sorted(terms_of(body)) for number, body in sections(text).items()}


def render_index(text: str) -> str:
    return json.dumps(build_index(text), indent=1, sort_keys=True) + "\n"


@cache
def committed_index() -> dict[str, frozenset[str]]:
    """The committed index (``contract/specification/spec_index.json``)."""
    data = json.loads(INDEX_PATH.read_text(encoding="utf-8"))
    return {number: frozenset(terms) for number, terms in data.items()}


def find_spec(start: Path) -> Path | None:
    """The spec kept beside a checkout: ``<ancestor>/shared/reference/<SPEC_NAME>``."""
    for parent in (start, *start.parents):
        candidate = parent / "shared" / "reference" / SPEC_NAME
        if candidate.is_file():
            return candidate
    return None


def missing_terms(section: str, terms: tuple[str, ...], index: dict[str, frozenset[str]]) -> list[str]:
    """The terms not found among ``section``'s (all of them when the section is unknown)."""
    known = index.get(section)
    if known is None:
        return list(terms)
    return [t for t in terms if t not in known]
