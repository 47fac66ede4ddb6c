"""The at-most-once tally: each call's ending and execution count land in the figures the
docs' "Retries and at-most-once" table reports (no server needed)."""

from __future__ import annotations

import pytest

from client.errors import AmbiguousOutcome, CortexError
from conformance.judging.at_most_once import FIGURES, Tally, outcome_figure


def test_each_ending_counts_in_its_figure() -> None:
    tally = Tally()
    boom = CortexError("boom", route="step")
    tally.record(1, None)  # a success the fake ran once
    tally.record(0, None)  # a success the fake never ran: phantom
    tally.record(2, AmbiguousOutcome("lost", attempt=2, how_to_check="state"))  # ran twice
    tally.record(0, CortexError("poll lost", route="get_request"))  # accepted, never ran: phantom
    tally.record(1, boom)  # ran, yet neither a success nor AmbiguousOutcome: unflagged
    assert tally.public() == {
        "calls": 5, "succeeded": 2, "ambiguous": 1, "other_errors": 1, "executions": 4,
        "duplicates": 1, "poll_errors": 1, "unflagged": 1, "phantom": 2, "errors": [repr(boom)],
    }
    assert list(tally.public()) == [*FIGURES, "errors"]  # the report's column order
    assert (tally.duplicates, tally.phantom, tally.unflagged) == (1, 2, 1)
    with pytest.raises(AttributeError):
        _ = tally.retries


def test_outcome_figures() -> None:
    assert outcome_figure(None) == "succeeded"
    assert outcome_figure(CortexError("x", route="get_request")) == "poll_errors"
    assert outcome_figure(ValueError("x")) == "other_errors"


def test_every_client_mutant_has_its_hook() -> None:
    """A ``client=True`` mutant of the fake's table is applied through the client's
    ``before_send`` seam; one without a hook would run the plain client and survive."""
    from conformance.judging.at_most_once import CLIENT_MUTANTS, client_mutant_seams
    from fake_gs.controls.mutants import MUTANTS

    assert set(CLIENT_MUTANTS) == {name for name, m in MUTANTS.items() if m.client}
    assert client_mutant_seams(None) == {}
    headers = {"Idempotency-Key": "k"}
    for name in CLIENT_MUTANTS:
        hook = client_mutant_seams(name).get("before_send")
        assert hook is not None
        hook(0, headers)
    assert headers == {"Idempotency-Key": "k"}  # a first try goes out untouched
