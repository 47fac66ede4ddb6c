"""docs/layout.md's map of the checkout names folders that exist: each top-level folder of
its block, and each ``name/`` listed under a package, is a directory inside that package
(or, for ``tests/`` and ``docs/`` entries such as ``reference/``, beside it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _folder(path: Path) -> bool:
    """A folder with something in it but bytecode (a removed package leaves its cache)."""
    return path.is_dir() and any(child.name != "__pycache__" for child in path.iterdir())


def test_every_folder_the_layout_page_names_exists() -> None:
    block = re.search(r"```\n(.*?)```", (ROOT / "docs" / "layout.md").read_text(), flags=re.S)
    assert block, "docs/layout.md lost its map of the checkout"
    missing, top = [], None
    for line in block.group(1).splitlines():
        head = re.match(r"([a-z_]+)/\s", line)
        if head:
            top = head.group(1)
            if not _folder(ROOT / top):
                missing.append(top)
        text = line[len(head.group(0)):] if head else line
        for name in re.findall(r"(?<![\w./])([a-z_]+)/", text):
            inside = (ROOT / top).rglob(name) if top else iter(())
            if top and not any(_folder(p) for p in inside) and not _folder(ROOT / name):
                missing.append(f"{top}/{name}")
    assert not missing, f"docs/layout.md names folders that are not there: {missing}"
