"""Every reader has a total byte cap and a total time bound: the
client, the suite's raw driver and probe, the parity replayer, against a hostile server.

Sizes are small; the issue's (600 MiB gzip bombs, 40 s drips, GiBs of endless body) are
``benchmarks/bench_hardening.py``'s. The time checks are events, not timings: the reader
hung up before the server finished sending (which, at the drip's pace, takes far longer
than the bound).
"""

from __future__ import annotations

import json
import struct
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
import requests
from hostile_server import (
    Answer,
    Request,
    drip,
    endless_json,
    gzip_bomb,
    hostile,
    json_answer,
    result_page,
)

from client.calls.bounded_read import AnswerTooBig, AnswerTooSlow, BoundedAdapter, mount_bounds
from client.config import ClientConfig
from client.errors import (
    AnswerTooLarge,
    CortexError,
    DeadlineExceeded,
    ProtocolError,
    ResultTooLarge,
)
from client.rest import CortexRestClient
from conformance.drivers.answer_bounds import OverlongAnswer
from conformance.drivers.raw import RawDriver
from conformance.target import ProbeError, Target, probe, probe_service
from contract import wire
from contract.limits import INFLATION_FREE_BYTES, SMALL_ANSWER_BYTES, MiB
from contract.wire.limits import MAX_HEADER_CONTAINERS

FAST = {"backoff_first_s": 0.001, "backoff_cap_s": 0.005, "poll_first_s": 0.001, "poll_cap_s": 0.005,
        "connect_timeout_s": 2.0}


def _client(url: str, **cfg: Any) -> CortexRestClient:
    return CortexRestClient(ClientConfig(base_url=url, database="DB", schema="SC", **{**FAST, **cfg}))


def _target(url: str) -> Target:
    return Target(base_url=url, database="DB", schema="SC", endpoint="e", profile="proposed")


def _always(answer: Callable[[], Answer]) -> Callable[[Request], Answer]:
    return lambda request: answer()


# --- time ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dripped", ["head", "body"])
def test_a_dripping_answer_ends_at_the_call_deadline_with_a_typed_error(dripped: str) -> None:
    """One byte every 0.1 s of a 400-byte answer (40 s to the end): with call_timeout_s 1
    the client gives up and hangs up long before, raising DeadlineExceeded."""
    whole = json_answer({"job_id": "j1", "pad": "x" * 300})
    at = 0 if dripped == "head" else whole.index(b"\r\n\r\n") + 4

    def script(_: Request) -> Answer:
        slow = drip(whole[at:], 0.1)
        return Answer(iter([whole[:at], *slow.pieces]) if at else slow.pieces, pause_s=0.1)

    with hostile(script) as srv:
        with pytest.raises(DeadlineExceeded):
            _client(srv.url, call_timeout_s=1.0, read_timeout_s=30.0).get_job("j1")
        ends = srv.settled()
    assert ends and all(s.cut for s in ends), ends


def test_the_suites_driver_hangs_up_on_a_drip_at_its_request_timeout() -> None:
    whole = json_answer({"pad": "x" * 300})
    with hostile(_always(lambda: drip(whole, 0.1))) as srv:
        driver = RawDriver(_target(srv.url), timeout_s=1.0)
        with pytest.raises(AnswerTooSlow):
            driver.send("GET", srv.url + "/anything")
        (end,) = srv.settled()
    assert end.cut, end


def test_the_raw_socket_reader_keeps_a_total_time_and_byte_bound() -> None:
    """conformance.drivers.rawhttp.read_answer (the suite's hand-made calls): its time-out bounds
    the whole read, and an endless answer is kept only up to its cap."""
    import socket

    from conformance.drivers.rawhttp import read_answer

    def ask(srv: Any, timeout_s: float, **kw: Any) -> tuple[int, bytes]:
        host, port = srv.url.split("//", 1)[1].rsplit(":", 1)
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            return read_answer(sock, timeout_s, **kw)

    whole = json_answer({"pad": "x" * 300})
    with hostile(_always(lambda: drip(whole, 0.1))) as srv:
        assert ask(srv, 1.0)[0] == 0
        (end,) = srv.settled()
    assert end.cut, end
    big = json_answer({"pad": "x" * (4 * MiB)})
    with hostile(_always(lambda: Answer(iter([big])))) as srv:
        status, body = ask(srv, 30.0, max_bytes=64 * 1024)
    assert status == 200 and len(body) == 64 * 1024


# --- bytes ----------------------------------------------------------------------------------


