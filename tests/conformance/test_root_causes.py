"""A failed shared set-up is one root cause, and a decided clause's red against a URL is
advisory: the verdict records and the reports built from them."""

from __future__ import annotations

from conformance.reporting import render
from conformance.reporting.verdicts import ClauseBook, RunResults, TestOutcome, root_cause_skip

EVIDENCE = "> POST http://127.0.0.1:1/api/v2/\n< 200\n< {}"


def _book() -> ClauseBook:
    book = ClauseBook()
    reason = root_cause_skip("JOB-CREATE-1", "the session job could not be created", EVIDENCE)
    book.book(TestOutcome("t::step", ("STEP-RESULT-1",), "skipped", skip_reason=reason))
    book.book(TestOutcome("t::save", ("SAVE-RESULT-1",), "skipped", skip_reason=reason))
    book.book(TestOutcome("t::auth", ("AUTH-REQUIRED-1",), "passed"))
    return book


def test_a_failed_set_up_is_one_root_cause_and_its_dependents_are_skipped() -> None:
    chosen = ("JOB-CREATE-1", "STEP-RESULT-1", "SAVE-RESULT-1", "AUTH-REQUIRED-1")
    res = _book().results("current", "embedded fake", selected=chosen)
    v = {x.id: x for x in res.verdicts}
    assert v["JOB-CREATE-1"].status == "red" and v["JOB-CREATE-1"].root_cause == "JOB-CREATE-1"
    assert "< 200" in v["JOB-CREATE-1"].examples[0]["text"]
    for cid in ("STEP-RESULT-1", "SAVE-RESULT-1"):
        assert v[cid].status == "skipped" and v[cid].root_cause == "JOB-CREATE-1", v[cid]
        assert "because of root cause JOB-CREATE-1" in v[cid].reason
    assert v["AUTH-REQUIRED-1"].status == "green"
    assert [c.clause for c in res.root_causes] == ["JOB-CREATE-1"]
    assert set(res.root_causes[0].skipped) == {"STEP-RESULT-1", "SAVE-RESULT-1"}
    assert not res.ok
    assert "1 root cause(s) (JOB-CREATE-1)" in render.headline(res)
    again = RunResults.from_json(res.to_json())
    assert again.root_causes == res.root_causes and again.verdicts == res.verdicts


def test_the_root_cause_counts_even_when_its_clause_is_not_selected() -> None:
    res = _book().results("current", "embedded fake", selected=("STEP-RESULT-1",))
    assert [c.clause for c in res.root_causes] == ["JOB-CREATE-1"] and not res.ok


def test_a_decided_red_against_a_url_is_advisory_not_a_failure() -> None:
    book = ClauseBook()
    book.book(TestOutcome("t::cancel", ("CANCEL-BODY-2",), "failed", failed_clauses=("CANCEL-BODY-2",),
                          example="CANCEL-BODY-2: a cancel with a body was taken"))
    res = book.results("current", "https://x", selected=("CANCEL-BODY-2",), url=True)
    (v,) = res.verdicts
    assert v.status == "red" and v.advisory and v.shown == "advisory"
    assert res.ok
    text = render.text(res)
    assert "ADVI" in text and "== failing examples ==" not in text and "== advisory" in text
    assert "1 advisory" in render.tally(res) and "0 red" in render.tally(res)
    assert "advisory" in render.markdown(res) and "advisory" in render.html_page(res)


def test_a_failed_upload_of_the_large_forward_is_one_root_cause() -> None:
    """The run's one large forward (the result the chunk-delivery clauses re-read) is shared
    set-up: when its upload gets a server error or no answer, every property needing it is
    skipped naming one root cause, none red on its account."""
    import types

    import pytest

    from conformance.judging.large import UPLOAD_CLAUSE, LargeResult

    ops = types.SimpleNamespace(d=None, job=types.SimpleNamespace(job_id="j"))
    large = LargeResult(ops, 64, 512)  # type: ignore[arg-type]

    def reset() -> None:
        raise ConnectionResetError("connection reset by peer")

    large._ask = reset  # type: ignore[method-assign]  # the upload's connection dropped
    reasons: list[str] = []
    for _ in range(2):  # the first property and the next: the same cause, no exception
        with pytest.raises(pytest.skip.Exception) as skipped:
            large.view()
        reasons.append(str(skipped.value.msg))
    assert reasons[0] == reasons[1] and "ConnectionResetError" in reasons[0]
    book = ClauseBook()
    book.book(TestOutcome("t::chunks", ("POLL-CHUNKS-1",), "skipped", skip_reason=reasons[0]))
    book.book(TestOutcome("t::maxev", ("POLL-MAXEV-1",), "skipped", skip_reason=reasons[1]))
    on_fake = book.results("current", "embedded fake")
    v = {x.id: x for x in on_fake.verdicts}
    assert [c.clause for c in on_fake.root_causes] == [UPLOAD_CLAUSE]
    assert v[UPLOAD_CLAUSE].status == "red"
    assert {v["POLL-CHUNKS-1"].status, v["POLL-MAXEV-1"].status} == {"skipped"}
    assert v["POLL-CHUNKS-1"].root_cause == UPLOAD_CLAUSE and not on_fake.ok
    # Against a URL the decided clause's root cause is advisory: it fails no real server.
    on_url = book.results("current", "http://x", url=True)
    assert on_url.root_causes and on_url.binding_causes() == []
