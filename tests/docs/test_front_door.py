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


#: What tox printed at the end of README commands 1 and 2 on the run the README's durations
#: were taken from (a clean clone, kept beside the docs' other kept runs).
KEPT_RUNS = ROOT / "docs" / "img" / "readme_commands.txt"


def _tox_lines(command: str) -> dict[str, tuple[float, float, float]]:
    """Each environment's (total, setup, commands) seconds, and the run's total under "all",
    from the kept tail of ``command``'s output."""
    text = KEPT_RUNS.read_text(encoding="utf-8")
    block = text[text.index(f"$ {command}\n"):].split("\n$ ", 1)[0]
    found = {name: (float(total), float(setup), sum(float(c) for c in cmds.split(",")))
             for name, total, setup, cmds in re.findall(
                 r"^\s+(\w+): OK \(([\d.]+)=setup\[([\d.]+)\]\+cmd\[([\d.,]+)\] seconds\)", block, flags=re.M)}
    end = re.search(r"congratulations :\) \(([\d.]+) seconds\)", block)
    assert end, f"{KEPT_RUNS.name} lacks the end of {command!r}"
    found["all"] = (float(end[1]), 0.0, 0.0)
    return found


def test_the_readmes_durations_are_the_kept_runs() -> None:
    """The README's durations of its two commands are what tox printed on the kept run,
    rounded as stated; and the kept run is of the commands the README gives."""
    text = " ".join(README.read_text(encoding="utf-8").split())
    commands = re.findall(r"^(python3 -m pip install .*)$", README.read_text(encoding="utf-8"), flags=re.M)
    assert len(commands) == 2, commands
    demo, suite = (_tox_lines(c.split("  #")[0].strip()) for c in commands)
    said = re.search(r"command 1 takes (\d+) s \(its environment (\d+) s, the suite (\d+) s\)", text)
    assert said, "README.md lost command 1's durations"
    assert [int(n) for n in said.groups()] == [round(demo["demo"][0]), round(demo["demo"][1]),
                                              round(demo["demo"][2])]
    said = re.search(r"command 2 takes ([\d.]+) minutes \((\d+) s: lint (\d+) s and types (\d+) s run beside the "
                     r"tests, which take (\d+) s with their environment \(pytest (\d+) s\); then slow (\d+) s\)", text)
    assert said, "README.md lost command 2's durations"
    assert float(said[1]) == round(suite["all"][0] / 60, 1)
    assert [int(n) for n in said.groups()[1:]] == [
        round(suite["all"][0]), round(suite["lint"][0]), round(suite["types"][0]), round(suite["tests"][0]),
        round(suite["tests"][2]), round(suite["slow"][0])]