def test_the_suite_stops_reading_an_endless_json_body_at_its_cap() -> None:
    """gs-conformance --url read 3 GiB of an endless body in 14 s; the raw driver, the
    probes and a bounded session now stop at their caps (1 MiB here)."""
    with hostile(_always(endless_json)) as srv:
        driver = RawDriver(_target(srv.url), max_answer_bytes=MiB)
        with pytest.raises(OverlongAnswer, match="unrouted answered more than 1048576 bytes"):
            driver.send("GET", srv.url + "/x")
        probe(srv.url)  # the head answers: the probe reads no body
        with pytest.raises(ProbeError):
            probe_service(srv.url, "/api", {})
        with mount_bounds(requests.Session(), 2 * MiB) as session, pytest.raises(AnswerTooBig):
            session.get(srv.url + "/y", timeout=30)
        ends = srv.settled()
    assert all(s.cut for s in ends) and max(s.bytes for s in ends) < 16 * MiB, ends  # cap + socket buffers


def test_the_replayer_reads_under_the_same_bounds() -> None:
    from conformance.parity.replay import Replayer
    from conformance.parity.targets import ReplayTarget

    with hostile(_always(endless_json)) as srv:
        replayer = Replayer([])
        adapter = replayer.session.get_adapter(srv.url)
        assert isinstance(adapter, BoundedAdapter)
        adapter.max_bytes = MiB
        target = ReplayTarget(srv.url, (), "/p")
        got = replayer.send(target, {"method": "GET", "path": "/p/x", "headers": {}}, None)
        (end,) = srv.settled()
    assert got["status"] == 0 and "AnswerTooBig" in got["error"], got
    assert end.cut and end.bytes < 16 * MiB, end


def test_a_gzip_bomb_is_refused_by_its_decoded_size_before_it_is_held() -> None:
    """80 MiB of JSON floats in ~80 KB of gzip: refused once it decodes past 64 MiB at 1000x
    its wire bytes, so the client holds at most the free allowance, not the bomb."""
    whole, wire = gzip_bomb(80 * MiB)
    tracemalloc.start()
    try:
        with hostile(_always(lambda: Answer(iter([whole])))) as srv, \
                pytest.raises(AnswerTooLarge, match="decompression bomb"):
            _client(srv.url, retries=0).get_job("j1")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert wire < MiB
    assert peak < INFLATION_FREE_BYTES + 32 * MiB, peak / MiB


def test_a_compressed_answer_within_its_bound_is_read() -> None:
    whole, _ = gzip_bomb(4 * MiB)  # 4 MiB decoded: under the free allowance
    with hostile(_always(lambda: Answer(iter([whole])))) as srv:
        assert len(_client(srv.url).get_job("j1")["pad"]) == MiB + 1


# --- pages ----------------------------------------------------------------------------------


def test_endless_valid_result_pages_stop_at_the_page_and_byte_budget() -> None:
    pages = {"n": 0}

    def script(request: Request) -> Answer:
        pages["n"] += 1
        return Answer(iter([result_page("j1", "r1", pages["n"], b"\x01" * 4096)]))

    with hostile(script) as srv:
        with pytest.raises(ResultTooLarge, match="max_result_pages"):
            _client(srv.url, max_result_pages=20).wait("j1", "r1")
        assert pages["n"] == 21
        with pytest.raises(ResultTooLarge, match="max_result_bytes"):
            _client(srv.url, max_result_bytes=64 * 1024).wait("j1", "r1")
    assert isinstance(ResultTooLarge("x"), CortexError)


def test_the_watchdog_cuts_each_exchange_at_its_own_deadline_whatever_the_order() -> None:
    """An exchange due sooner than every one watched wakes the watchdog; one due later is
    found when the earlier wait ends (no wake-up per call), and both are cut in time."""
    from client.calls.bounded_read import _Exchange, _Watchdog

    watchdog = _Watchdog()
    patient, soon, later = _Exchange(60.0), _Exchange(0.2), _Exchange(0.4)
    for exchange in (patient, soon, later):
        watchdog.watch(exchange)
    deadline = time.monotonic() + 10
    while not later.cut and time.monotonic() < deadline:
        time.sleep(0.02)
    assert soon.cut and later.cut and not patient.cut


# --- the urllib3 hooks the watchdog learns each connection from ----------------------------


