"""Where the chunk-protocol mutants hook into the chunk-group state machine, by name.

A mutant either waives one named rule of :mod:`fake_gs.chunking.machine` (the machine then
decides as if the rule did not exist) or transforms the decision it reached (what an
``Ack``, ``Execute`` or ``Replay`` does). This table is the only place the chunk protocol
asks which mutant runs; the mutants themselves (names, clauses) are declared in
``fake_gs/ops/mutants.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from fake_gs.chunking import machine as cm

#: Mutant name -> the machine rule it waives.
WAIVERS: Mapping[str, str] = {
    "restart-not-required": cm.RESTART,
    "groups-uncapped": cm.CAPS,
    "account-caps-ignored": cm.ACCOUNT_CAPS,
    "missing-chunks-accepted": cm.MISSING,
}


Transform = Callable[[cm.Decision], cm.Decision]


def _setting(kind: type, **changes: object) -> Transform:
    """A transform that sets ``changes`` on decisions of ``kind`` and passes the others."""

    def transform(decision: cm.Decision) -> cm.Decision:
        return replace(decision, **changes) if isinstance(decision, kind) else decision  # type: ignore[arg-type]

    return transform


def _both(first: Transform, second: Transform) -> Transform:
    return lambda decision: second(first(decision))


#: Mutant name -> how it changes the machine's decision.
TRANSFORMS: Mapping[str, Transform] = {
    "nonfinal-chunk-request-id": _setting(cm.Ack, leak_request_id=True),
    "chunk-sha-unchecked": _setting(cm.Execute, verify_sha=False),
    "group-bytes-kept": _setting(cm.Execute, release_bytes=False),
    "chunked-limits-skipped": _setting(cm.Execute, frame_limits=False),
    "replay-double-exec": _both(_setting(cm.Execute, keep_decoded=True), _setting(cm.Replay, execute_again=True)),
}


def waived_by(mutant: str | None) -> frozenset[str]:
    """The machine rules the fake running ``mutant`` waives."""
    rule = WAIVERS.get(mutant or "")
    return frozenset({rule}) if rule is not None else frozenset()


def decide(mutant: str | None, chunk: cm.Chunk, group: cm.GroupState | None, limits: cm.Limits,
           usage: cm.Usage = cm.NO_USAGE) -> cm.Decision:
    """The machine's decision as the fake running ``mutant`` (None: none) reaches it."""
    decision = cm.decide(chunk, group, limits, usage, waived_by(mutant))
    transform = TRANSFORMS.get(mutant or "")
    return transform(decision) if transform is not None else decision
