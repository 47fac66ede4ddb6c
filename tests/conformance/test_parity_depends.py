"""What a replay may not judge after a difference the spec allows: a result's pages cut
elsewhere (spec §6.8), a call answered inline instead of by a request to poll (spec §7), and
a checkpoint name the recorded server gave again after a delete (spec §6.3)."""

from __future__ import annotations

from typing import Any

from conformance.parity.depends import Dependencies, polled_request
from conformance.parity.resend import learn

POLL = "/api/v2/databases/D/schemas/S/cortex-training/job-0001/requests/req-0001"


def _ex(seq: int, path: str, body: Any, method: str = "GET") -> dict[str, Any]:
    route = "get_request" if method == "GET" and "/requests/" in path else "operation"
    return {"seq": seq, "request": {"method": method, "path": path, "route": route},
            "response": {"status": 200, "body": {"json": body}}}


def _new(body: Any) -> dict[str, Any]:
    return {"status": 200, "body": {"json": body}}


def test_a_chain_the_new_server_ended_sooner_blocks_the_recorded_polls() -> None:
    deps, ids = Dependencies(), {"req-0001": "req-new-1"}
    first = _ex(1, POLL, {"events": [1], "next_cursor": "cursor-0002"})
    deps.block_ended_chain(first, _new({"events": [1, 2], "next_cursor": ""}), ids)
    later = _ex(2, POLL + "?cursor=cursor-0002", {"events": [2], "next_cursor": ""})
    later["request"]["query"] = [["cursor", "cursor-0002"]]
    hit = deps.blocker(later, ids)
    assert hit is not None and hit[0] == 1 and hit[2] == "form"


def test_a_chain_the_recording_ended_sooner_blocks_its_later_polls_of_that_request() -> None:
    deps, ids = Dependencies(), {"req-0001": "req-new-1"}
    deps.block_ended_chain(_ex(1, POLL, {"events": [1, 2], "next_cursor": None}),
                           _new({"events": [1], "next_cursor": "cursor-new"}), ids)
    hit = deps.blocker(_ex(2, POLL, None), ids)
    assert hit is not None and hit[2] == "form"


def test_pages_cut_alike_block_nothing() -> None:
    deps, ids = Dependencies(), dict[str, str]()
    for recorded, new in (("c-000001", "c-000001"), ("", None), ("c-000001", "c-999999")):
        deps.block_ended_chain(_ex(1, POLL, {"next_cursor": recorded}), _new({"next_cursor": new}), ids)
    assert deps.blocker(_ex(2, POLL + "?cursor=c-000001", None), ids) is None
    assert not deps.blocked and not deps.ended


def test_an_inline_answer_blocks_the_recorded_polls_of_its_request() -> None:
    deps, ids = Dependencies(), dict[str, str]()
    op = _ex(1, "/p/job-0001/operation", {"request_id": "req-0001", "job_id": "job-0001"}, "POST")
    deps.block_ended_chain(op, _new({"bootstrapped": True}), ids)
    hit = deps.blocker(_ex(2, POLL, None), ids)
    assert hit is not None and "inline" in hit[1] and hit[2] == "form"
    assert polled_request(_ex(2, POLL + "?max_events=4", None)["request"]) == "req-0001"
    assert polled_request(_ex(2, POLL, None, "POST")["request"]) is None


def test_a_checkpoint_name_given_again_maps_to_its_latest_save() -> None:
    """First mappings hold for other ids and inside lists; a save result's checkpoint id
    outside a list says what the name stands for now."""
    ids: dict[str, str] = {}
    learn({"result": {"checkpoint_id": "ckpt-step30-2"}}, {"result": {"checkpoint_id": "ckpt-step30"}}, ids)
    learn({"checkpoints": [{"checkpoint_id": "ckpt-step30-2"}]}, {"checkpoints": [{"checkpoint_id": "other-1"}]}, ids)
    assert ids == {"ckpt-step30-2": "ckpt-step30"}
    learn({"result": {"checkpoint_id": "ckpt-step30-2"}}, {"result": {"checkpoint_id": "sm-b62cb3ff"}}, ids)
    assert ids == {"ckpt-step30-2": "sm-b62cb3ff"}
    learn({"result": {"checkpoint_id": "ckpt-step30-2"}}, {"result": {"checkpoint_id": "ckpt-step30-2"}}, ids)
    assert ids == {}
    learn({"job_id": "job-0001"}, {"job_id": "job-new-1"}, ids)
    learn({"job_id": "job-0001"}, {"job_id": "job-new-2"}, ids)
    assert ids == {"job-0001": "job-new-1"}
