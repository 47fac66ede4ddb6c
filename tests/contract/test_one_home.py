"""One home per fact: route paths, state names, header names and error
codes are spelled in ``contract/`` only; ``fake_gs/``, ``client/`` and ``conformance/``
import them. When two rooms each spell a fact they can disagree, and that disagreement is
the bug this kit exists to catch.

The scan reads string literals with :mod:`ast` (so comments and docstrings never count):
a literal equal to a state, a header name or an error code, or a literal (or an f-string's
constant part) without whitespace that holds a route path fragment, is a hit. Prose that
names a route (``"POST /step failed"``) holds whitespace and is not a hit.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from contract.auth import AUTHORIZATION_HEADER, TOKEN_TYPE, TOKEN_TYPE_HEADER
from contract.errors import REQUEST_ID_HEADER, ErrorCode
from contract.idempotency import IDEMPOTENCY_KEY_HEADER, REPLAYED_HEADER
from contract.routes import PREFIX_TEMPLATE, ROUTES
from contract.states import (
    JobState,
    RequestState,
    job_state_enum_spelling,
    request_state_enum_spelling,
)

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("fake_gs", "client", "conformance")

#: Literals that equal a fact's spelling but are not the fact: (file, literal) -> why.
ALLOWED: dict[tuple[str, str], str] = {
    ("conformance/reporting/verdicts.py", "failed"): "pytest's outcome word (passed/failed/skipped)",
    ("conformance/reporting/booking.py", "failed"): "pytest's outcome word (passed/failed/skipped)",
    ("conformance/reporting/formats/junit.py", "failed"): "a JUnit case's outcome word, named once there",
    ("conformance/properties/whole/test_proposed.py", "done"): "a completion's text sent to log-probs",
    ("fake_gs/chunking/machine.py", "done"): "a chunk group's own state, named once here",
    ("fake_gs/chunking/machine.py", "failed"): "a chunk group's own state, named once here",
    ("fake_gs/state/backends/sampling.py", "done"): "the stream's closing event's type tag (StreamDoneEvent)",
    ("fake_gs/answers/forms.py", "failed"): "the fallback message of a failed request's error",
    ("fake_gs/state/backends/training.py", "/checkpoints/"): "a checkpoint's fake-gs:// storage URI",
    ("fake_gs/controls/traffic.py", "unauthenticated"): "the account label of traffic with an unknown token",
    ("client/config.py", "request_timeout"): "a field name of upstream's unified client config",
}

@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind} {self.text!r} is spelled outside contract/"


def _path_fragments() -> list[str]:
    """The literal pieces of every route template (``/forward-backward``, ``:cancel``, ...)
    and of the service prefix, longest first so ``/generate-stream`` wins over ``/generate``."""
    pieces: set[str] = set()
    for template in (PREFIX_TEMPLATE, *(r.path for r in ROUTES)):
        pieces.update(p for p in re.split(r"\{[^}]*\}", template) if p.strip("/"))
    return sorted(pieces, key=len, reverse=True)


STATES = frozenset(
    {*JobState, *RequestState}
    | {job_state_enum_spelling(s) for s in JobState}
    | {request_state_enum_spelling(s) for s in RequestState}
)
HEADERS = frozenset(
    h.lower()
    for h in (AUTHORIZATION_HEADER, TOKEN_TYPE_HEADER, TOKEN_TYPE, REQUEST_ID_HEADER,
              IDEMPOTENCY_KEY_HEADER, REPLAYED_HEADER)
)
CODES = frozenset(ErrorCode)
_FRAGMENT = re.compile(
    "(?:" + "|".join(re.escape(f) for f in _path_fragments()) + ")(?![A-Za-z0-9_-])"
)


def _kind(text: str) -> str | None:
    if text in STATES:
        return "state"
    if text in CODES:
        return "error code"
    if text.lower() in HEADERS:
        return "header"
    if not any(c.isspace() for c in text) and _FRAGMENT.search(text):
        return "route path"
    return None


def _is_type_lookup(node: ast.AST) -> bool:
    """``x.get("type")`` or ``x["type"]``: a stream event's discriminator, not a state."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        key: ast.AST = node.args[0]
    elif isinstance(node, ast.Subscript):
        key = node.slice
    else:
        return False
    return isinstance(key, ast.Constant) and key.value == "type"


