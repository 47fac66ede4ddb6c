"""The hardening figures, each measured on a fake running as a subprocess.

1. Slow bodies: 40 connections declare 60 MiB forward-backward bodies and send one byte
   each, held 10 s: the fake's RSS growth, the worst ``/_fake/health`` latency meanwhile,
   and how the connections end (408 from ``--body-idle-s 10``). Bound: < 64 MiB, < 0.5 s.
2. Chunk-0 amplification: 50 chunk-0 requests with a 1-byte payload each declaring a
   40 MiB frame: RSS growth and the worst latency of a poll meanwhile. Bound: < 64 MiB,
   < 0.5 s.
3. Accounts: token A at its open-group cap; token B's chunked forward-backward (the kit's
   client) still runs. Bound: B succeeds, A's next group gets 429.
4. Results: 2,000 forward-no-grad calls with 1 MiB results, each read to the end by the
   kit's client; RSS growth measured while the job runs. Bound: < 300 MiB.
5. Admin: with ``--token A --token B --admin-token Z``, A and B get 403 on every admin
   route and Z gets 200.
6. Poll pages: the transient memory of building one 512-event page, as a multiple of the
   page (spliced from pre-encoded events; bound 1.2x), beside re-serialising event dicts.
7. Log stage: unauthenticated PUTs declaring 1 GiB each push 1.2 GB at the
   execution-log stage: the RSS of the fake and of its stage process, and the stage's temp
   disk, before and after. Bound: < 16 MiB each, temp disk +0.
8. Fair shares: four accounts each declare a 2 GiB frame with one tiny
   chunk 0 (the 8 GiB server-wide budget full) and account E's 64 MiB upload still runs; one
   account trickling 18 bodies holds the 1 GiB in-flight budget, its next small body is
   refused at once (not after --body-idle-s), and another account's upload still runs.

Run: ``python benchmarks/bench_hardening.py [--quick] [--round first|second|all]``
(``--quick``: 200 result calls and a 3 s hold; ``--round second``: only the second hardening
round's figures: the log stage, the fair shares, and the deadlines, readers and work bounds
in ``bench_hardening_bounds.py``). Exits 1 when a
bound is missed. Figures are printed, one line each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "stress")]

from hostile_attacks import (  # noqa: E402
    MiB,
    _chunk0,
    chunk0_amplification,
    create_job,
    results_loop,
    slow_bodies,
)
from stress_helpers import Admin, fake_process, rest_client, service_prefix  # noqa: E402

from contract import wire  # noqa: E402

PAT = {"X-Snowflake-Authorization-Token-Type": "PROGRAMMATIC_ACCESS_TOKEN"}


def bench_slow_bodies(hold_s: float) -> bool:
    with fake_process("--body-idle-s", str(hold_s)) as fake:
        m = slow_bodies(fake, connections=40, declared=60 * MiB, hold_s=hold_s)
    timed_out = sum(1 for s in m.statuses if s == 408)
    ok = m.growth_mib < 64 and m.worst_latency_s < 0.5 and timed_out == 40 and not m.extra["probe_failures"]
    print(f"slow bodies: 40 x 60 MiB declared, 1 byte sent, held {hold_s:g} s: RSS +{m.growth_mib:.1f} MiB "
          f"(bound 64), worst /_fake/health {m.worst_latency_s * 1000:.0f} ms over {len(m.latencies)} probes "
          f"(bound 500), {timed_out}/40 answered 408 by --body-idle-s: {'OK' if ok else 'MISSED'}")
    return ok


def bench_chunk0() -> bool:
    with fake_process() as fake:
        m = chunk0_amplification(fake, requests_n=50, frame_size=40 * MiB)
    accepted = sum(1 for s in m.statuses if s == 202)
    ok = m.growth_mib < 64 and m.worst_latency_s < 0.5 and not m.extra["probe_failures"]
    print(f"chunk-0 amplification: 50 chunk 0s declaring 40 MiB ({m.extra['bytes_sent']} bytes sent, "
          f"{accepted} accepted): RSS +{m.growth_mib:.1f} MiB (bound 64), worst poll meanwhile "
          f"{m.worst_latency_s * 1000:.0f} ms over {len(m.latencies)} polls (bound 500): {'OK' if ok else 'MISSED'}")
    return ok


def bench_accounts() -> bool:
    import torch

    args = ["--token", "A", "--token", "B", "--admin-token", "Z", "--max-open-groups-per-account", "3"]
    with fake_process(*args) as fake:
        job_a = create_job(fake.base_url, {"Authorization": "Bearer A", **PAT})
        url = service_prefix(fake.base_url) + f"/{job_a}/forward-backward"
        headers = {"Authorization": "Bearer A", **PAT, "Content-Type": "application/octet-stream"}
        codes = [requests.post(url, data=_chunk0(MiB, b"\x01" * 1024), headers=headers, timeout=30).status_code
                 for _ in range(4)]
        client = rest_client(fake.base_url, token="B", max_chunk_bytes=64 * 1024)
        job_b = client.create_job({"sub_job_configs": [{
            "job_type": "training", "model_name": "Qwen/Qwen3-0.6B", "seed": 1,
            "training_config": {"optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 8192,
                                "train_batch_size": 8, "n_gpus": 1}}]})["job_id"]
        frame = wire.dumps({"args": [], "kwargs": {"input_ids": torch.ones(4, 4000, dtype=torch.int64)}})
        chunks = len(wire.encode_byte_chunks(frame, "request", max_bytes=64 * 1024))
        started = time.monotonic()
        result = client.wait(job_b, client.forward_backward(job_b, frame)["request_id"])
        took = time.monotonic() - started
    ok = codes == [202, 202, 202, 429] and "avg_loss" in result
    print(f"accounts: token A's chunk 0s answered {codes} (cap 3 per account); token B's forward-backward in "
          f"{chunks} chunks ran in {took * 1000:.0f} ms: {'OK' if ok else 'MISSED'}")
    return ok


def bench_results(calls: int) -> bool:
    with fake_process() as fake:
        m = results_loop(fake, calls=calls)
    ok = m.growth_mib < 300 and m.extra["job_status"] == "running"
    samples = m.extra["growth_samples_mib"]
    print(f"results: {calls} forward-no-grad calls, {m.extra['result_shape']} float32 results (1 MiB) read to "
          f"the end, {m.extra['seconds']:.0f} s: RSS {m.rss_before / MiB:.0f} MiB at the start, peak "
          f"+{m.growth_mib:.1f} MiB (bound 300), last sample +{samples[-1]:.1f} MiB, job still "
          f"{m.extra['job_status']}: {'OK' if ok else 'MISSED'}")
    return ok


def bench_admin() -> bool:
    with fake_process("--token", "A", "--token", "B", "--admin-token", "Z") as fake:
        base = fake.base_url
        routes = [("GET", "health"), ("GET", "state"), ("GET", "variations"), ("GET", "faults"), ("PUT", "faults"),
                  ("POST", "faults"), ("DELETE", "faults"), ("POST", "jobs/x/state"), ("POST", "reset")]
        seen: dict[str, set[int]] = {"A": set(), "B": set(), "Z": set()}
        for method, path in routes:
            body = {"rules": []} if path == "faults" and method in ("PUT", "POST") else None
            for token in ("A", "B", "Z"):
                if token == "Z" and path == "jobs/x/state":
                    continue  # no such job: 404 with the admin token
                r = requests.request(method, f"{base}/_fake/{path}", json=body, timeout=30,
                                     headers={"Authorization": f"Bearer {token}"})
                seen[token].add(r.status_code)
    ok = seen["A"] == seen["B"] == {403} and seen["Z"] == {200}
    print(f"admin: {len(routes)} admin routes; token A answered {sorted(seen['A'])}, B {sorted(seen['B'])}, "
          f"admin token Z {sorted(seen['Z'])}: {'OK' if ok else 'MISSED'}")
    return ok


def bench_shared_reservations() -> bool:
    """Fair shares: four accounts each send one chunk 0 (~460 bytes) declaring a 2 GiB
    frame, filling the 8 GiB server-wide chunk budget; account E's upload must still run."""
    from share_attacks import reservations

    accounts = ["A", "B", "C", "D"]
    args = [arg for t in [*accounts, "E"] for arg in ("--token", t)] + ["--admin-token", "Z"]
    with fake_process(*args) as fake:
        started = time.monotonic()
        m = reservations(fake, accounts=accounts, frame_size=2048 * MiB, victim="E", upload_bytes=64 * MiB,
                         chunk_bytes=16 * MiB)
        took = time.monotonic() - started
        reclaimed = Admin(fake.base_url, "Z").budgets()["reclaimed_chunk_groups"]
    ok = m.statuses == [202] * 4 and "avg_loss" in m.extra["result"] and m.growth_mib < 64 + 64 * 1.3
    print(f"shared reservations: 4 accounts x 1 chunk 0 of {m.extra['sent_bytes'] // 4} bytes declaring 2 GiB "
          f"(8 GiB of the 8 GiB budget) answered {m.statuses}; account E's 64 MiB upload ran "
          f"({took:.1f} s for all), {reclaimed} idle group reclaimed, whose next chunk answered "
          f"{sorted(set(m.extra['next_chunk_codes']))}; RSS +{m.growth_mib:.0f} MiB at peak (E's frame: 64): "
          f"{'OK' if ok else 'MISSED'}")
    return ok


