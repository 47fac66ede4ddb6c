"""Polling: status objects, delivery forms, cursors, max_events, latency, dialects, order."""

from __future__ import annotations

import base64
import uuid

from fake_gs_api import Api, batch, decode_result, eventually

from contract import wire
from contract.limits import MAX_EVENTS_CAP
from fake_gs.clock import ManualClock

FIELDS = {"request_id", "status", "created_at", "updated_at", "result", "error", "events", "next_cursor"}


def test_status_object_has_every_field(api: Api, running: str) -> None:
    rid = api.submit_json(running, "step")
    ans = api.wait(running, rid)
    assert set(ans) == FIELDS and ans["request_id"] == rid and ans["status"] == "done"
    assert ans["created_at"].endswith("Z") and ans["updated_at"] >= ans["created_at"]
    assert ans["result"]["global_steps"] >= 1 and ans["error"] is None and ans["events"] == []
    # instant latency: terminal on the first poll.
    rid = api.submit_json(running, "save", {})
    assert api.poll(running, rid)["status"] == "done"


def test_unknown_request_is_404(api: Api, running: str) -> None:
    r = api.get(f"/{running}/requests/{uuid.uuid4()}")
    assert r.status_code == 404 and r.json()["code"] == "request_not_found"
    other = api.running_job()
    rid = api.submit_json(other, "step")
    r = api.get(f"/{running}/requests/{rid}")  # a request of another job
    assert r.status_code == 404 and r.json()["code"] == "request_not_found"


def test_inline_and_chunked_delivery_agree(make_api) -> None:
    results = []
    for mode in ("inline", "chunks"):
        api = make_api(result_delivery=mode, result_chunk_bytes=9000, seed=4)
        job_id = api.running_job()
        rid = api.submit_frame(job_id, "forward-no-grad", batch(4, 500))
        first = api.poll(job_id, rid)
        if mode == "inline":
            assert wire.is_inline_frame(first["result"]) and first["events"] == []
        else:
            assert first["result"] is None and first["events"][0]["type"] == "result_chunk"
        results.append(api.result(job_id, rid)["model_outputs"]["logprobs"].tolist())
    assert results[0] == results[1]


def test_auto_delivery_by_size(make_api) -> None:
    api = make_api(result_chunk_bytes=20_000)
    job_id = api.running_job()
    small = api.poll(job_id, api.submit_frame(job_id, "forward-no-grad", batch(1, 4)))
    assert wire.is_inline_frame(small["result"])
    big = api.poll(job_id, api.submit_frame(job_id, "forward-no-grad", batch(8, 1000)))
    assert big["result"] is None and big["events"]
    plain = api.poll(job_id, api.submit_json(job_id, "step"))
    assert isinstance(plain["result"], dict) and "global_steps" in plain["result"]


def test_cursor_pages_are_stable_and_max_events(make_api) -> None:
    api = make_api(result_delivery="chunks", result_chunk_bytes=8200 + 1000)
    job_id = api.running_job()
    rid = api.submit_frame(job_id, "forward-no-grad", batch(8, 3000))
    first = api.poll(job_id, rid)
    assert len(first["events"]) == 16  # default max_events
    again = api.poll(job_id, rid)
    assert again["events"] == first["events"] and again["next_cursor"] == first["next_cursor"]
    cursor = first["next_cursor"]
    p1 = api.poll(job_id, rid, cursor=cursor, max_events=3)
    p1b = api.poll(job_id, rid, cursor=cursor, max_events=3)
    assert p1 == p1b and len(p1["events"]) == 3
    everything = api.poll(job_id, rid, max_events=100_000)
    total = len(everything["events"]) + (0 if everything["next_cursor"] is None else 1)
    assert len(everything["events"]) <= MAX_EVENTS_CAP and total > 16
    assert everything["next_cursor"] is None or len(everything["events"]) == MAX_EVENTS_CAP
    pages, cur = [], None
    while True:
        page = api.poll(job_id, rid, **({"cursor": cur} if cur else {}), max_events=7)
        pages.extend(page["events"])
        cur = page["next_cursor"]
        if not cur:
            break
    frame = wire.decode_result_chunk_events(pages)
    assert tuple(wire.loads(frame)["model_outputs"]["logprobs"].shape) == (8, 3000)
    for bad in ("0", "-3", "many", "1.5"):
        r = api.get(f"/{job_id}/requests/{rid}", params={"max_events": bad})
        assert r.status_code == 400 and r.json()["code"] == "invalid_argument", bad
    r = api.get(f"/{job_id}/requests/{rid}", params={"cursor": "garbage!"})
    assert r.status_code == 400
    other = api.submit_json(job_id, "step")
    r = api.get(f"/{job_id}/requests/{other}", params={"cursor": cursor})
    assert r.status_code == 400  # a cursor belongs to its request


