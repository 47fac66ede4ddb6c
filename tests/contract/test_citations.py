"""Code cites the service spec by section (``spec §6.3``) or says its reason in words: an
issue number or a section of a notes document outside the repository tells a reader nothing.
This test fails when such a citation comes back into any Python file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Folders that hold no code of the kit (environments, caches, build output).
_SKIPPED = {".venv", ".tox", ".git", "build", "dist", "node_modules", "__pycache__"}
#: The forms a history citation takes; spelled in pieces so this file does not match itself.
_CITATION = re.compile("|".join((
    r"\bissues? ?[#-]?\d+",
    r"\bfacts,? (?:sections?|§)",
    r"\bfacts §",
    "cortex-api-" + "facts",
)), re.IGNORECASE)


def _python_files() -> list[Path]:
    return [path for path in sorted(ROOT.rglob("*.py"))
            if not _SKIPPED.intersection(path.relative_to(ROOT).parts[:-1])]


def test_no_python_file_cites_an_issue_or_the_notes_document() -> None:
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}"
             for path in _python_files()
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if _CITATION.search(line)]
    assert found == []


def test_the_pattern_catches_each_form() -> None:
    issue, facts = "issue", "facts"  # apart from their numbers, so this file passes its own scan
    for line in (f"see {issue} 12", f"({issue}s 12 and 23)", f"{issue.title()} #5", f"{facts}, section 7",
                 f"{facts} §15", f"{facts}, sections 4-5", f"cortex-api-{facts}.md"):
        assert _CITATION.search(line), line
    assert not _CITATION.search("spec §6.3: the facts both sides need")