def _docstrings(tree: ast.AST) -> set[int]:
    """Ids of docstrings (and other bare string statements): prose, not code."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            out.add(id(body[0].value))
    return out


def _field_names(tree: ast.AST) -> set[int]:
    """Ids of literals that name a field rather than hold a state: dict keys, ``x.get("failed")``
    / ``x["cancelled"]`` / ``answer.field("cancelled")`` keys, and the value of an event
    ``type`` (``"done"``)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            out.update(id(k) for k in node.keys if k is not None)
            out.update(id(v) for k, v in zip(node.keys, node.values, strict=True)
                       if isinstance(k, ast.Constant) and k.value == "type")
        elif isinstance(node, ast.Subscript):
            out.add(id(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr in ("get", "pop", "setdefault", "field"):
                out.add(id(node.args[0]))
        elif isinstance(node, ast.Compare) and any(map(_is_type_lookup, [node.left, *node.comparators])):
            out.update(id(c) for c in [node.left, *node.comparators])
    return out


def scan_source(source: str, path: str) -> Iterator[Hit]:
    """Every fact ``source`` spells in a string literal."""
    tree = ast.parse(source)
    prose, field_names = _docstrings(tree), _field_names(tree)
    literals = [(n, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    for node, text in sorted(literals, key=lambda pair: (pair[0].lineno, pair[0].col_offset)):
        kind = _kind(text)
        if kind is None or id(node) in prose or (path, text) in ALLOWED:
            continue
        if not (kind == "state" and id(node) in field_names):
            yield Hit(path, node.lineno, kind, text)


def scan_tree(root: Path = ROOT) -> list[Hit]:
    hits: list[Hit] = []
    for package in SCANNED:
        for file in sorted((root / package).rglob("*.py")):
            rel = file.relative_to(root).as_posix()
            hits.extend(scan_source(file.read_text(encoding="utf-8"), rel))
    return sorted(hits, key=lambda h: (h.path, h.line))


def test_no_fact_is_spelled_outside_contract() -> None:
    stray = [str(h) for h in scan_tree()]
    assert not stray, "import these from contract/ instead:\n" + "\n".join(stray)


def test_every_allowance_is_still_needed() -> None:
    texts = {
        (file.relative_to(ROOT).as_posix(), node.value)
        for package in SCANNED
        for file in (ROOT / package).rglob("*.py")
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert not set(ALLOWED) - texts, sorted(set(ALLOWED) - texts)


PLANTED = '''
"""A docstring naming "running", /forward-backward and job_not_found is prose."""
# a comment: "cancelled" /step Idempotency-Key
def f(job, ans, events):
    if job.status == "running":  # line 5: a state
        url = f"{base}/{job.id}/forward-backward"  # line 6: a route path in an f-string
    headers = {"Idempotency-Key": key}  # line 7: a header, also as a key
    ok = ans.code in ("job_not_found",)  # line 8: an error code
    until = ("JOB_STATE_CANCELLED",)  # line 9: the enum spelling of a state
    flags = {"failed": 0, "cancelled": ans.get("cancelled")}  # field names, not states
    done = [e for e in events if e.get("type") == "done"]  # an event type, not a state
    return "the job is running", "POST /step failed", url + ":cancel"  # line 12: a route
'''


def test_a_planted_violation_is_found() -> None:
    hits = list(scan_source(PLANTED, "planted.py"))
    assert [(h.line, h.kind, h.text) for h in hits] == [
        (5, "state", "running"),
        (6, "route path", "/forward-backward"),
        (7, "header", "Idempotency-Key"),
        (8, "error code", "job_not_found"),
        (9, "state", "JOB_STATE_CANCELLED"),
        (12, "route path", ":cancel"),
    ]
    assert "planted.py:5: state 'running'" in str(hits[0])


def test_an_allowance_names_one_file_only() -> None:
    source = 'outcome = "failed"\n'
    assert not list(scan_source(source, "conformance/reporting/verdicts.py"))
    assert [h.text for h in scan_source(source, "conformance/other.py")] == ["failed"]
