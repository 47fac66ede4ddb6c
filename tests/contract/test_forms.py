"""The table of answer forms the spec allows: each row cites a section, relaxes only
decided clauses, and is implemented by the fake and the parity comparer."""

from __future__ import annotations

from pathlib import Path

from contract.clauses import CLAUSES
from contract.forms import FORMS, SPEC_FORMS, forms_of, kit_form_judged
from contract.specification.sections import SECTIONS

ROOT = Path(__file__).resolve().parents[2]


def test_rows_cite_sections_and_relax_decided_clauses() -> None:
    for form in FORMS.values():
        assert form.section in SECTIONS, form.name
        for cid in form.relaxes:
            assert CLAUSES[cid].source == "decided", f"{form.name} relaxes {cid}, not a decided clause"


def test_dialects_allow_their_rows() -> None:
    assert forms_of("kit") == frozenset()
    assert forms_of("spec") == SPEC_FORMS < forms_of("any") == forms_of(None) == frozenset(FORMS)
    for cid in {cid for f in FORMS.values() for cid in f.relaxes}:
        assert kit_form_judged(cid, forms_of("kit")) and not kit_form_judged(cid, forms_of("any"))
    assert kit_form_judged("POLL-STATE-1", forms_of("any"))


def test_every_row_is_implemented_by_the_fake() -> None:
    """The fake names each row where it answers in it (``Forms.use``/``pick``)."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "fake_gs").rglob("*.py"))
    missing = [name for name in FORMS if f'"{name}"' not in source]
    assert not missing, f"rows the fake never answers in: {missing}"


def test_every_row_has_a_parity_equivalence() -> None:
    from conformance.parity.compare import EQUIVALENCES

    assert set(EQUIVALENCES) == set(FORMS)


def test_every_reread_names_a_clause_as_it_reads_today() -> None:
    """docs/spec-coverage.md's record of clauses moved or rephrased names clauses that exist,
    and a clause rephrased to accept a form reads so in the table."""
    from contract.specification.rereads import REREADS

    assert REREADS
    for r in REREADS:
        assert r.clause in CLAUSES, r.clause
        assert r.before and r.after and r.why, r.clause
    assert "chunk_group_restart_required" in CLAUSES["CG-MISSING-1"].text
    assert "post_process_outputs" not in CLAUSES["FB-VERL-1"].text
    assert CLAUSES["FB-RESULT-3"].source == "decided"
