"""Each ``spec §N`` clause names the spec's terms it rests on, and they are in section N.

The terms are checked against the committed index of the spec (``contract/specification/spec_index.json``,
always present) and, where the spec itself sits beside the checkout, against its text; the
index is then also checked for drift from the spec.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.clauses import CLAUSES
from contract.specification.clause_terms import INTERPRETED, STATUSES, TERMS
from contract.specification.index import (
    build_index,
    committed_index,
    find_spec,
    missing_terms,
    sections,
)

ROOT = Path(__file__).resolve().parents[2]
SPEC = find_spec(ROOT)
NO_SPEC = ("the spec (shared/reference/DSS-Server-API-Specification.md) is not beside this "
           "checkout (a clean clone, as in CI): the committed index stands in for it")


def test_every_spec_clause_names_its_terms() -> None:
    bare = [c.id for c in CLAUSES.values() if c.spec_section and not c.terms]
    assert not bare, f"spec clauses without terms (add them to contract/specification/clause_terms.py): {bare}"
    stray = [cid for cid in TERMS if cid not in CLAUSES or not CLAUSES[cid].spec_section]
    assert not stray, f"terms for clauses that do not cite the spec: {stray}"


def test_terms_occur_in_the_cited_section_of_the_index() -> None:
    index = committed_index()
    wrong = {c.id: missing_terms(c.spec_section or "", c.terms, index)
             for c in CLAUSES.values() if c.terms}
    wrong = {cid: terms for cid, terms in wrong.items() if terms}
    assert not wrong, f"terms not in the cited section: {wrong}"


def test_named_statuses_are_terms_of_their_section() -> None:
    index = committed_index()
    for cid, statuses in STATUSES.items():
        section = CLAUSES[cid].spec_section
        assert section is not None, cid
        assert cid in INTERPRETED or not missing_terms(section, tuple(map(str, statuses)), index), cid


def test_a_term_from_another_section_is_caught() -> None:
    index = committed_index()
    assert missing_terms("5.9", ("204",), index) == []
    assert missing_terms("5.9", ("chunk_group_restart_required",), index) == ["chunk_group_restart_required"]
    assert missing_terms("99.9", ("x",), index) == ["x"]


@pytest.mark.skipif(SPEC is None, reason=NO_SPEC)
def test_terms_occur_in_the_spec_text() -> None:
    assert SPEC is not None
    text = sections(SPEC.read_text(encoding="utf-8"))
    wrong = {c.id: [t for t in c.terms if t not in text.get(c.spec_section or "", "")]
             for c in CLAUSES.values() if c.terms}
    assert not {k: v for k, v in wrong.items() if v}


@pytest.mark.skipif(SPEC is None, reason=NO_SPEC)
def test_index_is_derived_from_the_spec() -> None:
    assert SPEC is not None
    rebuilt = {k: frozenset(v) for k, v in build_index(SPEC.read_text(encoding="utf-8")).items()}
    assert rebuilt == committed_index(), (
        "contract/specification/spec_index.json drifted from the spec: rebuild with `python -m contract "
        "spec-index --spec <path> -o contract/specification/spec_index.json`")
