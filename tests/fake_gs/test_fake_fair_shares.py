"""Fair shares of the server-wide budgets: an account within its share
gets room taken back from accounts over theirs (their least recently active holdings), an
account over its share is refused at once, a lone account uses the whole budget."""

from __future__ import annotations

import socket
from typing import Any

from fake_gs_api import OCTET, Api, batch, eventually, zero_frame_chunks

from conformance.drivers.rawhttp import read_answer, request_head
from contract import wire
from fake_gs.chunking import machine as cm
from fake_gs.chunking import shares
from fake_gs.settings import FakeSettings

KiB = 1024
TOKENS = {"tokens": ("a", "b", "c"), "admin_token": "z"}


def test_shares_are_the_budget_over_the_accounts_holding_it() -> None:
    assert shares.judge({"a": 600}, "a", 400, 1000) == shares.Verdict(shares.FITS)
    assert shares.judge({"a": 900}, "a", 200, 1000).outcome == shares.OVER_SHARE  # alone: its share is all
    assert shares.judge({"a": 900}, "b", 200, 1000) == shares.Verdict(shares.RECLAIM, 500, 100)
    assert shares.judge({"a": 400, "b": 400}, "b", 250, 1000).outcome == shares.OVER_SHARE  # 650 > 500
    assert shares.over_share({"a": 700, "b": 200, "c": 50}, "c", 900) == ["a"]
    assert shares.over_share({"a": 700, "b": 500, "c": 0}, "c", 900) == ["a", "b"]


def test_the_machine_reclaims_only_from_accounts_over_their_share() -> None:
    limits = FakeSettings(max_buffered_bytes_total=1000, max_open_groups_total=10)
    full = {"a": cm.Load(2, 900), "b": cm.Load(0, 0)}
    usage = cm.Usage(account=cm.Load(0, 0), server_reserved=900, server_open=2, accounts=full, me="b")
    assert cm.server_refusal(200, limits, usage) == cm.Reclaim(bytes=100)
    assert isinstance(cm.server_refusal(600, limits, usage), cm.Refuse)  # over b's share of 500
    mine = cm.Usage(account=cm.Load(2, 900), server_reserved=900, server_open=2, accounts=full, me="a")
    refused = cm.server_refusal(200, limits, mine)
    assert isinstance(refused, cm.Refuse) and "share" in refused.message
    assert isinstance(cm.server_refusal(200, limits, usage, shared=False), cm.Refuse)  # first come, first served


def _chunk0(api: Api, job: str, frame_size: int) -> tuple[Any, list[bytes]]:
    chunks = zero_frame_chunks(frame_size, 64 * KiB)
    return api.post(f"/{job}/forward-backward", data=chunks[0], headers=OCTET), chunks


def test_an_account_within_its_share_gets_room_from_the_one_over_it(make_api) -> None:
    a = make_api("a", max_buffered_bytes_total=1024 * KiB, **TOKENS)
    b = Api(a.base_url, token="b", server=a.server)
    job_a, job_b = a.running_job(), b.running_job()
    (first, first_chunks), (second, _) = _chunk0(a, job_a, 400 * KiB), _chunk0(a, job_a, 400 * KiB)
    assert (first.status_code, second.status_code) == (202, 202)
    mine, mine_chunks = _chunk0(b, job_b, 400 * KiB)
    assert mine.status_code == 202, mine.text  # 1200 KiB asked of 1024: a's idle group gave way
    assert Api(a.base_url, token="z").get("/_fake/budgets").json()["reclaimed_chunk_groups"] == 1
    again = a.post(f"/{job_a}/forward-backward", data=first_chunks[1], headers=OCTET)
    assert again.status_code == 409 and again.json()["code"] == "chunk_group_restart_required"
    over, _ = _chunk0(a, job_a, 400 * KiB)  # a holds 400 of its 512: 800 is over its share
    assert over.status_code == 429 and over.json()["code"] == "chunk_group_limit" and "share" in over.text
    for chunk in mine_chunks[1:]:
        last = b.post(f"/{job_b}/forward-backward", data=chunk, headers=OCTET)
    assert last.status_code == 200, last.text


def test_open_groups_are_shared_too(make_api) -> None:
    a = make_api("a", max_open_groups_total=4, **TOKENS)
    b = Api(a.base_url, token="b", server=a.server)
    job_a, job_b = a.running_job(), b.running_job()
    assert [_chunk0(a, job_a, 200 * KiB)[0].status_code for _ in range(4)] == [202] * 4  # alone: all of it
    assert _chunk0(a, job_a, 200 * KiB)[0].status_code == 429
    assert _chunk0(b, job_b, 200 * KiB)[0].status_code == 202
    admin = Api(a.base_url, token="z")
    assert admin.get("/_fake/budgets").json()["reclaimed_chunk_groups"] == 1 and admin.state()["open_chunk_groups"] == 4


def test_a_body_over_its_share_gives_way_and_a_refused_body_is_answered_at_once(make_api) -> None:
    """a trickles two bodies holding the in-flight budget (one of them garbage, refused and
    being discarded); b's upload still goes in (a's least recently active body is dropped:
    503 on its next byte); a's next body, all of it sent, is refused at once, not after
    --body-idle-s."""
    a = make_api("a", max_inflight_bytes=2048 * KiB, body_idle_s=120.0, **TOKENS)
    b = Api(a.base_url, token="b", server=a.server)
    job_a, job_b = a.running_job(), b.running_job()
    socks = [_trickle(a, job_a, 1000 * KiB, garbage=True), _trickle(a, job_a, 1000 * KiB)]
    assert eventually(lambda: a.server.state.inflight.held >= 2000 * KiB)
    refused = a.post(f"/{job_a}/generate", data=b"\x00" * (64 * KiB), headers=OCTET)  # 60 s, far under the idle
    assert refused.status_code == 503 and refused.headers["retry-after"], refused.text
    assert b.submit_frame(job_b, "forward-backward", batch(2, 30_000), max_bytes=512 * KiB)
    assert a.server.state.inflight.evicted == 1
    statuses = []
    for sock in socks:
        sock.sendall(b"\x00")
        sock.settimeout(0.5)
        try:
            statuses.append(read_answer(sock, 0.5)[0])
        finally:
            sock.close()
    assert 503 in statuses, statuses


def _trickle(api: Api, job: str, sent: int, garbage: bool = False) -> socket.socket:
    """A chunk upload of 1.5 MiB that sends ``sent`` bytes of its payload, then waits
    (``garbage``: zeros where the chunk header goes)."""
    chunk = zero_frame_chunks(1536 * KiB, 2048 * KiB)[0]
    head = wire.read_chunk_head(chunk)
    assert head is not None
    if garbage:
        chunk = bytes(len(chunk))
    host, port = api.base_url.split("//", 1)[1].rsplit(":", 1)
    path = api.prefix.split(api.base_url, 1)[1] + f"/{job}/forward-backward"
    sock = socket.create_connection((host, int(port)), timeout=30)
    token = api.session.headers["Authorization"]
    assert isinstance(token, str)
    headers = {"Authorization": token,
               "X-Snowflake-Authorization-Token-Type": "PROGRAMMATIC_ACCESS_TOKEN"}
    sock.sendall(request_head(f"{host}:{port}", path, len(chunk), OCTET["Content-Type"], headers)
                 + chunk[: head.payload_start + sent])
    return sock
