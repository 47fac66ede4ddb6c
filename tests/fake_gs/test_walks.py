"""The fake's layout, as the architecture page measures it, held: a forward-backward chunk, the
request it submitted and a poll of it each visit every file once, and the training handlers
import few kit modules (``walks.py`` says how each is counted)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from walks import PACKAGE, ROOT, Walk, handler_imports, lines_of_code, walks


def test_a_chunk_its_run_and_a_poll_each_visit_every_file_once() -> None:
    chunk, run, poll = walks()
    for walk in (chunk, run, poll):
        assert walk.returns == 0, walk.describe()
    # Each walk saw the fake's layers, not nothing: the chunk every stage of the intake.
    assert chunk.files >= 20 and run.files >= 5 and poll.files >= 5, (chunk.summary(), run.summary(), poll.summary())
    stages = {"chunking/intake.py", "chunking/stream.py", "chunking/registry.py", "chunking/payload.py",
              "chunking/judge.py", "chunking/machine.py", "chunking/frame_hash.py", "chunking/outcome.py",
              "chunking/decode.py"}
    assert stages <= set(chunk.stops), chunk.describe()
    assert "state/request_queue.py" in run.stops and "state/job_table.py" in run.stops, run.describe()


def test_the_training_and_polling_handlers_import_at_most_what_they_render_with() -> None:
    imports = handler_imports()
    assert imports["training.py"] <= 6 and imports["frame_requests.py"] <= 7, imports
    assert all(n <= 6 for name, n in imports.items() if name != "frame_requests.py"), imports


def _grep_lines(pattern: str, under: Path, leave_out: tuple[str, ...] = ()) -> int:
    """Lines of the ``*.py`` files under ``under`` matching ``pattern`` (grep -rn, -ri)."""
    found = re.compile(pattern, re.I)
    return sum(1 for path in under.rglob("*.py") if not path.as_posix().endswith(leave_out)
               for line in path.read_text().splitlines() if found.search(line))


def _forwarding_store_methods() -> list[str]:
    """Methods of ``Store`` whose whole body (past a docstring) calls one method of one of its
    parts with the arguments it was given, unchanged."""
    tree = ast.parse((PACKAGE / "state" / "store.py").read_text())
    store = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Store")
    names = []
    for method in (n for n in store.body if isinstance(n, ast.FunctionDef)):
        body = [s for s in method.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        call = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return | ast.Expr) else None
        params = [a.arg for a in method.args.args[1:]]
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Attribute) and ast.unparse(call.func.value).startswith("self.")
                and [ast.unparse(a) for a in call.args] + [k.arg or "" for k in call.keywords] == params):
            names.append(method.name)
    return names


def test_the_architecture_pages_measures_are_todays() -> None:
    """Every figure of docs/architecture.md's measure table is what
    the code measures now (lines of fake_gs within 3 %: any edit moves it)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page[page.index("| measure | today |"):].split("\n\n", 1)[0].splitlines()[2:]
    cells = [[cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in table]
    after = {row[0]: row[-1] for row in cells}
    chunk, run, poll = walks()
    imports = handler_imports()

    def walked(walk: Walk) -> str:
        return f"{len(walk.stops)} stops in {walk.files} files, {walk.returns} returns"

    def numbers(*names: str) -> str:
        return " / ".join(str(imports[name]) for name in names)

    assert after["forward-backward chunk, to its answer: stops in files, returns"].replace("**", "") == walked(chunk)
    assert after["the request it submitted, run on the job's executor: stops in files, returns"] \
        .replace("**", "") == walked(run)
    assert after["poll: stops in files, returns"].replace("**", "") == walked(poll)
    assert after["kit modules imported by `handlers/training.py` / `polling.py` / `frame_requests.py`"] == \
        numbers("training.py", "polling.py", "frame_requests.py")
    assert after["kit modules imported by `jobs.py` / `context.py` / `operations.py` / `sampling.py` / "
                 "`statements.py` / `checkpoints.py` / `__init__.py`"] == \
        numbers("jobs.py", "context.py", "operations.py", "sampling.py", "statements.py", "checkpoints.py",
                "__init__.py")
    http = PACKAGE / "http"
    assert after["seam calls in `fake_gs/http/` (`grep -rn 'seams\\.' fake_gs/http`)"] == \
        str(_grep_lines(r"seams\.", http))
    assert after["handler lines handing the running `Seams` on (`grep -rn seams fake_gs/http/handlers`)"] == \
        str(_grep_lines("seams", http / "handlers"))
    mutant_row = next(key for key in after if key.startswith("lines naming \"mutant\""))
    assert after[mutant_row] == str(_grep_lines("mutant", PACKAGE, ("controls/mutants.py",)))
    assert after["`Store` methods that only forward"] == str(len(_forwarding_store_methods()))
    stated = int(after["lines of `fake_gs` (all `*.py`, within 3 %)"].replace(",", ""))
    assert abs(lines_of_code() - stated) <= 0.03 * stated, (lines_of_code(), stated)
