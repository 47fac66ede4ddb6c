"""Engines turn a decoded request into a result; the store owns ordering and state.

A small registry so ``--engine NAME`` picks one and only the chosen module is imported
(the tiny engine pulls torch at import; the shape engine only on first use).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fake_gs.controls.seams import EngineQuirk
    from fake_gs.engines.protocol import Engine

#: name -> "module:Class"; each class takes ``seed`` as its first argument (and ``quirks=``,
#: the ``engine:`` seam points in force, fake_gs/controls/seams.py).
ENGINES: dict[str, str] = {
    "shape": "fake_gs.engines.shape:ShapeEngine",
    "tiny": "fake_gs.engines.tiny:TinyEngine",
}


def start_up_notes(name: str) -> list[str]:
    """What the banner tells a user of engine ``name`` before their first batch."""
    if name == "tiny":
        from fake_gs.engines.byte_vocab import FOLD_NOTE

        return [FOLD_NOTE]
    return []


def load_engine(name: str, seed: int = 0, quirks: frozenset[EngineQuirk] = frozenset()) -> Engine:
    """Import and build the engine registered as ``name``, with the numeric ``quirks`` of a
    variation living in it (the settings refuse one of another engine)."""
    try:
        target = ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown engine {name!r}; known: {', '.join(sorted(ENGINES))}") from None
    module_name, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    engine: Engine = cls(seed, quirks=quirks) if quirks else cls(seed)
    return engine