def test_many_result_chunks_are_capped_at_512(make_api) -> None:
    api = make_api(result_delivery="chunks", result_chunk_bytes=8192 + 512)
    job_id = api.running_job()
    rid = api.submit_frame(job_id, "forward-no-grad", batch(2, 40_000))
    api.wait(job_id, rid)
    page = api.poll(job_id, rid, max_events=1000)
    assert len(page["events"]) == MAX_EVENTS_CAP and page["next_cursor"]


def test_result_chunks_smaller_than_the_header_allowance(make_api) -> None:
    """--result-chunk-bytes takes any size that holds a chunk header plus a payload byte
   : 4096-byte result chunks reassemble to the frame."""
    api = make_api(result_delivery="chunks", result_chunk_bytes=4096)
    job_id = api.running_job()
    rid = api.submit_frame(job_id, "forward-no-grad", batch(2, 3_000))
    events = api.wait(job_id, rid)["events"]
    assert len(events) > 1
    assert all(len(base64.b64decode(e["payload_b64"])) <= 4096 for e in events)
    assert wire.loads(wire.decode_result_chunk_events(events))


def test_latency_polls(make_api) -> None:
    api = make_api(latency="polls:3")
    job_id = api.running_job()
    rid = api.submit_json(job_id, "step")
    statuses = [api.poll(job_id, rid)["status"] for _ in range(4)]
    assert statuses[:2] in (["pending", "running"], ["running", "running"], ["pending", "pending"])
    assert statuses[2:] == ["done", "done"]


def test_latency_seconds(make_api) -> None:
    clock = ManualClock()
    api = make_api(latency="seconds:0.3", clock=clock)
    job_id = api.running_job()
    rid = api.submit_json(job_id, "step")
    assert api.poll(job_id, rid)["status"] in ("pending", "running")
    clock.advance(0.25)
    # Executed (the job's executor may not have reached it yet under load), its latency not
    # yet over: running, and never done before the injected clock says so.
    assert eventually(lambda: api.poll(job_id, rid)["status"] != "pending")
    assert api.poll(job_id, rid)["status"] == "running"
    clock.advance(0.1)
    assert api.poll(job_id, rid)["status"] == "done"


def test_enum_request_statuses(make_api) -> None:
    api = make_api(status_style="enum", latency="polls:2")
    job_id = api.running_job()
    rid = api.submit_json(job_id, "step")
    assert api.poll(job_id, rid)["status"] in ("REQUEST_STATE_PENDING", "REQUEST_STATE_RUNNING")
    assert api.poll(job_id, rid)["status"] == "REQUEST_STATE_DONE"


def test_requests_run_in_submit_order(api: Api, running: str) -> None:
    rids = [api.submit_json(running, "step") for _ in range(5)]
    save = api.submit_json(running, "save", {"checkpoint_id": "after-five"})
    steps = [api.result(running, rid)["global_steps"] for rid in rids]
    assert steps == sorted(steps) and steps[-1] - steps[0] == 4
    assert api.result(running, save)["global_steps"] == steps[-1]


def test_failed_request_carries_an_error(api: Api, running: str) -> None:
    # The checkpoint disappears between submit and execution: the request fails, cleanly.
    api.result(running, api.submit_json(running, "save", {"checkpoint_id": "gone"}))
    slow = Api(api.base_url)
    rid = slow.submit_json(running, "load", {"checkpoint_id": "gone"})
    api.call("DELETE", f"/{running}/checkpoints/gone")
    ans = api.wait(running, rid)
    if ans["status"] == "failed":
        assert ans["error"]["code"] and ans["error"]["message"]
    else:
        assert ans["status"] == "done"


def test_polls_need_a_running_job(api: Api) -> None:
    job_id = api.running_job()
    rid = api.submit_json(job_id, "step")
    api.wait(job_id, rid)
    api.post(f"/{job_id}:cancel")
    r = api.get(f"/{job_id}/requests/{rid}")
    assert r.status_code == 409 and r.json()["code"] == "job_not_running"


def test_empty_result_is_an_object(api: Api, running: str) -> None:
    ans = api.wait(running, api.submit_json(running, "step"))
    assert decode_result(ans) == ans["result"]
