"""The docs site: one page per URL (a collision fails the build), and the pages a newcomer
needs (a glossary, the three loops on the home page)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "docs" / "hooks" / "one_page_per_url.py"


def test_two_pages_building_to_one_url_fail_the_build(tmp_path: Path) -> None:
    """``parity.md`` beside ``parity/index.md``: mkdocs alone only warns (not even under
    --strict); the kit's hook makes it an error naming both pages."""
    docs = tmp_path / "docs"
    (docs / "parity").mkdir(parents=True)
    (docs / "index.md").write_text("# Home\n")
    (docs / "parity.md").write_text("# Tapes\n")
    (docs / "parity" / "index.md").write_text("# Record and replay\n")
    (tmp_path / "mkdocs.yml").write_text(f"site_name: t\nhooks:\n  - {HOOK}\n")
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")]
    proc = subprocess.run(build, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "parity/index.html <- " in proc.stdout + proc.stderr, proc.stderr
    (docs / "parity.md").rename(docs / "parity" / "tapes.md")
    proc = subprocess.run(build, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_site_uses_the_hook_and_has_a_glossary_and_the_loops() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert "docs/hooks/one_page_per_url.py" in config and "glossary.md" in config
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    for word in ("**GS**", "**clause**", "**decided**", "**dialect**", "**mutant**", "**seed**", "**room**",
                 "**tape**"):
        assert word in glossary
    assert "three loops" in (ROOT / "docs" / "index.md").read_text()
    inside = config[config.index("Inside the kit"):]
    assert "reference/rooms.md" in inside and "contract.md" in inside


def test_clause_ids_link_to_their_reference_entry() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("clause_links", ROOT / "docs" / "hooks" / "clause_links.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = "Judged by `AUTH-REQUIRED-1` and `NOT-A-CLAUSE-9`, [`CG-FINAL-1`](x.md).\n```\n`AUTH-REQUIRED-1`\n```"
    out = hook.link_ids(page, "server-team/verdicts.md", {"AUTH-REQUIRED-1", "CG-FINAL-1"})
    lines = out.split("\n")
    assert lines[0].startswith("Judged by [`AUTH-REQUIRED-1`](../reference/clauses.md#AUTH-REQUIRED-1)")
    assert "`NOT-A-CLAUSE-9`," in lines[0] and "[`CG-FINAL-1`](x.md)" in lines[0]
    assert lines[2] == "`AUTH-REQUIRED-1`"  # code blocks stay as they are


def test_the_run_shown_on_the_verdicts_page_matches_the_clause_registry() -> None:
    """The example URL run's figures (a real run, pasted) add up and count today's clauses:
    a clause added or removed since makes this fail until the example is run again."""
    import re

    from contract.clauses import CLAUSES, for_profile

    page = (ROOT / "docs" / "server-team" / "verdicts.md").read_text()
    head = re.search(r"CONFORMS: profile (\w+), (\d+) clauses: (\d+) green, (\d+) red, (\d+) advisory, "
                     r"(\d+) skipped, (\d+) not-applicable; MUST (\d+)/(\d+) judged green", page)
    judged = re.search(r"judged (\d+) of (\d+) MUST clauses on this target", page)
    assert head and judged, "the verdicts page lost its example run"
    profile, total, green, red, advisory, skipped, na, must_green, must_judged = head.groups()
    assert int(total) == len(CLAUSES) == int(green) + int(red) + int(advisory) + int(skipped) + int(na)
    musts = sum(c.level == "MUST" for c in for_profile(profile))  # type: ignore[arg-type]
    assert int(judged[1]) == int(must_judged) == int(must_green) and int(judged[2]) <= musts
    hinted = sum(int(n) for n in re.findall(r"^ +(\d+) MUST  ", page, re.M))
    assert int(judged[1]) + hinted == int(judged[2])


def test_the_navigation_has_a_tab_per_audience() -> None:
    """Tabs (mkdocs-material's navigation.tabs): one per audience, so a reader sees only
    their part's pages, and the kit's inside apart from the user's reference."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert "navigation.tabs" in config["theme"]["features"]
    tabs = [next(iter(entry)) for entry in config["nav"]]
    for audience in ("Server team", "Client authors", "Recipe authors"):
        assert audience in tabs
    assert tabs[0] == "Start here" and tabs[-1] == "Inside the kit"
    assert all(isinstance(next(iter(entry.values())), list) for entry in config["nav"]), \
        "a top-level page would be a tab of its own"