def bench_shared_inflight() -> bool:
    """Fair shares: one account trickling 18 chunk bodies holds the 1 GiB in-flight
    budget; its next (small, fully sent) body must be refused at once, not after the 30 s
    --body-idle-s, and another account's upload must still run."""
    from share_attacks import trickled_bodies

    with fake_process("--token", "A", "--token", "B", "--admin-token", "Z") as fake:
        sent = (1024 * MiB - 64 * 1024) // 18
        m = trickled_bodies(fake, Admin(fake.base_url, "Z"), holder="A", other="B", bodies=18,
                            body_bytes=60 * MiB - 8192, sent_bytes=sent)
    status, code, seconds = m.extra["late_refusal"]
    ok = (status, code) == (503, "unavailable") and seconds < 5 and "avg_loss" in m.extra["result"] \
        and m.extra["evicted"] >= 1
    print(f"shared in-flight budget: account A trickles 18 bodies ({18 * sent / MiB:.0f} MiB of the 1024 MiB "
          f"budget sent, fake RSS +{(m.extra['rss_held'] - m.rss_before) / MiB:.0f} MiB); A's next 128 KiB body "
          f"answered {status} {code} in {seconds * 1000:.0f} ms (--body-idle-s 30); account B's upload ran, "
          f"{m.extra['evicted']} of A's bodies dropped for it (answered {sorted(set(m.statuses))} on their next "
          f"byte); RSS after {(m.rss_after - m.rss_before) / MiB:+.0f} MiB: {'OK' if ok else 'MISSED'}")
    return ok


