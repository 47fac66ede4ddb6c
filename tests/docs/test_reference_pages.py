"""The docs site's generated reference pages are what their sources render today, and its
pictures are in place and small.

Each reference page (``docs/reference/``) is rendered by ``docs/gen_reference.py`` from the
kit's own tables; a page edited by hand, or a table changed without regenerating, fails
here with the command that brings the page back in line. (``tox -e lint`` builds the site
with ``mkdocs build --strict``: broken links and pages outside the nav fail there.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "docs" / "gen_reference.py"
PICTURES = ("conformance-report.png", "parity-report.png", "grpo-toy.png")
#: The largest picture a page may carry (the site stays quick to load and to clone).
MAX_PICTURE_BYTES = 300 * 1024


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


@pytest.mark.parametrize("name", sorted(GEN.PAGES))
def test_reference_page_is_fresh(name: str) -> None:
    page = GEN.REFERENCE / name
    assert page.is_file(), f"docs/reference/{name} is missing: run `{GEN.COMMAND}`"
    assert page.read_text(encoding="utf-8") == GEN.PAGES[name](), (
        f"docs/reference/{name} is stale: regenerate it with `{GEN.COMMAND}` and commit the diff")


def test_no_reference_page_without_a_source() -> None:
    committed = {p.name for p in GEN.REFERENCE.glob("*.md")}
    assert committed == set(GEN.PAGES), f"pages no renderer writes: {sorted(committed - set(GEN.PAGES))}"


@pytest.mark.parametrize("name", PICTURES)
def test_picture_is_in_place_and_small(name: str) -> None:
    picture = ROOT / "docs" / "img" / name
    assert picture.is_file(), f"docs/img/{name} is missing: run `python docs/render_pictures.py`"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert picture.stat().st_size < MAX_PICTURE_BYTES, f"docs/img/{name} is over {MAX_PICTURE_BYTES} bytes"
