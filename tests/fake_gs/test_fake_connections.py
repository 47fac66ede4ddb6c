"""Connection deadlines and the connection cap (fake_gs.http.connections).

Time is the fake's ManualClock: a test opens the sockets, advances the clock past a
deadline and waits (generously) for the fake's sweep to act; nothing here times the fake.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import pytest
import requests
from fake_gs_api import eventually
from uvicorn.protocols.http.h11_impl import H11Protocol

from conformance.drivers.rawhttp import read_answer, request_head
from fake_gs import FakeServer
from fake_gs.clock import ManualClock
from fake_gs.http import h11_internals

#: A liveness bound, not a performance one: a healthy call answered well within it.
LIVENESS_TIMEOUT_S = 30.0


def _addr(server: FakeServer) -> tuple[str, int]:
    host, port = server.base_url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


@contextmanager
def _sockets(server: FakeServer, n: int, first: bytes = b"") -> Iterator[list[socket.socket]]:
    with ExitStack() as stack:
        socks = []
        for _ in range(n):
            s = stack.enter_context(socket.create_connection(_addr(server)))
            if first:
                s.sendall(first)
            socks.append(s)
        yield socks


def _connections(server: FakeServer) -> dict[str, int]:
    r = requests.get(server.base_url + "/_fake/connections", timeout=LIVENESS_TIMEOUT_S)
    return dict(r.json())


def _arrived(server: FakeServer, heads: int = 0, bodies: int = 0) -> bool:
    """Has the fake seen ``heads`` partial heads and ``bodies`` bodies under way? (So the
    clock moves only once it has: every deadline then starts before the move.)"""
    guard = server.state.connections
    return eventually(lambda: sum(c.head_bytes for c in list(guard.open)) >= heads
                      and len(server.exchanges_in_progress()) >= bodies, LIVENESS_TIMEOUT_S)


def _health_answers(server: FakeServer) -> bool:
    r = requests.get(server.base_url + "/_fake/health", timeout=LIVENESS_TIMEOUT_S)
    return r.status_code == 200 and r.json()["status"] == "ok"


@pytest.fixture
def clocked(make_server: Callable[..., FakeServer]) -> tuple[FakeServer, ManualClock]:
    clock = ManualClock()
    return make_server(clock=clock, head_timeout_s=10.0, body_timeout_s=60.0), clock


def test_partial_heads_and_silent_sockets_are_closed_at_the_head_deadline(clocked) -> None:
    server, clock = clocked
    partial = b"POST /_fake/reset HTTP/1.1\r\nHost: x\r\nX-Slow: "
    with _sockets(server, 20, partial) as heads, _sockets(server, 10) as silent:
        assert _arrived(server, heads=20) and _health_answers(server)  # the sockets are open, the fake still answers
        clock.advance(9.0)
        assert _connections(server)["head_timeouts"] == 0  # not yet due
        clock.advance(2.0)
        answers = [read_answer(s, LIVENESS_TIMEOUT_S) for s in heads]
        assert [status for status, _ in answers] == [408] * 20, answers[:2]
        assert json.loads(answers[0][1])["code"] == "request_timeout"
        for s in silent:  # nothing was sent: closed without an answer
            s.settimeout(LIVENESS_TIMEOUT_S)
            assert s.recv(100) == b""
        seen = _connections(server)
    assert seen["head_timeouts"] == 30 and seen["open"] == 1, seen  # the state call's own
    assert _health_answers(server)


def test_a_trickling_body_is_answered_408_at_the_body_deadline(clocked) -> None:
    """The body keeps arriving (never idle past --body-idle-s) but never completes."""
    server, clock = clocked
    host, port = _addr(server)
    head = request_head(f"{host}:{port}", "/_fake/faults", 1000, "application/json")
    with _sockets(server, 10, head + b"[") as tricklers:
        assert _arrived(server, bodies=10)
        clock.advance(30.0)
        for s in tricklers:
            s.sendall(b" ")  # still arriving, one byte at a time
        assert _health_answers(server)
        clock.advance(31.0)
        answers = [read_answer(s, LIVENESS_TIMEOUT_S) for s in tricklers]
    assert [status for status, _ in answers] == [408] * 10, answers[:2]
    assert json.loads(answers[0][1])["code"] == "request_timeout"
    assert "60 s" in json.loads(answers[0][1])["message"]
    assert _connections(server)["body_timeouts"] == 10


def test_a_body_nobody_reads_is_cut_at_the_body_deadline(clocked) -> None:
    """health answers without reading the body it was sent; the rest may not trickle for ever."""
    server, clock = clocked
    host, port = _addr(server)
    head = f"GET /_fake/health HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 1000\r\n\r\n".encode()
    with _sockets(server, 1, head + b"x") as (s,):
        status, _ = read_answer(s, LIVENESS_TIMEOUT_S)
        assert status == 200
        clock.advance(61.0)
        s.settimeout(LIVENESS_TIMEOUT_S)
        got = b"x"
        while got:  # whatever is left of the answer, then the close
            got = s.recv(65536)
    assert _connections(server)["body_timeouts"] == 1


def test_over_the_cap_the_longest_waiting_connection_makes_room(make_server) -> None:
    server = make_server(max_connections=16)
    with _sockets(server, 100) as idle:
        assert _health_answers(server)  # a new connection got in: an idle one made room
        seen = _connections(server)
        assert seen["open"] <= 16 and seen["evicted"] >= 84, seen
        closed = 0
        for s in idle[:80]:  # the oldest were closed, each with a 503 it never asked for
            s.settimeout(LIVENESS_TIMEOUT_S)
            closed += s.recv(100).startswith(b"HTTP/1.1 503")
        assert closed == 80


def test_when_every_connection_is_busy_the_newest_is_refused_503(make_server) -> None:
    server = make_server(max_connections=3)
    host, port = _addr(server)
    head = request_head(f"{host}:{port}", "/_fake/faults", 1000, "application/json")
    with _sockets(server, 3, head + b"["):  # three calls still receiving their bodies
        assert _arrived(server, bodies=3)
        newest = socket.create_connection(_addr(server))
        status, body = read_answer(newest, LIVENESS_TIMEOUT_S)
        newest.close()
        assert status == 503 and json.loads(body)["code"] == "unavailable"
    assert _connections(server)["refused"] == 1


@pytest.mark.parametrize("bypass", ["past h11", "h11's public path"])
def test_a_body_read_past_h11_arrives_whole_and_a_pipelined_request_after_it_is_answered(
        make_server, monkeypatch: pytest.MonkeyPatch, bypass: str) -> None:
    """Body bytes handed to the request without h11 (fake_gs.http.connections: every piece but
    the body's last bytes): the handler gets exactly the declared body, the bytes after it
    are the next request, and h11's state still knows where the body ended. With the bypass
    off (h11's private state gone: fake_gs.http.h11_internals) the answers are the same."""
    assert h11_internals.BYPASS_OFF is None, h11_internals.BYPASS_OFF  # the locked h11 and uvicorn
    if bypass != "past h11":
        monkeypatch.setattr(h11_internals, "BYPASS_OFF", "forced by the test")
    server = make_server()
    host, port = _addr(server)
    rule = {"route": "get_capacity", "nth": 2, "status": 503}
    body = json.dumps({"rules": [rule]}).encode()
    body = body[:-1] + b" " * (900 * 1024) + body[-1:]  # many receives' worth of body
    head = (f"PUT /_fake/faults HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    health = f"GET /_fake/health HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    with _sockets(server, 1) as (s,):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(head + body[:1000])
        for start in range(1000, len(body) - 7, 64 * 1024):
            s.sendall(body[start : min(start + 64 * 1024, len(body) - 7)])
        s.sendall(body[-7:] + health)  # the body's end and the next request in one piece
        (status, data), second = read_answers(s, 2)
    assert status == 200, data
    assert json.loads(data)["rules"][0]["status"] == 503
    assert second[0] == 200 and json.loads(second[1])["status"] == "ok", second
    past_h11 = _connections(server)["body_pieces_past_h11"]
    assert past_h11 > 0 if bypass == "past h11" else past_h11 == 0


@pytest.mark.parametrize(("change", "named"), [
    (lambda mp: mp.setattr(h11_internals, "_release", lambda dist: "0.17.0" if dist == "h11" else "0.55.0"),
     "h11 0.17.0 is outside the tested range >=0.16,<0.17"),
    (lambda mp: mp.setattr(h11_internals, "ContentLengthReader", None), "h11._readers.ContentLengthReader"),
    (lambda mp: mp.setattr(h11_internals, "ContentLengthReader", type("Renamed", (), {})), "_remaining"),
    (lambda mp: mp.delattr(H11Protocol, "_unset_keepalive_if_required"), "_unset_keepalive_if_required"),
])
def test_the_bypass_is_off_when_what_it_reads_is_not_there(
        monkeypatch: pytest.MonkeyPatch, change: Callable[[pytest.MonkeyPatch], None], named: str) -> None:
    """The import-time probe names the library, its release and what is missing."""
    assert h11_internals.probe() is None
    change(monkeypatch)
    reason = h11_internals.probe()
    assert reason is not None and named in reason, reason


def read_answers(sock: socket.socket, n: int) -> list[tuple[int, bytes]]:
    """The status and body of the next ``n`` answers on ``sock``, each framed by its
    Content-Length: a read may end anywhere, inside the first answer or the next one."""
    data = b""
    answers: list[tuple[int, bytes]] = []
    sock.settimeout(LIVENESS_TIMEOUT_S)
    while len(answers) < n:
        head, sep, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), None)
        if sep and length is not None and len(rest) >= length:
            answers.append((int(head.split(b" ", 2)[1]), rest[:length]))
            data = rest[length:]
            continue
        got = sock.recv(65536)
        assert got, f"the connection closed after {len(answers)} of {n} answers: {data[:200]!r}"
        data += got
    return answers


def test_the_server_extra_bounds_h11_and_uvicorn_to_the_tested_ranges() -> None:
    """pyproject.toml installs what the import-time probe calls tested (one range, two homes)."""
    import tomllib
    from pathlib import Path

    extra = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    server = extra["project"]["optional-dependencies"]["server"]
    assert "h11" + h11_internals.release_range(h11_internals.TESTED_H11) in server
    assert "uvicorn" + h11_internals.release_range(h11_internals.TESTED_UVICORN) in server
