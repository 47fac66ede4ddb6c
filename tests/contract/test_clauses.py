"""The clause registry is well-formed and tests can declare what they check."""

from __future__ import annotations

import re

import pytest

from contract.clauses import AREAS, CLAUSES, checks, clauses_of, for_profile, validate_ids

ID = re.compile(r"^[A-Z]+-[A-Z0-9]+-\d+$")


def test_clause_ids_are_well_formed_and_unique() -> None:
    for cid, c in CLAUSES.items():
        assert ID.match(cid), cid
        assert c.area in AREAS and cid.startswith(c.area + "-")
        assert c.level in ("MUST", "SHOULD") and c.text.endswith(".")


def test_profiles_nest() -> None:
    current = {c.id for c in for_profile("current")}
    proposed = {c.id for c in for_profile("proposed")}
    assert current < proposed
    assert all(c.profile == "semantic" for c in for_profile("semantic"))
    assert len(CLAUSES) >= 150


def test_checks_decorator_accumulates_and_validates() -> None:
    @checks("CG-RESTART-1")
    @checks("POLL-CURSOR-1", "POLL-MAXEV-2")
    def prop() -> None: ...

    assert set(clauses_of(prop)) == {"CG-RESTART-1", "POLL-CURSOR-1", "POLL-MAXEV-2"}
    with pytest.raises(KeyError):
        checks("NOPE-1-1")
    with pytest.raises(KeyError):
        validate_ids(["CG-RESTART-1", "bogus"])
