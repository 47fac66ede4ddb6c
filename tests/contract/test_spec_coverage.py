"""Every clause names its source, every cited section exists, every normative section of the
spec is judged or says why not, and docs/spec-coverage.md is the generated table."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from contract.__main__ import main
from contract.clauses import CLAUSES
from contract.specification.sections import (
    SECTIONS,
    by_source,
    coverage_gaps,
    coverage_markdown,
    rule_problems,
    source_problems,
)

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "docs" / "spec-coverage.md"
SPEC_NAME = "DSS-Server-API-Specification.md"


def test_every_clause_names_a_valid_source() -> None:
    assert source_problems() == []
    assert sum(by_source().values()) == len(CLAUSES)


@pytest.mark.parametrize(
    ("source", "fragment"),
    [("", "is not spec"), ("spec §99.9", "names no section"), ("spec 6.3", "is not spec"),
     ("guess", "is not spec")],
)
def test_a_missing_or_unknown_source_is_reported(source: str, fragment: str) -> None:
    bad = replace(CLAUSES["SAVE-ID-1"], source=source)
    problems = source_problems([bad])
    assert len(problems) == 1 and fragment in problems[0] and "SAVE-ID-1" in problems[0]


def test_every_rules_section_has_a_clause_or_a_reason() -> None:
    """A section of normative rules, or holding a checkable rule of the rules table, is
    cited by a clause or says why it is not judged."""
    assert coverage_gaps() == []


def test_every_checkable_rule_has_a_clause() -> None:
    assert rule_problems() == []


def test_a_rule_without_a_clause_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from contract.specification import checkable_rules as spec_rules

    bare = spec_rules.Rule("5.5", text="cancel takes no body", clauses=(), fake="yes", forms=())
    monkeypatch.setattr(spec_rules, "RULES", (*spec_rules.RULES, bare))
    assert rule_problems() == ["§5.5 'cancel takes no body': no clause judges it"]
    uncited = spec_rules.Rule("2.4", text="an uncited rule", clauses=("ADDR-REQID-1",), fake="yes", forms=())
    monkeypatch.setattr(spec_rules, "RULES", (*spec_rules.RULES, uncited))
    assert "2.4" not in coverage_gaps()  # §2.4 says why no spec clause cites it
    from contract.specification import sections

    monkeypatch.setattr(sections, "_SECTIONS", (*sections._SECTIONS, sections.Section("99.9", "A new section", "notes")))
    monkeypatch.setattr(sections, "SECTIONS", {**sections.SECTIONS, "99.9": sections.Section("99.9", "A new section", "notes")})
    monkeypatch.setattr(spec_rules, "RULES", (*spec_rules.RULES, spec_rules.Rule("99.9", text="r", clauses=("ADDR-REQID-1",), fake="yes", forms=())))
    assert coverage_gaps() == ["99.9"]


def test_snapshot_matches_the_generated_table() -> None:
    assert SNAPSHOT.read_text(encoding="utf-8") == coverage_markdown(), (
        "docs/spec-coverage.md drifted: regenerate with "
        "`python -m contract coverage -o docs/spec-coverage.md` and review the diff"
    )


def test_cli_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["coverage"]) == 0
    assert capsys.readouterr().out == coverage_markdown()
    assert main(["clauses"]) == 0
    assert "spec §9.3" in capsys.readouterr().out


def _spec_document() -> Path | None:
    """The published spec, kept beside the checkout (not in it: it is not the kit's text)."""
    for parent in ROOT.parents:
        candidate = parent / "shared" / "reference" / SPEC_NAME
        if candidate.is_file():
            return candidate
    return None


def test_sections_are_the_documents_headings() -> None:
    doc = _spec_document()
    if doc is None:
        pytest.skip(f"{SPEC_NAME} is not beside this checkout")
    numbers = re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", doc.read_text(encoding="utf-8"), re.M)
    assert numbers == list(SECTIONS)