def test_every_exchange_learns_its_connection_before_its_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The watched connections (client.calls.urllib3_pools) name themselves to the exchange
    being sent, from connect() and request(): its socket is the one the watchdog shuts."""
    from client.calls import bounded_read

    made: list[Any] = []

    class Recorded(bounded_read._Exchange):
        def __init__(self, total_s: float) -> None:
            super().__init__(total_s)
            made.append(self)

    monkeypatch.setattr(bounded_read, "_Exchange", Recorded)
    with hostile(_always(lambda: Answer(iter([json_answer({"ok": True})])))) as srv:
        session = mount_bounds(requests.Session())
        answers = [session.get(srv.url + "/x", timeout=(2.0, 10.0)).json() for _ in range(2)]
    assert answers == [{"ok": True}] * 2 and len(made) == 2
    assert made[0].connection is not None and made[1].connection is made[0].connection  # kept alive
    assert type(made[0].connection).__name__ == "_WatchedHTTPConnection"


@pytest.mark.parametrize("removed", ["pool_classes_by_scheme", "request"])
def test_without_urllib3s_hooks_the_bounds_refuse_to_load_naming_the_range(
        monkeypatch: pytest.MonkeyPatch, removed: str) -> None:
    """No exchange could be bounded in time: the import fails, naming urllib3's tested range."""
    import urllib3.connection

    from client.calls import urllib3_pools

    urllib3_pools.check()  # the locked urllib3 has them
    if removed == "request":
        monkeypatch.delattr(urllib3.connection.HTTPConnection, "request")
    else:
        class Bare(urllib3_pools.PoolManager):
            def __init__(self) -> None:
                super().__init__()
                del self.pool_classes_by_scheme

        monkeypatch.setattr(urllib3_pools, "PoolManager", Bare)
    with pytest.raises(ImportError, match=rf"urllib3 >=2,<3 \(found [0-9.]+\): .*{removed} is gone"):
        urllib3_pools.check()


def test_the_base_dependencies_bound_urllib3_to_the_tested_range() -> None:
    import tomllib
    from pathlib import Path

    from client.calls import urllib3_pools

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]
    assert "urllib3" + urllib3_pools.TESTED_URLLIB3 in project["dependencies"]
# --- frames ---------------------------------------------------------------------------------


def _list_bomb_frame(lists: int) -> bytes:
    """A DSSST1 frame whose header's tree holds ``lists`` empty lists (~3 bytes each)."""
    dss = json.dumps({"v": "DSSST1", "tree": ["j", None]}).replace("null", "[" + "[]," * (lists - 1) + "[]]")
    raw = json.dumps({"__metadata__": {"dss": dss}}, separators=(",", ":")).encode()
    raw += b" " * (-(8 + len(raw)) % 8)
    return struct.pack("<Q", len(raw)) + raw


def test_a_result_frame_header_of_endless_lists_is_refused_before_it_is_parsed() -> None:
    """A result whose frame header holds more lists than a header may describe
    (MAX_HEADER_CONTAINERS) is a typed error, and the client never builds the lists: the
    issue's 20 million took it +1.57 GiB; here 2**21 + 1 (6 MiB of header) stay well under
    what parsing them would cost (~130 MiB)."""
    frame = _list_bomb_frame(MAX_HEADER_CONTAINERS + 1)
    stamp = "2026-01-01T00:00:00Z"
    page = json_answer({"request_id": "r1", "job_id": "j1", "status": "done", "created_at": stamp,
                        "updated_at": stamp, "result": wire.inline_frame(frame), "error": None,
                        "events": [], "next_cursor": None})
    tracemalloc.start()
    try:
        with hostile(_always(lambda: Answer(iter([page])))) as srv, \
                pytest.raises(ProtocolError, match="arrays/objects"):
            _client(srv.url, retries=0).wait("j1", "r1")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * len(page), (peak / MiB, len(page) / MiB)


def test_a_header_at_the_container_bound_decodes() -> None:
    assert len(wire.loads(_list_bomb_frame(MAX_HEADER_CONTAINERS - 8))) == MAX_HEADER_CONTAINERS - 8


def test_an_endless_answer_is_cut_at_what_its_route_can_legitimately_answer() -> None:
    """get_capacity answers a small object: an endless answer stops at SMALL_ANSWER_BYTES,
    not at the client's 1 GiB cap (a hostile server's endless answer cost the client +1 GiB)."""
    tracemalloc.start()
    try:
        with hostile(_always(endless_json)) as srv:
            with pytest.raises(AnswerTooLarge, match="get_capacity"):
                _client(srv.url, retries=0).get_capacity()
            (end,) = srv.settled()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert end.cut and end.bytes < SMALL_ANSWER_BYTES + 16 * MiB, end  # the bound + socket buffers
    assert peak < 3 * SMALL_ANSWER_BYTES, peak / MiB


def test_every_route_reads_at_most_what_it_can_answer() -> None:
    from contract.limits import MAX_ANSWER_BYTES, answer_bound
    from contract.routes import ROUTES

    for route in ROUTES:
        bound = answer_bound(route.name, MAX_ANSWER_BYTES)
        assert bound == MAX_ANSWER_BYTES if route.name == "get_request" else bound < 256 * MiB, route.name
    assert answer_bound("get_job", MiB) == MiB  # the client's own cap still applies
