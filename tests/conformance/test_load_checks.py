"""gs-load's checks without Locust: the kit's client through the load meter against a real
fake over loopback (plain, and mutants each check must catch, made deterministic with the
admin API's executor hold), the end-of-run judgement on the fake's counters, the cursor and
stream watch, and the reports. The Locust runs themselves are tests/conformance/test_load.py
(slow)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests

from conformance.inputs import valid_bodies
from conformance.judge.answers import JUDGED, Judge
from conformance.judge.conclude import conclude
from conformance.judge.cursors import DeliveryWatch
from conformance.judge.exchange import Exchange
from conformance.judge.tally import Tally
from conformance.load import batches, report
from conformance.load.checked_client import kit_client
from conformance.load.jobs import JobPool, Target, job_budget
from conformance.load.options import markdown_table
from conformance.load.profile import ProfileError, load_profile, profile_from
from contract import wire
from fake_gs import FakeSettings, serve_in_background

#: Loopback timing: polls and back-off in milliseconds.
FAST = {"poll_first_s": 0.005, "poll_cap_s": 0.02, "backoff_first_s": 0.002, "backoff_cap_s": 0.01}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "load.md"


@contextmanager
def metered(mutant: str | None = None, client: dict[str, Any] | None = None,
            **settings: Any) -> Iterator[SimpleNamespace]:
    """A fake (its counters read first), a job on it, and the kit's client through a meter
    (``client``: more ClientConfig fields)."""
    config = FakeSettings(port=0, variation=mutant, log_level="warning", **settings)
    with serve_in_background(config) as url:
        target = Target(url, "DB", "PUBLIC", "cortex-training", valid_bodies.TRAINING_MODEL, embedded=True)
        pool = JobPool(target, 60.0)
        [job] = pool.open(1)
        tally, reported = Tally(), list[Exchange]()
        judge = Judge(tally)
        rl = kit_client(target, job, judge, reported.append, {**FAST, **(client or {})})
        state = lambda: requests.get(f"{url}/_fake/state", timeout=30).json()  # noqa: E731
        hold = lambda on: requests.post(f"{url}/_fake/jobs/{job}/hold",  # noqa: E731
                                        json={"hold": on}, timeout=30)
        try:
            yield SimpleNamespace(job=job, tally=tally, judge=judge, rl=rl, state=state,
                                  hold=hold, reported=reported, before=state(), pool=pool)
        finally:
            rl.shutdown()
            assert pool.cancel_all() == []
            pool.close()


def _steps_held_together(run: SimpleNamespace, count: int = 3) -> None:
    """``count`` steps submitted while the job's executor is held, then waited for."""
    rest = run.rl.transport.rest
    run.hold(True)
    answers = [rest.step(run.job) for _ in range(count)]
    run.hold(False)
    for answer in answers:
        rest.result(run.job, answer, route_name="step")


def _judge_end(run: SimpleNamespace) -> None:
    conclude(run.tally, [run.job], run.before, run.state())


def test_an_rl_iteration_is_metered_route_by_route_and_clean() -> None:
    with metered(result_delivery="chunks", result_chunk_bytes=8448) as run:
        rl, rng = run.rl, batches.random.Random(1)
        prompts = batches.prompts(rng, 3, 8)
        out = rl.generate(prompts, {"max_tokens": 4})
        batch = batches.rl_batch(prompts, [r["token_ids"] for r in out], 16)
        rl.fwd_no_grad(batch)
        rl.fwd_bwd(batch)
        assert rl.step()["global_steps"] == 1
        rl.sync_weights()
        rl.save_checkpoint()
        rest = rl.transport.rest
        answer = rest.generate_stream(run.job, {"prompts": prompts, "sampling_params": {}})
        assert len([e for e in rest.stream(run.job, answer["request_id"]) if e["type"] == "result"]) == 3
        _judge_end(run)
    tally = run.tally
    assert {"POST generate", "POST forward_no_grad", "POST forward_backward", "POST step",
            "POST operation", "POST save", "POST generate_stream", "GET get_request",
            "GET get_job"} <= set(tally.exchanges)
    assert tally.violations == {}, tally.examples
    assert len(run.reported) == sum(tally.exchanges.values()) and not sum(tally.failures.values())
    assert tally.sent["POST forward_backward"] > batch["batch"]["input_ids"].numel() * 8
    assert tally.calls["step"] == {"attempted": 1, "accepted": 1}
    assert tally.steps[run.job] == {"1": 1}


def test_a_step_run_twice_under_concurrency_is_counted_by_the_fakes_counters() -> None:
    with metered("concurrent-step-twice") as run:
        _steps_held_together(run)
        _judge_end(run)
    # The first step ran once, the two queued behind it twice each.
    assert run.tally.violations == {"REQ-ONCE-1": 2, "STEP-COUNT-1": 2}, run.tally.examples


def test_a_500_under_concurrency_is_counted_and_the_call_still_runs_once() -> None:
    with metered("concurrent-500") as run:
        _steps_held_together(run)
        _judge_end(run)
    assert run.tally.violations == {"ERR-NO500-1": 1}, run.tally.examples
    assert run.tally.failures["POST step"] == 1  # resent with its key, the step ran once
    assert run.tally.steps[run.job] == {"1": 1, "2": 1, "3": 1}


def test_an_error_without_a_spec_body_is_counted() -> None:
    with metered("bare-400") as run, pytest.raises(Exception, match="400"):
        run.rl.step(learning_rate=-1.0)
    assert run.tally.violations["ERR-ENVELOPE-1"] == 1


def test_stream_events_returned_twice_are_counted() -> None:
    with metered("stream-events-repeated", client={"max_events": 1}) as run:
        rest = run.rl.transport.rest
        answer = rest.generate_stream(run.job, {"prompts": [[1, 2], [3, 4]], "sampling_params": {}})
        list(rest.stream(run.job, answer["request_id"]))
    assert run.tally.violations["GENS-DRAIN-1"] >= 1


