"""How a refusal is judged (conformance.judging.checks.refused): a binding clause holds a
server only to what its section states, and the kit's own statuses stay on decided clauses."""

from __future__ import annotations

import json

import pytest
from requests.structures import CaseInsensitiveDict

from conformance.drivers.raw_answers import Answer, Settled
from conformance.judging.checks import refused, refused_or_failed
from conformance.reporting.violations import Soft
from conformance.runtime import RUNTIME


def _answer(status: int, body: dict[str, object]) -> Answer:
    raw = json.dumps(body).encode()
    headers = CaseInsensitiveDict({"content-type": "application/json"})
    return Answer("create_job", "POST", "http://127.0.0.1/", status, headers, raw, body)


@pytest.mark.parametrize("status", [404, 409, 429])
def test_a_retried_status_is_no_red_on_a_binding_clause(status: int) -> None:
    """No section forbids a refusal answered with a status spec §3.5's client retries:
    JOBV-EMPTY-1 holds; the kit's 400 is ERR-STATUS-1's (decided), naming the retry."""
    soft = Soft()
    assert refused(_answer(status, {"message": "empty sub_job_configs", "code": status}), soft, "JOBV-EMPTY-1",
                   statuses=[400])
    assert [cid for cid, _ in soft.problems] == ["ERR-STATUS-1"]
    assert "retries as transient" in soft.problems[0][1]


def test_a_retried_status_is_not_judged_where_kit_statuses_are_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """Against a target that may answer validation failures 422 (a URL: every form), the
    kit's status is not judged at all, so a 409 refusal leaves no problem."""
    monkeypatch.setattr(RUNTIME, "forms", frozenset({"validation-422"}))
    soft = Soft()
    assert refused(_answer(409, {"message": "no", "code": 409}), soft, "JOBV-EMPTY-1", statuses=[400])
    assert soft.problems == []


def test_a_status_the_section_names_is_still_held() -> None:
    """CG-RESTART-1's section names 409: another 4xx is red on the clause itself."""
    soft = Soft()
    assert not refused(_answer(400, {"message": "restart", "code": "chunk_group_restart_required"}), soft,
                       "CG-RESTART-1", codes=["chunk_group_restart_required"])
    assert "CG-RESTART-1" in [cid for cid, _ in soft.problems]


def _settled(status: str) -> Settled:
    return Settled("j", "r", pages=[_answer(200, {"request_id": "r", "status": status, "error": "bad"})])


@pytest.mark.parametrize(("ending", "red"), [("failed", False), ("done", True)])
def test_an_async_refusal_may_be_a_request_that_ends_failed(ending: str, red: bool) -> None:
    """A misaligned generate accepted with a request id: green when the request ends failed
    (spec §6.6 names no refusal form), red when it succeeds."""
    soft = Soft()
    refused_or_failed(_answer(200, {"request_id": "r", "job_id": "j"}), soft, "GEN-ALIGN-1",
                      lambda rid: _settled(ending), statuses=[400])
    assert [cid for cid, _ in soft.problems] == (["GEN-ALIGN-1"] if red else [])


def test_an_async_refusal_taken_with_nothing_to_poll_is_red() -> None:
    soft = Soft()
    refused_or_failed(_answer(200, {"ok": True}), soft, "OP-BOOTSTRAP-1", lambda rid: _settled("done"))
    assert [cid for cid, _ in soft.problems] == ["OP-BOOTSTRAP-1"]


def test_an_async_refusal_at_submit_is_judged_as_a_refusal() -> None:
    soft = Soft()
    refused_or_failed(_answer(500, {"message": "boom", "code": 500}), soft, "GEN-ALIGN-1",
                      lambda rid: _settled("done"))
    assert {"GEN-ALIGN-1", "ERR-NO500-1"} <= {cid for cid, _ in soft.problems}
