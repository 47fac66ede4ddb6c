"""The passive judge on hand-made exchanges: each rule red on the side that broke it, green
only when judged, and the relay's body observer keeping a chunk's header from any split."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from requests.structures import CaseInsensitiveDict

from conformance.judge.exchange import Exchange
from conformance.judge.passive import PassiveJudge
from conformance.judge.report import run_results
from conformance.judge.tape import restored
from conformance.proxy.observed import Observed
from contract.auth import auth_headers
from contract.errors import REQUEST_ID_HEADER
from contract.routes import prefix, route_of
from contract.wire import dumps, encode_byte_chunks, read_chunk_head

BASE = "http://proxy" + prefix("DB", "PUBLIC")
JOB = "job-1"


def ex(method: str, path: str, status: int | None, answer: Any = None, *, body: Any = None,
       headers: dict[str, str] | None = None, answer_headers: dict[str, str] | None = None) -> Exchange:
    url = BASE + path
    raw = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    sent = CaseInsensitiveDict({**auth_headers("t"), **({"Content-Type": "application/json"} if raw else {}),
                                **(headers or {})})
    got = CaseInsensitiveDict({REQUEST_ID_HEADER: "r", **(answer_headers or {})})
    return Exchange(route_of(method, url), method, url, 0.0, len(raw or b""), request_body=raw, status=status,
                    headers=got, body=json.dumps(answer).encode() if answer is not None else b"",
                    request_headers=sent, body_sha256="s" if raw else "", query=dict(parse_qsl(urlsplit(url).query)))


def verdicts(*exchanges: Exchange) -> dict[str, Any]:
    judge = PassiveJudge()
    for one in exchanges:
        judge.observe(one)
    return judge.findings()


def test_nothing_seen_is_never_green() -> None:
    found = verdicts()
    assert {v.status for v in found.values()} == {"not seen"}
    res = run_results(found, profile="current", target="t", url=True)
    assert not res.by_status("green") and not res.by_status("red")


def test_a_missing_token_type_header_is_the_clients() -> None:
    bare = ex("GET", f"/{JOB}", 401, {"code": "unauthenticated", "message": "no"},
              headers={"X-Snowflake-Authorization-Token-Type": ""})
    found = verdicts(bare)
    assert found["AUTH-HEADERS-1"].status == "red" and found["AUTH-HEADERS-1"].sides == ("client",)
    assert found["ERR-ENVELOPE-1"].status == "green"


def test_a_silent_resend_is_the_clients_and_a_keyed_one_is_not() -> None:
    step = f"/{JOB}/step"
    failed = ex("POST", step, 500, {"code": "internal", "message": "x"}, body={})
    again = ex("POST", step, 200, {"request_id": "q1", "job_id": JOB}, body={})
    assert verdicts(failed, again)["CLIENT-ONCE-1"].sides == ("client",)
    keyed = [ex("POST", step, None, body={}, headers={"Idempotency-Key": "k"}),
             ex("POST", step, 200, {"request_id": "q1", "job_id": JOB}, body={}, headers={"Idempotency-Key": "k"})]
    assert verdicts(*keyed)["CLIENT-ONCE-1"].status == "green"


def test_job_states_never_go_back_and_terminal_requests_never_change() -> None:
    def job(status: str) -> Exchange:
        return ex("GET", f"/{JOB}", 200, {"job_id": JOB, "status": status})

    def poll(status: str) -> Exchange:
        return ex("GET", f"/{JOB}/requests/q1", 200, {"request_id": "q1", "status": status, "created_at": "a",
                                                      "updated_at": "b", "result": None, "error": None,
                                                      "events": [], "next_cursor": None})

    found = verdicts(job("running"), job("placing"), poll("done"), poll("running"))
    assert found["JOB-STATE-1"].status == "red" and found["JOB-STATE-1"].sides == ("server",)
    assert found["POLL-TERMINAL-1"].status == "red"


def test_an_answer_without_the_request_id_header_is_the_servers() -> None:
    found = verdicts(ex("GET", "/capacity", 200, {"has_reservation": False}, answer_headers={REQUEST_ID_HEADER: ""}))
    assert found["ADDR-REQID-1"].status == "green"  # present (empty): the header is there
    bare = ex("GET", "/capacity", 200, {"has_reservation": False})
    bare.headers = CaseInsensitiveDict({})
    assert verdicts(bare)["ADDR-REQID-1"].sides == ("server",)


@pytest.mark.parametrize("piece", [1, 7, 4096, 1 << 20])
def test_the_relay_keeps_a_chunks_header_from_any_split(piece: int) -> None:
    import torch

    frame = dumps({"x": torch.zeros(20_000)})
    chunk = encode_byte_chunks(frame, "request", max_bytes=32_768, chunk_group_id="g")[0]
    seen = Observed(0)
    for at in range(0, len(chunk), piece):
        seen.feed(chunk[at:at + piece])
    head = read_chunk_head(bytes(seen.kept))
    assert head is not None and head.desc["chunk_group_id"] == "g"
    assert len(seen.kept) < 4096 and seen.size == len(chunk)


def test_a_tapes_outlined_answer_is_restored_to_its_types() -> None:
    outlined = {"events": [{"payload_b64": {"$b64": 9000}}], "ids": {"$list": 100, "head": [1, 2], "tail": [9]}}
    assert restored(outlined) == {"events": [{"payload_b64": ""}], "ids": [1, 2, 9]}


def _observed_group(judge: PassiveJudge, chunks: list[bytes], status: int, piece: int = 1000) -> None:
    """A forward-backward group as gs-proxy sees it: each chunk fed to the relay's observer in
    pieces, its group's frame hash asked of the judge, then the exchange judged."""
    from functools import partial

    octet = {"Content-Type": "application/octet-stream"}
    for i, chunk in enumerate(chunks):
        final = i == len(chunks) - 1
        answer = {"request_id": "r-1", "job_id": JOB} if final else {"status": "accepted"}
        one = ex("POST", f"/{JOB}/forward-backward", status if final else 200, answer, body=chunk, headers=octet)
        seen = Observed(0, group_hash=partial(judge.requests.group_hash, one))
        for at in range(0, len(chunk), piece):
            seen.feed(chunk[at:at + piece])
        one.request_body, one.frame_hash = bytes(seen.kept), seen.frame_hash
        judge.observe(one)


