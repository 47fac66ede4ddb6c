"""Hardening of the fake that needs no subprocess: result expiry and its 410, the
job state checked again once a body has arrived, bounds on sampling inputs."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import pytest
from fake_gs_api import batch, eventually

from contract import wire
from contract.limits import SAMPLING_BOUNDS


def test_a_result_read_to_the_end_is_freed_after_its_grace(make_api) -> None:
    api = make_api(result_grace_s=0.0)
    job = api.running_job()
    rid = api.submit_frame(job, "forward-no-grad", batch(2, 8))
    assert api.wait(job, rid)["status"] == "done"
    api.wait(job, api.submit_json(job, "step"))  # any later read or result sweeps the job's read results
    r = api.get(f"/{job}/requests/{rid}")
    assert r.status_code == 410 and r.json()["code"] == "result_expired", r.text
    assert api.state()["internal_errors"] == 0


def test_a_retried_last_page_within_the_grace_is_served_again(make_api) -> None:
    api = make_api(result_delivery="chunks", result_chunk_bytes=4096)
    job = api.running_job()
    rid = api.submit_frame(job, "forward-no-grad", batch(2, 600))
    first = api.wait(job, rid)
    again = api.wait(job, rid)  # the whole result again, every page, within the grace
    assert again["events"] == first["events"] and len(first["events"]) > 1


def test_only_the_newest_read_results_are_kept(make_api) -> None:
    api = make_api(results_read_kept=2)
    job = api.running_job()
    rids = [api.submit_frame(job, "forward-no-grad", batch(2, 8)) for _ in range(4)]
    for rid in rids:
        api.wait(job, rid)
    codes = [api.get(f"/{job}/requests/{rid}").status_code for rid in rids]
    assert codes == [410, 410, 200, 200], codes


def test_unread_results_over_the_cap_are_freed_oldest_first(make_api) -> None:
    """Each result here is ~10 KB of JSON; a 24 KB cap keeps the two newest unread."""
    api = make_api(max_results_bytes=24 * 1024, result_delivery="inline")
    job = api.running_job()
    rids = [api.submit_frame(job, "forward-no-grad", batch(4, 500)) for _ in range(4)]
    api.wait(job, api.submit_json(job, "step"))  # the serial executor ran all four before it
    statuses = [api.get(f"/{job}/requests/{rid}").status_code for rid in rids]
    assert statuses == [410, 410, 200, 200], statuses
    assert api.get(f"/{job}/requests/{rids[0]}").json()["code"] == "result_expired"


def _send_head(base_url: str, path: str, length: int, ctype: str) -> socket.socket:
    host, port = base_url.split("//", 1)[1].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {ctype}\r\n"
                 f"Content-Length: {length}\r\n\r\n".encode())
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    sock.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"}"):
        got = sock.recv(65536)
        if not got:
            break
        data += got
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), json.loads(body)


@pytest.mark.parametrize("route", ["step", "save", "forward-backward"])
def test_a_call_whose_body_arrives_after_a_cancel_leaves_nothing(make_api, route: str) -> None:
    """The handler checks the job before the body arrives; the job is cancelled meanwhile:
    the call answers 409 job_not_running and no request record or queue is left."""
    api = make_api()
    job = api.running_job()
    if route == "forward-backward":
        body = wire.encode_byte_chunks(wire.dumps(batch()), "request", max_bytes=0, force_chunk=True)[0]
        ctype = "application/octet-stream"
    else:
        body, ctype = b'{}', "application/json"
    before = api.state()["requests"]["total"]
    path = api.prefix.split(api.base_url, 1)[1] + f"/{job}/{route}"
    sock = _send_head(api.base_url, path, len(body), ctype)
    # Its head is read: the handler checks the job and waits for the body before the event
    # loop can take the cancel below.
    assert api.server is not None and eventually(lambda: path in api.server.exchanges_in_progress())
    assert api.post(f"/{job}:cancel").status_code == 200
    sock.sendall(body)
    status, answer = _answer(sock)
    sock.close()
    assert status == 409 and answer["code"] == "job_not_running", answer
    state = api.state()
    assert state["requests"]["total"] == before and state["requests"]["in_flight"] == 0
    assert state["internal_errors"] == 0


@pytest.mark.parametrize(("body", "name"), [
    ({"prompts": ["a"], "top_k": 1_000_000}, "top_k"),
    ({"prompts": ["a"] * 5000}, "prompts"),
])
def test_log_probs_bounds_are_named(make_api, body: dict[str, Any], name: str) -> None:
    api = make_api()
    job = api.running_job()
    r = api.post(f"/{job}/log-probs", json=body)
    assert r.status_code == 400 and r.json()["code"] == "limit_exceeded", r.text
    assert name in r.json()["message"] and str(SAMPLING_BOUNDS[name]) in r.json()["message"]


def test_log_probs_top_k_work_is_bounded_by_prompt_bytes(make_api) -> None:
    """One long text prompt with the largest top_k asks for more top entries than allowed;
    the same prompt without top_k, or a short one with it, is accepted."""
    api = make_api()
    job = api.running_job()
    top_k = SAMPLING_BOUNDS["top_k"]
    long_text = "x" * (SAMPLING_BOUNDS["top_k_entries"] // top_k + 1)
    r = api.post(f"/{job}/log-probs", json={"prompts": [long_text], "top_k": top_k})
    assert r.status_code == 400 and r.json()["code"] == "limit_exceeded", r.text
    assert "top_k_entries" in r.json()["message"]
    for body in ({"prompts": [long_text[:1000]]}, {"prompts": ["a b c"], "top_k": top_k}):
        assert api.post(f"/{job}/log-probs", json=body).status_code == 200


@pytest.mark.parametrize(("params", "name"), [
    ({"max_tokens": 10**9}, "max_tokens"), ({"n": 10_000}, "n"), ({"logprobs": 100_000}, "top_k"),
    ([{"max_tokens": SAMPLING_BOUNDS["max_tokens"], "n": SAMPLING_BOUNDS["n"]}] * 9, "generated_tokens"),
])
def test_generate_bounds_are_named(make_api, params: Any, name: str) -> None:
    api = make_api()
    job = api.running_job()
    prompts = ["a"] * (len(params) if isinstance(params, list) else 1)
    r = api.post(f"/{job}/generate", data=wire.dumps({"prompts": prompts, "sampling_params": params}),
                 headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 400 and r.json()["code"] == "limit_exceeded", r.text
    assert str(SAMPLING_BOUNDS[name]) in r.json()["message"]


@pytest.mark.parametrize("cid", [".", "..", "a/b", "a\nb", "nul\x00", "tab\t", "\ud800", "x" * 300])
def test_checkpoint_ids_a_path_cannot_carry_are_refused_at_save(make_api, cid: str) -> None:
    api = make_api()
    job = api.running_job()
    body = json.dumps({"checkpoint_id": cid}).encode()  # ensure_ascii: a lone surrogate travels as \\ud800
    r = api.post(f"/{job}/save", data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "invalid_id", r.text
    assert r.json()["detail"][0]["loc"] == ["checkpoint_id"]
    assert api.get(f"/{job}/checkpoints").json()["checkpoints"] == []


def test_a_control_character_in_a_path_cannot_forge_a_log_line(make_api) -> None:
    import logging

    class Keep(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.INFO)
            self.lines: list[str] = []
            self.written = threading.Event()

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())
            self.written.set()

    api = make_api()
    logger, keep = logging.getLogger("fake_gs.access"), Keep()
    level, disabled = logger.level, logger.disabled
    logger.addHandler(keep)  # on the logger itself: a logging config of another test may
    logger.setLevel(logging.INFO)  # have stopped propagation or disabled existing loggers
    logger.disabled = False
    try:
        api.get("/x%0AFAKE%20200%20forged/requests/y")
        keep.written.wait(10)  # the line is written just after the answer is sent
    finally:
        logger.removeHandler(keep)
        logger.setLevel(level)
        logger.disabled = disabled
    assert keep.lines and all("\n" not in line for line in keep.lines)
    assert any("\\x0aFAKE" in line for line in keep.lines), keep.lines


def test_hardening_options_parse_and_validate() -> None:
    from fake_gs import FakeSettings
    from fake_gs.cli import build_parser, settings_from_args

    args = build_parser().parse_args(["--body-idle-s", "2.5", "--max-inflight-mib", "8", "--max-results-mib", "16",
                                      "--max-open-groups-per-account", "5", "--max-account-buffered-mib", "32",
                                      "--token", "A", "--admin-token", "Z"])
    s = settings_from_args(args)
    assert (s.body_idle_s, s.max_inflight_bytes, s.max_results_bytes) == (2.5, 8 * 2**20, 16 * 2**20)
    assert (s.max_open_groups_per_account, s.max_buffered_bytes_per_account) == (5, 32 * 2**20)
    assert s.admin_token == "Z" and s.tokens == ("A",)
    for bad in ({"body_idle_s": -1.0}, {"max_inflight_bytes": 0}, {"max_results_bytes": 0},
                {"results_read_kept": 0}, {"admin_token": ""}, {"tokens": ("A",), "admin_token": "A"}):
        with pytest.raises(ValueError):
            FakeSettings(**bad)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--max-inflight-mib", "0"])