def bench_poll_page() -> bool:
    """Transient memory of building one 512-event poll page (64 KiB result chunks): the
    fake's splice of pre-encoded events against re-serialising the event dicts (before)."""
    import json
    import tracemalloc

    from contract.models import RequestStatus
    from fake_gs.answers.delivery import chunk_event
    from fake_gs.http.handlers.polling import render

    frame = os.urandom(512 * 60 * 1024)
    chunks = wire.encode_byte_chunks(frame, "result", max_bytes=64 * 1024, force_chunk=True)[:512]
    events = [chunk_event(c) for c in chunks]
    dicts = [json.loads(e) for e in events]
    head = {"request_id": "r", "status": "done", "created_at": "t", "updated_at": "t"}

    def peak(build: object) -> tuple[int, int]:
        tracemalloc.start()
        page = build()  # type: ignore[operator]
        size, top = len(page), tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size, top

    size, now = peak(lambda: render(RequestStatus(**head, error=None, next_cursor=None), b"null", events))
    _, before = peak(lambda: json.dumps({**head, "result": None, "error": None, "events": dicts,
                                         "next_cursor": None}, separators=(",", ":")).encode())
    ok = now <= 1.2 * size
    print(f"poll page: 512 result_chunk events, {size / MiB:.1f} MiB of JSON: built with "
          f"{now / size:.2f}x its size in transient memory (re-serialising dicts: {before / size:.2f}x): "
          f"{'OK' if ok else 'MISSED'}")
    return ok


def bench_log_stage(total: int) -> bool:
    import psutil
    from stage_attacks import new_run, push_unsigned_put, tree_bytes
    from stress_helpers import rss_bytes

    with fake_process("--token", "stage-a") as fake:
        _, creds = new_run(fake.base_url, "stage-a")
        stage = psutil.Process(fake.pid).children()[0]
        tmp = stage.cwd()
        push_unsigned_put(str(creds.endpoint), 1 << 30, MiB)  # warm the server's code paths
        before = (fake.rss(), rss_bytes(stage.pid), tree_bytes(tmp))
        pushed, statuses, connections = 0, set(), 0
        started = time.monotonic()
        while pushed < total:
            answer, sent = push_unsigned_put(str(creds.endpoint), 1 << 30, 1 << 30)
            pushed, connections = pushed + sent, connections + 1
            statuses.add(answer.split(b"\r\n", 1)[0].decode())
        after = (fake.rss(), rss_bytes(stage.pid), tree_bytes(tmp))
    growth = [(b - a) / MiB for a, b in zip(before, after, strict=True)]
    ok = growth[0] < 16 and growth[1] < 16 and after[2] == before[2]
    print(f"log stage: {connections} unauthenticated PUTs declaring 1 GiB pushed {pushed / 1e9:.2f} GB in "
          f"{time.monotonic() - started:.1f} s, answered {sorted(statuses)}: fake RSS "
          f"{before[0] / MiB:.0f} -> {after[0] / MiB:.0f} MiB, stage RSS {before[1] / MiB:.0f} -> "
          f"{after[1] / MiB:.0f} MiB, stage temp disk {before[2]} -> {after[2]} bytes: "
          f"{'OK' if ok else 'MISSED'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 result calls and a 3 s hold (a smoke run)")
    parser.add_argument("--round", choices=("first", "second", "all"), default="all",
                        help="only the first hardening round's figures, only the second's "
                             "(with bench_hardening_bounds.py), or both")
    args = parser.parse_args()
    results = []
    if args.round in ("first", "all"):
        results += [
            bench_poll_page(),
            bench_slow_bodies(3.0 if args.quick else 10.0),
            bench_chunk0(),
            bench_accounts(),
            bench_admin(),
            bench_results(200 if args.quick else 2000),
        ]
    if args.round in ("second", "all"):
        from bench_hardening_bounds import run

        results.append(bench_log_stage(120 * MiB if args.quick else 1200 * 1000 * 1000))
        results += [bench_shared_reservations(), bench_shared_inflight()]
        results += run(args.quick)
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
