"""Engines turn a decoded request into a result; the store owns ordering and state.

A small registry so ``--engine NAME`` picks one and only the chosen module is imported
(the tiny engine pulls torch at import; the shape engine only on first use).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fake_gs.engines.base import Engine

#: name -> "module:Class"; each class takes ``seed`` as its first argument (and ``mutant=``
#: when a mutant of ``fake_gs.ops.mutants`` names that engine).
ENGINES: dict[str, str] = {
    "shape": "fake_gs.engines.shape:ShapeEngine",
    "tiny": "fake_gs.engines.tiny:TinyEngine",
}


def load_engine(name: str, seed: int = 0, mutant: str | None = None) -> Engine:
    """Import and build the engine registered as ``name`` (told the mutant if it is its own)."""
    try:
        target = ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; known: {', '.join(sorted(ENGINES))}") from None
    module_name, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    from fake_gs.ops.mutants import MUTANTS

    own = mutant is not None and mutant in MUTANTS and MUTANTS[mutant].engine == name
    engine: Engine = cls(seed, mutant=mutant) if own else cls(seed)
    return engine
