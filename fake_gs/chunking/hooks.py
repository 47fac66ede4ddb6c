"""The chunk seam: where the rules in force change the chunk-group state machine.

A ``chunk:`` seam point either waives one named rule of :mod:`fake_gs.chunking.machine` (the
machine then decides as if the rule did not exist) or transforms the decision it reached
(what an ``Ack``, ``Execute`` or ``Replay`` does). The chunk protocol asks only this seam;
which row names which point (and the clauses it breaks) is the table's business
(``fake_gs/controls/``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TypeVar

from fake_gs.chunking import machine as cm

#: The machine rules a ``chunk:`` point may waive (the point is the rule's name).
WAIVERS: frozenset[str] = cm.RULES


Transform = Callable[[cm.Decision], cm.Decision]
#: The decisions a ``chunk:`` point changes.
Changed = TypeVar("Changed", cm.Ack, cm.Execute, cm.Replay)


def _setting(kind: type[Changed], change: Callable[[Changed], Changed]) -> Transform:
    """A transform that applies ``change`` to decisions of ``kind`` and passes the others."""

    def transform(decision: cm.Decision) -> cm.Decision:
        return change(decision) if isinstance(decision, kind) else decision

    return transform


def _both(first: Transform, second: Transform) -> Transform:
    return lambda decision: second(first(decision))


#: ``chunk:`` point -> how it changes the machine's decision.
TRANSFORMS: Mapping[str, Transform] = {
    "ack-leaks-request-id": _setting(cm.Ack, lambda ack: replace(ack, leak_request_id=True)),
    "sha-unverified": _setting(cm.Execute, lambda run: replace(run, verify_sha=False)),
    "bytes-kept": _setting(cm.Execute, lambda run: replace(run, release_bytes=False)),
    "frame-limits-skipped": _setting(cm.Execute, lambda run: replace(run, frame_limits=False)),
    "replay-executes": _both(_setting(cm.Execute, lambda run: replace(run, keep_decoded=True)),
                             _setting(cm.Replay, lambda again: replace(again, execute_again=True))),
    "replay-reruns-quietly": _both(
        _setting(cm.Execute, lambda run: replace(run, keep_decoded=True)),
        _setting(cm.Replay, lambda again: replace(again, execute_again=True, quietly=True))),
}

#: Every point the chunk seam knows.
POINTS: frozenset[str] = WAIVERS | frozenset(TRANSFORMS)


def decide(points: frozenset[str], chunk: cm.Chunk, group: cm.GroupState | None, limits: cm.Limits,
           usage: cm.Usage = cm.NO_USAGE) -> cm.Decision:
    """The machine's decision as it is reached with the ``chunk:`` seam ``points`` in force
    (none: the plain machine)."""
    decision = cm.decide(chunk, group, limits, usage, points & WAIVERS)
    for point in sorted(points & TRANSFORMS.keys()):
        decision = TRANSFORMS[point](decision)
    return decision
