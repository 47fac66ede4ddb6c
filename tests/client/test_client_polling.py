"""Polling: back-off, cursor draining without back-off, sha checks, decoding, typed ends."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

import pytest
import torch
from virtual_clock import Clock

from client import errors
from client.calls.polling import iter_stream_events, wait_job_running, wait_request
from contract import wire
from contract.limits import PollPolicy

POLICY = PollPolicy(first_s=0.5, factor=2.0, cap_s=4.0, timeout_s=100.0)


class Pages:
    """Answers poll pages from a list; records the cursors asked for."""

    def __init__(self, *pages: Mapping[str, Any]) -> None:
        self.pages = list(pages)
        self.cursors: list[str | None] = []

    def __call__(self, cursor: str | None, deadline: float) -> Mapping[str, Any]:
        self.cursors.append(cursor)
        return self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]


def _wait(pages: Pages, clock: Clock, policy: PollPolicy = POLICY) -> Any:
    return wait_request(pages, route="step", job_id="j", request_id="r", policy=policy,
                        sleep=clock.sleep, clock=clock)


def test_backs_off_until_done_and_returns_json() -> None:
    clock = Clock()
    pages = Pages({"status": "pending"}, {"status": "running"}, {"status": "running"},
                  {"status": "REQUEST_STATE_DONE", "result": {"global_steps": 1}})
    assert _wait(pages, clock) == {"global_steps": 1}
    assert clock.sleeps == [0.5, 1.0, 2.0]


@pytest.mark.parametrize("status", ["done", "completed", "succeeded", "REQUEST_STATE_DONE"])
def test_done_without_result_is_empty(status: str) -> None:
    assert _wait(Pages({"status": status}), Clock()) == {}


def test_inline_frame_is_decoded() -> None:
    frame = wire.dumps({"model_outputs": {"logprobs": torch.full((2, 3), -1.0)}})
    out = _wait(Pages({"status": "done", "result": wire.inline_frame(frame)}), Clock())
    assert torch.equal(out["model_outputs"]["logprobs"], torch.full((2, 3), -1.0))


def test_result_chunks_are_drained_by_cursor_without_backoff() -> None:
    frame = wire.dumps({"results": [{"token_ids": torch.arange(3000)}]})
    events = wire.result_chunk_events(frame, max_bytes=9000)
    assert len(events) > 3
    pages = [{"status": "done", "events": events[i:i + 2],
              "next_cursor": str(i + 2) if i + 2 < len(events) else None}
             for i in range(0, len(events), 2)]
    clock = Clock()
    poller = Pages({"status": "running"}, *pages)
    out = _wait(poller, clock)
    assert torch.equal(out["results"][0]["token_ids"], torch.arange(3000))
    assert clock.sleeps == [0.5]  # only the in-flight poll backed off
    assert poller.cursors == [None, None] + [str(i) for i in range(2, len(events), 2)]


def test_result_chunk_sha_mismatch_is_a_protocol_error() -> None:
    raw = b"not really a chunk"
    event = {"type": "result_chunk", "payload_b64": base64.b64encode(raw).decode(),
             "payload_sha256": hashlib.sha256(b"other").hexdigest()}
    with pytest.raises(errors.ProtocolError, match="sha256 mismatch.*request_id=r"):
        _wait(Pages({"status": "done", "events": [event]}), Clock())


def test_undecodable_result_is_a_protocol_error() -> None:
    bad = wire.inline_frame(b"PK\x03\x04garbage")
    with pytest.raises(errors.ProtocolError, match="cannot decode"):
        _wait(Pages({"status": "done", "result": bad}), Clock())


def test_failed_request_carries_the_server_error() -> None:
    page = {"status": "failed", "error": {"code": "internal", "message": "boom"}}
    with pytest.raises(errors.RequestFailed, match="internal: boom") as info:
        _wait(Pages(page), Clock())
    assert info.value.code == "internal"
    assert (info.value.route, info.value.request_id, info.value.job_id) == ("step", "r", "j")


@pytest.mark.parametrize("status", ["cancelled", "canceled", "REQUEST_STATE_CANCELLED"])
def test_cancelled_request(status: str) -> None:
    with pytest.raises(errors.RequestCancelled):
        _wait(Pages({"status": status}), Clock())


def test_unknown_status_is_a_protocol_error() -> None:
    with pytest.raises(errors.ProtocolError, match="unknown request status"):
        _wait(Pages({"status": "exploded"}), Clock())


def test_poll_timeout() -> None:
    clock = Clock()
    with pytest.raises(errors.PollTimeout, match="still running after 10 s"):
        _wait(Pages({"status": "running"}), clock, PollPolicy(0.5, 2.0, 4.0, 10.0))
    assert clock.now <= 10.0
    assert max(clock.sleeps) == 4.0


def test_stream_events_until_done() -> None:
    clock = Clock()
    pages = Pages({"status": "streaming", "events": [{"type": "result", "index": 0, "result": {}}]},
                  {"status": "streaming", "events": []},
                  {"status": "done", "events": [{"type": "error", "index": 1, "error": "x"},
                                                {"type": "done", "completed": 1, "failed": 1}]})
    events = list(iter_stream_events(pages, route="generate_stream", job_id="j", request_id="r",
                                     policy=POLICY, sleep=clock.sleep, clock=clock))
    assert [e["type"] for e in events] == ["result", "error", "done"]
    assert clock.sleeps == [0.5]


def test_wait_job_running_and_job_failed() -> None:
    clock = Clock()
    jobs = iter([{"status": "pending"}, {"status": "JOB_STATE_PLACING"}, {"status": "running"}])
    assert wait_job_running(lambda d: next(jobs), job_id="j", policy=POLICY, sleep=clock.sleep,
                            clock=clock)["status"] == "running"
    with pytest.raises(errors.JobFailed, match="failed before running: no GPUs") as info:
        wait_job_running(lambda d: {"status": "failed", "reason": "no GPUs"}, job_id="j",
                         policy=POLICY, sleep=clock.sleep, clock=clock)
    assert info.value.reason == "no GPUs" and info.value.state == "failed"
    with pytest.raises(errors.PollTimeout, match="job still pending"):
        wait_job_running(lambda d: {"status": "pending"}, job_id="j",
                         policy=PollPolicy(1, 1, 1, 3), sleep=clock.sleep, clock=clock)


def test_deadline_inside_a_poll_call_is_the_polled_routes_timeout() -> None:
    """The poll deadline can run out while a poll is being sent: that is still a
    PollTimeout of the polled route (step), never a bare deadline of get_request."""

    def fetch(cursor: str | None, deadline: float) -> Mapping[str, Any]:
        raise errors.DeadlineExceeded("deadline passed before get_request could be sent", route="get_request")

    with pytest.raises(errors.PollTimeout, match="route=step"):
        wait_request(fetch, route="step", job_id="j", request_id="r", policy=PollPolicy())
    with pytest.raises(errors.PollTimeout, match="job still pending"):
        wait_job_running(lambda deadline: fetch(None, deadline), job_id="j", policy=PollPolicy())
