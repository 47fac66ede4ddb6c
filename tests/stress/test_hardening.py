"""Hardening: each attack of the red-team pass, with the bound it must keep.

The fake runs as a subprocess where RSS is measured (its own memory only). Bounds carry a
margin over the issue's figures (2 shared cores): the figures themselves are measured by
``benchmarks/bench_hardening.py``. Latency bounds here only catch a stalled event loop
(seconds), never a slow one.
"""

from __future__ import annotations

import pytest
import requests
from hostile_attacks import MiB, chunk0_amplification, create_job, results_loop, slow_bodies
from stress_helpers import fake_process, rest_client, service_prefix

from contract import wire
from fake_gs import start_in_background

#: RSS the fake may add during an attack (the issue's bound).
GROWTH_BOUND_MIB = 64
#: A healthy call answered meanwhile: seconds, with a wide margin for shared cores (the
#: benchmark measures the real figure against the issue's 0.5 s).
STALL_BOUND_S = 5.0


def test_slow_bodies_hold_no_memory_and_time_out() -> None:
    """40 connections declare 60 MiB and send one byte: RSS stays flat, health answers, and
    each connection gets 408 once the body idles past --body-idle-s."""
    with fake_process("--body-idle-s", "2") as fake:
        m = slow_bodies(fake, connections=40, declared=60 * MiB, hold_s=3.0)
    assert m.growth_mib < GROWTH_BOUND_MIB, m
    assert not m.extra["probe_failures"] and m.worst_latency_s < STALL_BOUND_S, m
    assert m.statuses == [408] * 40, m.statuses


def test_bodies_in_flight_are_capped_with_503() -> None:
    """Past --max-inflight-mib the next body is answered 503 + Retry-After, and the budget is
    given back once the call ends (the same body is taken afterwards... by a fake whose cap
    fits it)."""
    fake = start_in_background(max_inflight_bytes=1 * MiB)
    try:
        job = create_job(fake.base_url)
        url = service_prefix(fake.base_url) + f"/{job}/generate"
        r = requests.post(url, data=b"\x00" * (2 * MiB), headers={"Content-Type": "application/octet-stream"},
                          timeout=30)
        assert r.status_code == 503 and r.json()["code"] == "unavailable" and r.headers["retry-after"], r.text
        assert fake.state.inflight.held == 0
        for _ in range(3):  # given back each time: small bodies keep going through
            ok = requests.post(service_prefix(fake.base_url) + f"/{job}/step", json={}, timeout=30)
            assert ok.status_code == 200, ok.text
        assert fake.state.inflight.held == 0
    finally:
        fake.stop()


def test_chunk0_declaring_a_huge_frame_costs_its_own_bytes() -> None:
    """50 chunk-0 requests with a 1-byte payload each declaring a 40 MiB frame: the fake
    keeps what arrived (bytes), not what was declared (2000 MiB before), and a poll of
    another request is answered meanwhile."""
    with fake_process() as fake:
        m = chunk0_amplification(fake, requests_n=50, frame_size=40 * MiB)
    assert m.statuses == [202] * 50, m.statuses
    assert m.growth_mib < GROWTH_BOUND_MIB, m
    assert not m.extra["probe_failures"] and m.worst_latency_s < STALL_BOUND_S, m


def test_one_account_at_its_group_limit_does_not_stop_another() -> None:
    """Token A fills its open-group cap; token B's chunked forward-backward (the kit's
    client, several chunks) still runs, while A's next group is refused with 429."""
    fake = start_in_background(tokens=("A", "B"), admin_token="Z", max_open_groups_per_account=3,
                               max_buffered_bytes_total=4 * MiB, max_buffered_bytes_per_account=3 * MiB)
    try:
        from hostile_attacks import _chunk0

        job_a = create_job(fake.base_url, {"Authorization": "Bearer A",
                                           "X-Snowflake-Authorization-Token-Type": "PROGRAMMATIC_ACCESS_TOKEN"})
        url = service_prefix(fake.base_url) + f"/{job_a}/forward-backward"
        headers = {"Authorization": "Bearer A", "X-Snowflake-Authorization-Token-Type": "PROGRAMMATIC_ACCESS_TOKEN",
                   "Content-Type": "application/octet-stream"}
        answers = [requests.post(url, data=_chunk0(1 * MiB, b"\x01" * 1024), headers=headers, timeout=30)
                   for _ in range(4)]
        assert [a.status_code for a in answers] == [202, 202, 202, 429], [a.text for a in answers]
        assert answers[-1].json()["code"] == "chunk_group_limit" and answers[-1].headers["retry-after"]
        client = rest_client(fake.base_url, token="B", max_chunk_bytes=64 * 1024)
        job_b = client.create_job(_job_body())["job_id"]
        frame = wire.dumps(_batch(4000))
        assert len(wire.encode_byte_chunks(frame, "request", max_bytes=64 * 1024)) >= 2
        answer = client.forward_backward(job_b, frame)
        assert isinstance(answer.get("request_id"), str), answer
        assert "avg_loss" in client.wait(job_b, answer["request_id"])
    finally:
        fake.stop()


def _job_body() -> dict:
    from stress_helpers import job_body

    return job_body(seed=3)


def _batch(seq: int) -> dict:
    import torch

    return {"args": [], "kwargs": {"input_ids": torch.ones(4, seq, dtype=torch.int64) * 3}}


@pytest.mark.slow
@pytest.mark.heavy
def test_results_read_to_the_end_are_freed_while_the_job_runs() -> None:
    """forward-no-grad calls with 1 MiB results, each read to the end by the kit's client:
    the fake's RSS stays flat while the job still runs (it grew ~2.6 MiB a call before)."""
    with fake_process() as fake:
        m = results_loop(fake, calls=120)
    assert m.extra["job_status"] == "running"
    assert m.growth_mib < 100, m


@pytest.mark.slow
def test_two_thousand_results_stay_within_300_mib(soak_size: str) -> None:
    """The issue's figure: 2,000 calls with 1 MiB results, RSS within 300 MiB of the start
    (measured during the run, the job still running). About 3 minutes: runs with
    ``--soak-size large`` (or SOAK_SIZE=large) only."""
    if soak_size != "large":
        pytest.skip("2,000 calls take minutes; run with --soak-size large")
    with fake_process() as fake:
        m = results_loop(fake, calls=2000)
    assert m.extra["job_status"] == "running"
    assert m.growth_mib < 300, m
