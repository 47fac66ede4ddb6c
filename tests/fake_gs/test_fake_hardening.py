"""Hardening of the fake (issue 12) that needs no subprocess: result expiry and its 410."""

from __future__ import annotations

from fake_gs_api import batch


def test_a_result_read_to_the_end_is_freed_after_its_grace(make_api) -> None:  # type: ignore[no-untyped-def]
    api = make_api(result_grace_s=0.0)
    job = api.running_job()
    rid = api.submit_frame(job, "forward-no-grad", batch(2, 8))
    assert api.wait(job, rid)["status"] == "done"
    api.submit_json(job, "step")  # any later read or result sweeps the job's read results
    r = api.get(f"/{job}/requests/{rid}")
    assert r.status_code == 410 and r.json()["code"] == "result_expired", r.text
    assert api.state()["internal_errors"] == 0


def test_a_retried_last_page_within_the_grace_is_served_again(make_api) -> None:  # type: ignore[no-untyped-def]
    api = make_api(result_delivery="chunks", result_chunk_bytes=4096)
    job = api.running_job()
    rid = api.submit_frame(job, "forward-no-grad", batch(2, 600))
    first = api.wait(job, rid)
    again = api.wait(job, rid)  # the whole result again, every page, within the grace
    assert again["events"] == first["events"] and len(first["events"]) > 1


def test_only_the_newest_read_results_are_kept(make_api) -> None:  # type: ignore[no-untyped-def]
    api = make_api(results_read_kept=2)
    job = api.running_job()
    rids = [api.submit_frame(job, "forward-no-grad", batch(2, 8)) for _ in range(4)]
    for rid in rids:
        api.wait(job, rid)
    codes = [api.get(f"/{job}/requests/{rid}").status_code for rid in rids]
    assert codes == [410, 410, 200, 200], codes


def test_unread_results_over_the_cap_are_freed_oldest_first(make_api) -> None:  # type: ignore[no-untyped-def]
    """Each result here is ~10 KB of JSON; a 24 KB cap keeps the two newest unread."""
    api = make_api(max_results_bytes=24 * 1024, result_delivery="inline")
    job = api.running_job()
    rids = [api.submit_frame(job, "forward-no-grad", batch(4, 500)) for _ in range(4)]
    api.wait(job, api.submit_json(job, "step"))  # the serial executor ran all four before it
    statuses = [api.get(f"/{job}/requests/{rid}").status_code for rid in rids]
    assert statuses == [410, 410, 200, 200], statuses
    assert api.get(f"/{job}/requests/{rids[0]}").json()["code"] == "result_expired"
