"""The house rules a newcomer relies on: rooms small enough to see, no import circles.

Checked over the four packages (``contract``, ``client``, ``fake_gs``, ``conformance``):
no package folder holds more than :data:`MAX_MODULES_PER_FOLDER` modules directly, no
module is over :data:`MAX_MODULE_LINES` lines, no function over :data:`MAX_FUNCTION_LINES`,
and no import circle inside a package, counting the imports made inside functions (a lazy
import is still a dependency) and those under ``if TYPE_CHECKING:`` (a type-only circle is
still a circle to read).
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("contract", "client", "fake_gs", "conformance")
MAX_MODULES_PER_FOLDER = 15
#: Past these a module or function is a prompt to look (a warning), not a reason to split a
#: concept; past the hard ceilings it fails.
LOOK_MODULE_LINES, MAX_MODULE_LINES = 450, 600
LOOK_FUNCTION_LINES, MAX_FUNCTION_LINES = 50, 80


def _modules(package: str) -> dict[str, Path]:
    """Dotted name -> file, for every module of ``package`` (a package is its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth: lazy ones inside functions, and those under
    ``if TYPE_CHECKING:`` (never run, but a circle of types is still a circle to read)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _imported(node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> Iterator[str]:
    """The modules of ``known`` an import statement loads (``from pkg import mod`` loads mod)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names if alias.name in known)
        return
    if node.level or node.module is None:
        return
    for alias in node.names:
        submodule = f"{node.module}.{alias.name}"
        if submodule in known:
            yield submodule
        elif node.module in known:
            yield node.module


def import_graph(package: str) -> dict[str, set[str]]:
    known = _modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = {dep for node in _imports(tree)
                       for dep in _imported(node, known) if dep != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, deps = work[-1]
            dep = next(deps, None)
            if dep is not None:
                if dep not in index:
                    index[dep] = low[dep] = len(index)
                    stack.append(dep)
                    on_stack.add(dep)
                    work.append((dep, iter(sorted(graph[dep]))))
                elif dep in on_stack:
                    low[node] = min(low[node], index[dep])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_inside_a_package(package: str) -> None:
    assert circles(import_graph(package)) == []


def test_the_circle_finder_finds_a_planted_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_a_lazy_import_counts_and_so_does_a_type_checking_one() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\n"
                     "def f():\n    import y\n")
    names = [alias.name for node in _imports(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert names == ["x", "y"]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_folder_holds_more_than_fifteen_modules(package: str) -> None:
    crowded = {}
    for folder in [ROOT / package, *(p for p in (ROOT / package).rglob("*") if p.is_dir())]:
        count = len([p for p in folder.glob("*.py") if p.name != "__init__.py"])
        if count > MAX_MODULES_PER_FOLDER:
            crowded[str(folder.relative_to(ROOT))] = count
    assert crowded == {}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_subpackage_says_what_lives_there(package: str) -> None:
    silent = [str(path.relative_to(ROOT)) for path in (ROOT / package).rglob("__init__.py")
              if not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))]
    assert silent == []


@pytest.mark.parametrize("package", PACKAGES)
def test_rooms_and_functions_stay_small(package: str) -> None:
    """Modules and functions past the look figures are named in a warning (a prompt to
    read them again); past the ceilings the test fails."""
    too_long: list[str] = []
    to_look_at: list[str] = []
    for path in _modules(package).values():
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(ROOT))
        lines = text.count("\n")
        if lines > LOOK_MODULE_LINES:
            (too_long if lines > MAX_MODULE_LINES else to_look_at).append(f"{where}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > LOOK_FUNCTION_LINES:
                    (too_long if length > MAX_FUNCTION_LINES else to_look_at).append(
                        f"{where}:{node.lineno} {node.name}: {length} lines")
    if to_look_at:
        warnings.warn("worth a look (long, not too long): " + "; ".join(to_look_at), stacklevel=1)
    assert too_long == []
