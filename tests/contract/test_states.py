"""Normalisation of job and request state spellings (spec §3.2, §3.3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.states import (
    JOB_TERMINAL,
    REQUEST_TERMINAL,
    JobState,
    RequestState,
    is_job_terminal,
    is_request_terminal,
    job_state_enum_spelling,
    normalize_job_state,
    normalize_request_state,
    request_state_enum_spelling,
)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("running", "running"),
        ("RUNNING", "running"),
        ("JOB_STATE_RUNNING", "running"),
        ("job_state_pending", "pending"),
        (" Placing ", "placing"),
        ("canceled", "cancelled"),
        ("JOB_STATE_CANCELLED", "cancelled"),
        ("done", "done"),
        ("unknown", "unknown"),
        (None, ""),
    ],
)
def test_job_states_normalise(raw: object, want: str) -> None:
    assert normalize_job_state(raw) == want


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("done", "done"),
        ("completed", "done"),
        ("SUCCEEDED", "done"),
        ("REQUEST_STATE_DONE", "done"),
        ("canceled", "cancelled"),
        ("REQUEST_STATE_CANCELED", "cancelled"),
        ("streaming", "streaming"),
        ("REQUEST_STATE_FAILED", "failed"),
    ],
)
def test_request_states_normalise(raw: str, want: str) -> None:
    assert normalize_request_state(raw) == want


def test_terminal_sets() -> None:
    assert {s.value for s in JOB_TERMINAL} == {"cancelled", "terminated", "failed", "done"}
    assert {s.value for s in REQUEST_TERMINAL} == {"done", "failed", "cancelled"}
    assert is_job_terminal("JOB_STATE_FAILED") and not is_job_terminal("running")
    assert is_request_terminal("completed") and not is_request_terminal("REQUEST_STATE_STREAMING")


@given(st.sampled_from(list(JobState)))
def test_enum_dialect_round_trips_jobs(state: JobState) -> None:
    spelled = job_state_enum_spelling(state)
    assert spelled.startswith("JOB_STATE_") and spelled.isupper()
    assert normalize_job_state(spelled) == state


@given(st.sampled_from(list(RequestState)))
def test_enum_dialect_round_trips_requests(state: RequestState) -> None:
    assert normalize_request_state(request_state_enum_spelling(state)) == state


@given(st.text(max_size=30))
def test_normalisation_never_raises_and_is_idempotent(text: str) -> None:
    once = normalize_request_state(text)
    assert normalize_request_state(once) == once
    job = normalize_job_state(text)
    assert normalize_job_state(job) == job