def _group(frame_bytes: int = 20_000) -> list[bytes]:
    import torch

    return encode_byte_chunks(dumps({"x": torch.ones(frame_bytes // 4)}), "request", max_bytes=8192,
                              chunk_group_id="g")


@pytest.mark.parametrize(("corrupt", "status", "sides"), [
    (False, 200, None), (True, 409, ("client",)), (True, 200, ("client", "server"))])
def test_a_groups_chunks_must_reassemble_to_the_frame_they_name(corrupt: bool, status: int,
                                                               sides: tuple[str, ...] | None) -> None:
    chunks = _group()
    assert len(chunks) > 2
    if corrupt:  # the client's fault: one payload byte of a middle chunk, its header unchanged
        head = read_chunk_head(chunks[1])
        assert head is not None
        at = head.payload_start + 5
        chunks[1] = chunks[1][:at] + bytes([chunks[1][at] ^ 1]) + chunks[1][at + 1:]
    judge = PassiveJudge()
    _observed_group(judge, chunks, status)
    found = judge.findings()["CHUNK-VERIFY-1"]
    assert found.status == ("red" if corrupt else "green") and found.judged >= 1
    if sides:
        assert found.sides == sides and "reassemble to a frame of sha256" in found.examples[0]


def test_a_frame_past_the_hash_bound_is_not_hashed_and_not_judged() -> None:
    judge = PassiveJudge(hash_up_to=10_000)
    _observed_group(judge, _group(20_000), 200)
    assert judge.findings()["CHUNK-VERIFY-1"].status == "not seen"


def test_a_poll_that_does_not_ask_the_named_cursor_is_the_clients() -> None:
    path = f"/{JOB}/requests/r-1"
    page: dict[str, Any] = {"request_id": "r-1", "status": "done", "created_at": "t", "updated_at": "t", "result": None,
            "error": None, "events": [], "next_cursor": "c-2"}
    last = {**page, "next_cursor": None}
    followed = verdicts(ex("GET", path, 200, page), ex("GET", path + "?cursor=c-2", 503),
                        ex("GET", path + "?cursor=c-2", 200, last), ex("GET", path, 200, last))
    assert followed["CLIENT-POLL-1"].status == "green" and followed["CLIENT-POLL-1"].judged == 2
    ignored = verdicts(ex("GET", path, 200, page), ex("GET", path, 200, page))
    assert ignored["CLIENT-POLL-1"].status == "red" and ignored["CLIENT-POLL-1"].sides == ("client",)


def test_every_format_marks_each_clause_client_or_server(tmp_path: Path) -> None:
    """A client's red (a missing token-type header) and a server's green, in the five formats."""
    from conformance.reporting import render

    bare = ex("GET", f"/{JOB}", 401, {"code": "unauthenticated", "message": "no"},
              headers={"X-Snowflake-Authorization-Token-Type": ""})
    res = run_results(verdicts(bare), profile="current", target="http://t", url=False)
    rows = {v.id: v for v in res.verdicts}
    assert rows["AUTH-HEADERS-1"].side == "client" and rows["ERR-ENVELOPE-1"].side == "server"
    assert rows["CHUNK-VERIFY-1"].side == "client and server"  # judged on both (not seen here)
    out = {form: render.write(res, tmp_path / f"r.{form}").read_text() for form in ("txt", "md", "html", "xml", "json")}
    assert re.search(r"FAIL MUST\s+AUTH-HEADERS-1\s+client ", out["txt"])
    assert re.search(r"PASS MUST\s+ERR-ENVELOPE-1\s+server ", out["txt"])
    assert "FAIL AUTH-HEADERS-1 [client]" in out["txt"]  # the failures box
    assert "| `AUTH-HEADERS-1` | client |" in out["md"] and "`AUTH-HEADERS-1` (client)" in out["md"]
    assert "<code>ERR-ENVELOPE-1</code></td><td>server</td>" in out["html"]
    assert "<span class='side'>client</span>" in out["html"]
    assert '<property name="side" value="client" />' in out["xml"]
    data = json.loads(out["json"])
    assert {v["id"]: v["side"] for v in data["verdicts"]}["AUTH-HEADERS-1"] == "client"
    assert data["verdict"]["failures"][0]["side"] == "client"


def test_a_bodiless_cancel_or_delete_is_a_success_and_a_bodiless_submit_is_not() -> None:
    """Spec §5.5 and §5.9 let a cancel or a delete answer 204 with no body (the any dialect does)."""
    found = verdicts(ex("POST", f"/{JOB}:cancel", 204), ex("DELETE", f"/{JOB}/checkpoints/c-1", 204))
    assert found["CANCEL-ACTIVE-1"].status == "green"
    assert verdicts(ex("POST", f"/{JOB}/step", 202, body={"learning_rate": 1e-5}))["REQ-SUBMIT-1"].status == "red"


def _chunked_step(result: dict[str, Any], pages: int = 2) -> list[Exchange]:
    """A step submitted, then its result polled as result-chunk events over ``pages`` pages."""
    from contract.wire import min_chunk_bytes, result_chunk_events

    frame = dumps(result)
    events = result_chunk_events(frame, max_bytes=min_chunk_bytes(len(frame)) + len(frame) // pages)
    assert len(events) >= pages
    path, per = f"/{JOB}/requests/q1", -(-len(events) // pages)
    out = [ex("POST", f"/{JOB}/step", 200, {"request_id": "q1", "job_id": JOB}, body={})]
    for page in range(pages):
        last = page == pages - 1
        out.append(ex("GET", path + (f"?cursor=c-{page}" if page else ""), 200, {
            "request_id": "q1", "status": "done", "created_at": "a", "updated_at": "b", "result": None,
            "error": None, "events": events[page * per:(page + 1) * per], "next_cursor": None if last else f"c-{page + 1}"}))
    return out


def test_a_result_delivered_as_chunk_events_is_reassembled_and_judged() -> None:
    assert verdicts(*_chunked_step({"global_steps": 1, "last_lr": 0.1}))["STEP-RESULT-1"].status == "green"
    wrong = verdicts(*_chunked_step({"global_steps": "one", "last_lr": 0.1}))["STEP-RESULT-1"]
    assert wrong.status == "red" and "global_steps" in wrong.examples[0]


def test_chunk_events_held_past_their_bound_are_let_go_and_not_judged() -> None:
    from conformance.judge.passive import ChunkedResults

    judge = PassiveJudge()
    judge.timeline.chunked = ChunkedResults(up_to=100)
    for one in _chunked_step({"global_steps": 1, "last_lr": 0.1}):
        judge.observe(one)
    assert judge.findings()["STEP-RESULT-1"].status == "not seen"
    assert judge.timeline.chunked.held == {} and judge.timeline.chunked.sizes == {}
    # Within the budget, the oldest result held gives way to a newer one.
    held = ChunkedResults(budget=2_000)
    first, second = (_chunked_step({"global_steps": n, "last_lr": 0.1})[1] for n in (1, 2))
    assert held.page("a", first.json["events"], last=False) is None
    assert held.page("b", second.json["events"], last=False) is None
    assert held.held["a"] is None and set(held.sizes) == {"b"} and sum(held.sizes.values()) <= 2_000
