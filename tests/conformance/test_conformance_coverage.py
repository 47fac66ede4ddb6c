"""Every clause of the current and proposed profiles is checked by at least one property;
client-subject clauses through the client driver; semantic clauses are at least reported."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import defaultdict

import conformance.properties as props
from contract.clauses import CLAUSES, clauses_of, for_profile
from fake_gs.controls.mutants import MUTANTS


def property_clauses() -> dict[str, set[str]]:
    """clause id -> the property modules checking it."""
    found: dict[str, set[str]] = defaultdict(set)
    for info in pkgutil.walk_packages(props.__path__, f"{props.__name__}."):
        leaf = info.name.rpartition(".")[2]
        if not leaf.startswith("test_"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("test_") and (inspect.isfunction(obj) or inspect.isclass(obj)):
                for cid in clauses_of(obj):
                    found[cid].add(leaf)
    return found


def test_every_current_and_proposed_clause_is_checked():
    checked = property_clauses()
    missing = [c.id for c in for_profile("proposed") if c.id not in checked]
    assert not missing, f"clauses no property checks: {missing}"


def test_client_clauses_go_through_the_client_driver():
    checked = property_clauses()
    for clause in for_profile("proposed", subject="client"):
        assert any(m.startswith("test_client") for m in checked[clause.id]), \
            f"{clause.id} is not checked in a test_client* module"


def test_semantic_clauses_are_reported():
    checked = property_clauses()
    semantic = [c.id for c in CLAUSES.values() if c.profile == "semantic"]
    assert all(cid in checked for cid in semantic)


def test_mutant_clauses_are_selectable():
    """The self-test selects by clause, so each mutant's clauses must have a property."""
    checked = property_clauses()
    for mutant in MUTANTS.values():
        assert set(mutant.clauses) <= set(checked), (
            mutant.name,
            set(mutant.clauses) - set(checked),
        )
