"""The mutant seams are sound: every row of the mutant table acts at known seam points, and
no module of the fake asks for a mutant by name (only the table and its seams know names)."""

from __future__ import annotations

import re
from pathlib import Path

import fake_gs
from contract.errors import ErrorCode
from contract.models import ErrorEnvelope
from fake_gs.controls.mutants import MUTANTS
from fake_gs.controls.seams import REWRITES, Bend, Rewrite, Rule, seams_for, unknown_points

#: The two modules allowed to name mutants: the table and its seams' effects.
_TABLE_MODULES = {"controls/mutants.py", "controls/seams.py"}


def test_every_row_names_known_seam_points() -> None:
    assert unknown_points() == []
    for mutant in MUTANTS.values():
        assert mutant.seams, mutant.name
        assert all(point.startswith("client:") for point in mutant.seams) == mutant.client, mutant.name
        assert any(point.startswith("engine:") for point in mutant.seams) == (mutant.engine is not None), mutant.name


def test_every_point_is_used_by_some_row() -> None:
    named = {point for mutant in MUTANTS.values() for point in mutant.seams}
    for seam, members in (("waive", Rule), ("bend", Bend), ("rewrite", Rewrite)):
        assert {f"{seam}:{member}" for member in members} <= named, seam
    assert {row.point for row in REWRITES.values()} == set(Rewrite)


def test_no_fake_module_asks_for_a_mutant_by_name() -> None:
    names = re.compile("|".join(rf"[\"']{re.escape(name)}[\"']" for name in MUTANTS))
    root = Path(fake_gs.__file__).parent
    found = [f"{path.relative_to(root)}: {hit.group()}"
             for path in sorted(root.rglob("*.py")) if path.relative_to(root).as_posix() not in _TABLE_MODULES
             for hit in names.finditer(path.read_text(encoding="utf-8"))]
    calls = [str(path.relative_to(root)) for path in sorted(root.rglob("*.py"))
             if re.search(r"\.(mutant|variation)\(|\b(mutant|variation)\s*[!=]=", path.read_text(encoding="utf-8"))]
    assert found == [] and calls == []


def test_the_plain_fake_bends_nothing() -> None:
    plain = seams_for(None)
    assert all(plain.enforces(rule) for rule in Rule) and not any(plain.bends(bend) for bend in Bend)
    assert plain.rewrite(Rewrite.CAPACITY, {"n": 1}) == {"n": 1} and plain.engine_quirks() == frozenset()


def test_a_rewrite_acts_at_its_own_point_only() -> None:
    seams = seams_for("capacity-text")
    assert seams.rewrite(Rewrite.CAPACITY, {"n": 1, "ok": True}) == {"n": "1", "ok": True}
    assert seams.rewrite(Rewrite.STEP_ANSWER, {"last_lr": 0.1}) == {"last_lr": 0.1}


def test_the_error_envelope_rewrites_touch_their_own_code_only() -> None:
    missing = ErrorEnvelope(code=str(ErrorCode.JOB_NOT_FOUND), message="no job x")
    other = ErrorEnvelope(code=str(ErrorCode.LIMIT_EXCEEDED), message="too big")
    assert seams_for("job-not-found-miscoded").rewrite(Rewrite.ERROR_ENVELOPE, missing).code == ErrorCode.JOB_CONFLICT
    assert seams_for("job-not-found-miscoded").rewrite(Rewrite.ERROR_ENVELOPE, other) == other
    invalid = ErrorEnvelope(code=str(ErrorCode.VALIDATION_FAILED), message="bad x", detail=[{"loc": ["x"], "msg": "bad x", "type": "value_error"}])
    unnamed = seams_for("validation-unnamed").rewrite(Rewrite.ERROR_ENVELOPE, invalid)
    assert unnamed == ErrorEnvelope(code=str(ErrorCode.VALIDATION_FAILED), message="invalid request body")
