"""Job and request states, their terminal sets, and normalisation of legacy spellings.

Real servers answer ``running``, ``JOB_STATE_RUNNING``, ``canceled`` or ``completed``;
clients compare only normalised forms (spec §3.2, §3.3).
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    PENDING = "pending"
    PLACING = "placing"
    INITIALIZING = "initializing"
    RUNNING = "running"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"
    TERMINATED = "terminated"
    FAILED = "failed"
    # Legacy forms seen in the wild.
    DONE = "done"
    UNKNOWN = "unknown"


class RequestState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    STREAMING = "streaming"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: Start-up order of a job before it can serve data-plane calls.
JOB_STARTUP_ORDER: tuple[JobState, ...] = (
    JobState.PENDING,
    JobState.PLACING,
    JobState.INITIALIZING,
    JobState.RUNNING,
)
JOB_ACTIVE = frozenset(JOB_STARTUP_ORDER)
JOB_TERMINAL = frozenset({JobState.CANCELLED, JobState.TERMINATED, JobState.FAILED, JobState.DONE})
#: States a cancel is accepted in (entering cancellation) or is an idempotent no-op.
JOB_CANCELLABLE = JOB_ACTIVE
JOB_CANCEL_IDEMPOTENT = frozenset({JobState.CANCELLING, JobState.CANCELLED})
#: Job states whose GPUs count as in use for capacity.
JOB_HOLDS_GPUS = JOB_ACTIVE

REQUEST_IN_FLIGHT = frozenset({RequestState.PENDING, RequestState.RUNNING, RequestState.STREAMING})
REQUEST_TERMINAL = frozenset({RequestState.DONE, RequestState.FAILED, RequestState.CANCELLED})

_JOB_PREFIX = "job_state_"
_REQUEST_PREFIX = "request_state_"
_REQUEST_SYNONYMS = {
    "completed": RequestState.DONE,
    "succeeded": RequestState.DONE,
    "success": RequestState.DONE,
    "canceled": RequestState.CANCELLED,
    "queued": RequestState.PENDING,
}
_JOB_SYNONYMS = {"canceled": JobState.CANCELLED, "canceling": JobState.CANCELLING}


def normalize_job_state(raw: object) -> str:
    """Lower-case, strip ``JOB_STATE_`` and fold synonyms; unknown spellings pass through."""
    text = str(raw or "").strip().lower()
    if text.startswith(_JOB_PREFIX):
        text = text[len(_JOB_PREFIX) :]
    return str(_JOB_SYNONYMS.get(text, text))


def normalize_request_state(raw: object) -> str:
    """Lower-case, strip ``REQUEST_STATE_`` and fold ``completed``/``canceled``/... ."""
    text = str(raw or "").strip().lower()
    if text.startswith(_REQUEST_PREFIX):
        text = text[len(_REQUEST_PREFIX) :]
    return str(_REQUEST_SYNONYMS.get(text, text))


def job_state_enum_spelling(state: str) -> str:
    """``running`` -> ``JOB_STATE_RUNNING`` (the enum dialect)."""
    return "JOB_STATE_" + normalize_job_state(state).upper()


def request_state_enum_spelling(state: str) -> str:
    """``done`` -> ``REQUEST_STATE_DONE`` (the enum dialect)."""
    return "REQUEST_STATE_" + normalize_request_state(state).upper()


def is_job_terminal(raw: object) -> bool:
    return normalize_job_state(raw) in JOB_TERMINAL


def is_request_terminal(raw: object) -> bool:
    return normalize_request_state(raw) in REQUEST_TERMINAL
