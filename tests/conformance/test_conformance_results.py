"""Booking outcomes into per-clause verdicts, and the four report forms."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from conformance.reporting import render as report
from conformance.reporting.verdicts import ClauseBook, RunResults, TestOutcome, clause_ids
from contract.clauses import CLAUSES, Clause, ClauseProfile, for_profile


def book(*outcomes: TestOutcome) -> ClauseBook:
    b = ClauseBook()
    for o in outcomes:
        b.book(o)
    return b


def verdicts(b: ClauseBook, profile: str = "current") -> dict[str, tuple[str, str]]:
    res = b.results(profile, "t")  # type: ignore[arg-type]
    return {v.id: (v.status, v.reason) for v in res.verdicts}


def test_failed_on_a_clause_beats_passes_elsewhere():
    v = verdicts(
        book(
            TestOutcome("a", ("CG-RESTART-1",), "passed"),
            TestOutcome(
                "b", ("CG-RESTART-1", "CG-FINAL-1"), "failed", ("CG-RESTART-1",), example="boom"
            ),
        )
    )
    assert v["CG-RESTART-1"] == ("red", "boom")
    assert v["CG-FINAL-1"][0] == "skipped" and "not reached" in v["CG-FINAL-1"][1]


def test_unattributed_failure_reds_every_clause_of_the_test():
    v = verdicts(book(TestOutcome("a", ("STEP-LR-1", "STEP-RESULT-1"), "failed", example="x")))
    assert v["STEP-LR-1"][0] == v["STEP-RESULT-1"][0] == "red"


def test_skips_carry_reasons_and_green_wins_over_skip():
    v = verdicts(
        book(
            TestOutcome("a", ("AUTH-ISOLATION-1",), "skipped", skip_reason="needs a second token"),
            TestOutcome("b", ("STEP-LR-1",), "skipped", skip_reason="nope"),
            TestOutcome("c", ("STEP-LR-1",), "passed"),
        )
    )
    assert v["AUTH-ISOLATION-1"] == ("skipped", "needs a second token")
    assert v["STEP-LR-1"][0] == "green"
    assert v["CAP-QUEUE-1"] == ("skipped", "no property in this run checks it")


def test_phases_of_one_test_merge():
    b = ClauseBook()
    b.book(TestOutcome("a", ("STEP-LR-1",), "passed"))
    b.book(TestOutcome("a", ("STEP-LR-1",), "failed", example="teardown broke"))
    assert verdicts(b)["STEP-LR-1"][0] == "red"


def test_exit_rule_counts_must_only():
    res = book(
        *(TestOutcome(c.id, (c.id,), "passed") for c in for_profile("current") if c.level == "MUST")
    )
    out = res.results("current", "t")
    assert out.ok  # SHOULD clauses skipped do not fail the run
    assert out.counts()["skipped"] == sum(c.level == "SHOULD" for c in for_profile("current"))


def test_a_red_should_fails_the_run():
    res = book(
        *(
            TestOutcome(c.id, (c.id,), "passed")
            for c in for_profile("current")
            if c.level == "MUST"
        ),
        TestOutcome("s", ("STEP-MEM-1",), "failed", example="no peak_memory"),
    )
    assert not res.results("current", "t").ok


def test_selection_and_json_round_trip():
    res = book(TestOutcome("a", ("STEP-LR-1",), "passed")).results(
        "proposed", "t", selected=("STEP-LR-1",)
    )
    assert [v.id for v in res.verdicts] == ["STEP-LR-1"]
    again = RunResults.from_json(res.to_json())
    assert again.to_json() == res.to_json()


def test_a_verdict_carries_its_clause_as_registered():
    for v in book().results("proposed", "t").verdicts:
        card = {f.name: getattr(v, f.name) for f in fields(Clause)}
        assert isinstance(v, Clause) and card == asdict(CLAUSES[v.id])


def test_clause_id_parsing():
    assert clause_ids("CG-RESTART-1, STEP-LR-1") == ("CG-RESTART-1", "STEP-LR-1")
    assert "CG-IDEM-3" in clause_ids("CG-*")
    with pytest.raises(ValueError):
        clause_ids("NOPE-1")


@pytest.fixture
def mixed() -> RunResults:
    b = book(
        TestOutcome("t::green", ("STEP-LR-1",), "passed"),
        TestOutcome(
            "t::red",
            ("CG-RESTART-1",),
            "failed",
            ("CG-RESTART-1",),
            example="expected 409 <got> 200 & more\nlast HTTP exchanges:\n> POST /x",
        ),
        TestOutcome(
            "t::skip", ("AUTH-ISOLATION-1",), "skipped", skip_reason="needs a second token"
        ),
    )
    return b.results("proposed", "http://example.test", duration_s=1.5, settings={"examples": 3})


def test_html_is_self_contained_with_expandable_examples(mixed):
    page = report.html_page(mixed)
    assert "<details>" in page and "expected 409 &lt;got&gt; 200 &amp; more" in page
    assert not re.search(r"<(script|link|img)\b", page), "the page must need no external assets"
    assert "CG-RESTART-1" in page and "needs a second token" in page
    assert page.count("class='area'") >= 20


def test_markdown_and_text(mixed):
    md = report.markdown(mixed)
    assert "| 🔴 red | MUST | `CG-RESTART-1` |" in md and "## Failing examples" in md
    text = report.text(mixed)
    assert "FAIL MUST   CG-RESTART-1" in text and "DOES NOT CONFORM" in text


def test_junit_one_testcase_per_clause(mixed):
    root = ET.fromstring(report.junit(mixed))
    cases = root.findall(".//testcase")
    assert len(cases) == len(mixed.verdicts)
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["CG-RESTART-1"]
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == "1"


def test_write_by_suffix(mixed, tmp_path):
    for name in ("r.html", "r.md", "r.xml", "r.json", "r.txt"):
        path = report.write(mixed, tmp_path / name)
        assert path.stat().st_size > 100


def _all_must_green(profile: ClauseProfile = "current") -> list[TestOutcome]:
    return [TestOutcome(c.id, (c.id,), "passed") for c in for_profile(profile) if c.level == "MUST"]


def test_four_states_and_clauses_outside_the_profile_are_not_applicable():
    b = book(
        TestOutcome("g", ("STEP-LR-1",), "passed"),
        TestOutcome("r", ("CG-RESTART-1",), "failed", ("CG-RESTART-1",), example="x"),
        TestOutcome("s", ("AUTH-ISOLATION-1",), "skipped", skip_reason="needs a second token"),
    )
    res = b.results("current", "t")
    v = {x.id: x for x in res.verdicts}
    assert len(res.verdicts) == len(CLAUSES)
    assert v["PROP-FNG-1"].status == "not-applicable" and "current" in v["PROP-FNG-1"].reason
    assert v["SEM-KL-1"].status == "not-applicable"
    assert (v["STEP-LR-1"].status, v["CG-RESTART-1"].status) == ("green", "red")
    assert v["AUTH-ISOLATION-1"].status == "skipped" and "--gs-token2" in v["AUTH-ISOLATION-1"].enable
    assert set(res.counts()) == {"green", "red", "skipped", "not-applicable"}
    for page in (report.text(res), report.markdown(res), report.html_page(res), report.junit(res)):
        assert "not-applicable" in page or "N/A" in page
        assert "--gs-token2" in page  # what would enable the skipped clause


def test_a_skipped_must_fails_only_with_require_all():
    outcomes = [o for o in _all_must_green() if o.nodeid != "CAP-QUEUE-1"]
    outcomes.append(
        TestOutcome("q", ("CAP-QUEUE-1",), "skipped", skip_reason="needs the embedded fake's admin API")
    )
    lenient = book(*outcomes).results("current", "http://x", url=True)
    assert lenient.ok and lenient.failing() == []
    strict = book(*outcomes).results("current", "http://x", url=True, require_all=True)
    assert not strict.ok and [v.id for v in strict.failing()] == ["CAP-QUEUE-1"]
    assert "--require-all: 1 skipped MUST clauses fail the run: CAP-QUEUE-1" in report.text(strict)
    assert RunResults.from_json(strict.to_json()).require_all


def test_a_red_decided_clause_never_fails_a_url_run_but_fails_the_embedded_one():
    decided = CLAUSES["JOB-RUNNING-1"]
    assert decided.source == "decided" and decided.level == "MUST"
    outcomes = [o for o in _all_must_green() if o.nodeid != decided.id]
    outcomes.append(TestOutcome("d", (decided.id,), "failed", (decided.id,), example="got 400"))
    on_url = book(*outcomes).results("current", "http://x", url=True)
    verdict = next(v for v in on_url.verdicts if v.id == decided.id)
    assert verdict.status == "red" and not verdict.binding and on_url.ok
    assert "never fails a run against a URL" in report.text(on_url)
    root = ET.fromstring(report.junit(on_url))
    assert root.find(".//failure") is None
    embedded = book(*outcomes).results("current", "embedded fake", url=False)
    assert not embedded.ok


def test_a_spec_clause_red_fails_a_url_run():
    outcomes = [o for o in _all_must_green() if o.nodeid != "SAVE-LOAD-1"]
    outcomes.append(TestOutcome("d", ("SAVE-LOAD-1",), "failed", example="steps not restored"))
    assert not book(*outcomes).results("current", "http://x", url=True).ok


def test_a_property_that_crashes_is_reported_as_unable_to_judge():
    """An exception other than an assertion (an answer of a type the property did not
    expect) is a red with a message saying the answer could not be judged."""
    from conformance.reporting.booking import failing_example as _example
    from conformance.reporting.violations import ClauseViolation

    try:
        float([0.1])  # type: ignore[arg-type]
    except TypeError:
        crash = pytest.ExceptionInfo.from_current()
    assert _example(crash).startswith("the property could not judge the server's answer (TypeError")
    try:
        raise ClauseViolation(["STEP-LR-1"], "lr 1 != 2")
    except ClauseViolation:
        violation = pytest.ExceptionInfo.from_current()
    assert _example(violation).startswith("lr 1 != 2")


def test_a_run_that_judged_no_must_clause_is_not_green():
    """Every MUST skipped (a URL without a token, a selection nothing checks): no verdict."""
    res = book(TestOutcome("a", ("STEP-LR-1",), "skipped", skip_reason="no token given")).results(
        "current", "http://x", url=True
    )
    assert res.failing() == [] and res.judged_nothing and not res.ok
    assert report.headline(res).startswith("NOTHING JUDGED")
    only_should = book(TestOutcome("s", ("STEP-MEM-1",), "passed")).results(
        "current", "t", selected=("STEP-MEM-1",)
    )
    assert only_should.ok  # a run of SHOULD clauses only, one judged: a verdict on something


def test_an_interrupted_run_is_not_green_however_green_its_part():
    """Ctrl-C after some properties: what ran was green, the run still does not conform."""
    res = book(TestOutcome("a", ("JOB-CREATE-1",), "passed")).results("current", "t")
    assert res.ok
    res.interrupted = True
    assert not res.ok
    assert report.headline(res).startswith("INTERRUPTED")
    assert RunResults.from_json(res.to_json()).interrupted


def test_skip_notes_name_the_cli_spelling_when_run_from_the_cli() -> None:
    from conformance.cli import cli_spelling

    res = book(
        TestOutcome("a", ("CAP-QUEUE-1",), "skipped", skip_reason="needs 2 jobs: raise --gs-max-jobs"),
        TestOutcome("b", ("STEP-LR-1",), "passed"),
    ).results("current", "http://x", url=True)
    plugin = {v.id: v for v in res.verdicts}  # as the plugin reports them: its own spelling
    assert plugin["CAP-QUEUE-1"].enable == "allow more jobs: --gs-max-jobs N"
    spelt = {v.id: v for v in cli_spelling(res).verdicts}
    assert spelt["CAP-QUEUE-1"].reason == "needs 2 jobs: raise --max-jobs"
    assert spelt["CAP-QUEUE-1"].enable == "allow more jobs: --max-jobs N"  # the CLI's spelling only


def test_the_cli_rewrites_the_plugins_json_and_junit_in_its_own_spelling(tmp_path: Path) -> None:
    import argparse

    from conformance.cli import _write_and_print, cli_spelling

    res = book(
        TestOutcome("a", ("CAP-QUEUE-1",), "skipped", skip_reason="needs 2 jobs: raise --gs-max-jobs"),
        TestOutcome("b", ("STEP-LR-1",), "passed"),
    ).results("current", "http://x", url=True)
    ns = argparse.Namespace(markdown=None, report=None, junit=str(tmp_path / "j"), json=str(tmp_path / "r.json"))
    _write_and_print(ns, cli_spelling(res))
    for path in (tmp_path / "j.xml", tmp_path / "r.json"):
        written = path.read_text()
        assert "--max-jobs" in written and "--gs-max-jobs" not in written, path
