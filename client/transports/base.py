"""The transport seam: the RL client speaks ``Request(op, job_id, body) -> dict`` only.

A transport owns how a job is obtained (created or reattached) and how each canonical op
travels; the RL client owns the op surface and the backend-neutral response shaping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


def given(**fields: Any) -> dict[str, Any]:
    """The fields of a request body that were given: None means "not given" and is left
    out (the RL client's legacy kwargs and the REST bodies' optional fields alike)."""
    return {k: v for k, v in fields.items() if v is not None}


#: Ops that reach a backend.
CORE_OPS: frozenset[str] = frozenset(
    {
        "fwd-bwd",
        "fwd-no-grad",
        "step",
        "save-checkpoint",
        "save-weights",
        "load-checkpoint",
        "generate",
        "log-probs",
        "sync-weights",
        "reset-prefix-cache",
        "tail-logs",
        "cancel-request",
    }
)
#: Colocation lifecycle ops: the integrations call them unconditionally under colocate=True;
#: Cortex has nothing to do for them.
COLOCATION_OPS: frozenset[str] = frozenset(
    {f"{verb}_{role}" for verb in ("wake", "sleep") for role in ("training", "inference", "log_prob")}
    | {"empty_training_cache", "weight_norm"}
)
#: The canonical op vocabulary.
OPS: frozenset[str] = CORE_OPS | COLOCATION_OPS


@dataclass(frozen=True)
class Request:
    """One op on one job; ``body`` is the op's backend-neutral body."""

    op: str
    job_id: str | None
    body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown op {self.op!r}; known: {sorted(OPS)}")


@dataclass(frozen=True)
class JobIds:
    """The job a transport is attached to and its sub-jobs (None when absent)."""

    job_id: str
    training: str | None = None
    sampling: str | None = None
    log_prob: str | None = None
    created: bool = False
    sampling_max_seq_len: int | None = None


@runtime_checkable
class Transport(Protocol):
    def open(self) -> JobIds:
        """Create (or reattach to) the job and wait until it serves requests."""
        ...

    def call(self, request: Request) -> dict[str, Any]:
        """Run one op and return its result."""
        ...

    def close(self, *, cancel: bool) -> None:
        """Release resources; cancel the job when asked."""
        ...
