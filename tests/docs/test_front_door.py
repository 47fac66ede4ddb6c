"""The README stays a front door: short, its test command the one CI runs, its links alive.

The manual is the docs site (``mkdocs build --strict`` in ``tox -e lint`` checks the site's
own links); the README is read on its own, so its links to files are checked here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: About a screen and a half: what the kit is, who it is for, the two commands, the links.
MAX_README_LINES = 150


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    command = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S))
    assert command in blocks.splitlines(), f"README.md's commands lack .ci/run's {command!r}"


def test_readme_links_to_files_that_exist() -> None:
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    missing = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