def test_cursor_pages_that_repeat_or_skip_a_chunk_are_counted() -> None:
    events = wire.result_chunk_events(wire.dumps({"x": list(range(300))}), 8448)
    assert len(events) >= 3
    tally = Tally()
    watch = DeliveryWatch(tally)
    watch.page("r1", None, {"status": "done", "events": events[:1], "next_cursor": "c1"})
    watch.page("r1", "c1", {"status": "done", "events": events[:1], "next_cursor": "c2"})
    watch.page("r1", "c2", {"status": "done", "events": events[2:3], "next_cursor": None})
    skipped = len(events) - 2
    assert tally.violations == {"POLL-CURSOR-1": 1 + skipped}  # chunk 0 again, then the rest
    again = Tally()
    watch = DeliveryWatch(again)
    for _ in range(2):  # the same cursor re-asked: the same page is allowed (POLL-CURSOR-1)
        watch.page("r2", "c1", {"status": "done", "events": events[:1], "next_cursor": "c2"})
    watch.page("r2", "c2", {"status": "done", "events": events[1:], "next_cursor": None})
    assert again.violations == {}


def test_steps_answered_alone_are_judged_by_their_global_steps() -> None:
    tally = Tally()
    for figure in ("attempted", "accepted") * 3:
        tally.call("step", figure, "J")
    for value in (4, 6, 6):
        tally.step_seen("J", value)
    conclude(tally, ["J"], None, None)
    assert tally.violations == {"STEP-COUNT-1": 1}  # 6 twice; 4..6 spans 3 = attempted


def _outcome() -> report.Outcome:
    tally = Tally(node="run")
    for ms in (3, 5, 40, 900):
        tally.exchange("POST step", 200, 100, ms, when=1000.0 + ms / 100)
    tally.exchange("GET get_request", 150, 300, 2, when=1001.0, failed=True)
    tally.violation("ERR-NO500-1", "POST .../step -> 500")
    tally.violation("STEP-COUNT-1", "job J: ...", count=2)
    tally.violation("ERR-ENVELOPE-1", "POST .../step -> 400 text/plain", count=2)
    return report.Outcome(tally, 2.0, "http://server", counts_decided=False, max_violations=1,
                          cost={"jobs_created": 1, "gpu_minutes": 0.5, "requests": 5,
                                "bytes_sent": 950, "bytes_received": 700}, fake_cpu_s=None)


def test_reports_carry_both_tables_the_cost_and_the_picture() -> None:
    out = _outcome()
    # ERR-NO500-1 and STEP-COUNT-1 are decided: reported only; ERR-ENVELOPE-1 counts
    assert out.counted == 2 and out.exit_code == 1
    step = next(r for r in out.routes if r.key == "POST step")
    assert (step.calls, step.p50, step.p99) == (4, 5, 900)
    text = report.text(out)
    for fragment in ("POST step", "p95 ms", "STEP-COUNT-1", "no (decided)", "cost: 1 job",
                     "DOES NOT CONFORM UNDER LOAD"):
        assert fragment in text
    suite = ET.fromstring(report.junit(out)).find("testsuite")
    assert suite is not None and suite.get("failures") == "1" and len(suite) - 1 == len(JUDGED)
    md = report.markdown(out)
    assert "| POST step | 4 | 0 |" in md
    # The verdict and the failures box come first; violating clauses sort before clean ones.
    assert md.index("DOES NOT CONFORM UNDER LOAD") < md.index("Failures (1)") < md.index("## Per route")
    assert [r.count > 0 for r in out.violations] == sorted((r.count > 0 for r in out.violations), reverse=True)
    assert text.index("== failures (1) ==") < text.rindex("DOES NOT CONFORM UNDER LOAD")
    section = report.html_section(out)
    svg = section[section.index("<svg"):section.index("</svg>") + 6]
    assert ET.fromstring(svg).findall("{http://www.w3.org/2000/svg}polyline")
    page = report.inject("<html><body class='l'>x</body></html>", out)
    # The banner above Locust's own tables, gs-load's section after them.
    assert page.index("gs-load-verdict") < page.index(">x<") < page.index("id=\"gs-load\"")


def test_tallies_travel_as_plain_data_and_add_up() -> None:
    one = _outcome().tally
    back = Tally.from_wire(one.to_wire())
    assert back.to_wire() == one.to_wire()
    total = Tally().merge(one).merge(back)
    assert total.exchanges["POST step"] == 8 and total.violations["STEP-COUNT-1"] == 4


def test_job_budget_caps_jobs_against_a_url() -> None:
    assert [job_budget(None, 50, True), job_budget(None, 50, False), job_budget(4, 50, False),
            job_budget(4, 2, True), job_budget(0, 5, True)] == [50, 1, 4, 2, 0]


def test_the_default_profile_loads_and_bad_ones_say_why(tmp_path: Path) -> None:
    profile = load_profile()
    assert profile.rl.weight and profile.sampler.max_events == 2
    with pytest.raises(ProfileError, match="retries_typo"):
        profile_from({"client": {"retries_typo": 3}})
    with pytest.raises(ProfileError, match="every user weight is 0"):
        profile_from({"rl": {"weight": 0}, "sft": {"weight": 0}, "sampler": {"weight": 0}})
    bad = tmp_path / "p.toml"
    bad.write_text("[rl]\nthink_s = [2, 1]\n")
    with pytest.raises(ProfileError, match="think_s"):
        load_profile(bad)


def test_the_docs_list_every_option() -> None:
    assert markdown_table() in DOCS.read_text(encoding="utf-8")
