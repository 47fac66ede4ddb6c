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
   execution-log stage, twice: the RSS of the fake and of its stage process, and the stage's
   temp disk, before, between and after. Bound: the fake < +16 MiB, the stage < +16 MiB over
   the second push (its first connections cost it its server's threads once), temp disk +0.
8. Fair shares: four accounts each declare a 2 GiB frame with one tiny
   chunk 0 (the 8 GiB server-wide budget full) and account E's 64 MiB upload still runs; one
   account trickling 18 bodies holds the 1 GiB in-flight budget, its next small body is
   refused at once (not after --body-idle-s), and another account's upload still runs.

Run: ``python benchmarks/bench_hardening.py [--quick] [--round first|second|all] [--json PATH]``
(``--quick``: 200 result calls and a 3 s hold; ``--round second``: only the second hardening
round's figures: the log stage, the fair shares, and the deadlines, readers and work bounds
in ``bench_hardening_bounds.py``; ``--json``: every attack's figures, unrounded, with the
date and the load average, the file docs/client-teams/limits.md's tables are held to).
Exits 1 when a bound is missed. Figures are printed, one line each.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Callable

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "stress")]

from bench_hardening_bounds import Figures, record  # noqa: E402
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


def bench_slow_bodies(hold_s: float) -> Figures:
    connections, declared_mib = 40, 60
    with fake_process("--body-idle-s", str(hold_s)) as fake:
        m = slow_bodies(fake, connections=connections, declared=declared_mib * MiB, hold_s=hold_s)
    timed_out = sum(1 for s in m.statuses if s == 408)
    ok = m.growth_mib < 64 and m.worst_latency_s < 0.5 and timed_out == connections and not m.extra["probe_failures"]
    return record("slow_bodies", ok, f"slow bodies: {connections} x {declared_mib} MiB declared, 1 byte sent, held "
                 f"{hold_s:g} s: RSS +{m.growth_mib:.1f} MiB (bound 64), worst /_fake/health "
                 f"{m.worst_latency_s * 1000:.0f} ms over {len(m.latencies)} probes (bound 500), "
                 f"{timed_out}/{connections} answered 408 by --body-idle-s",
                 connections=connections, declared_mib=declared_mib, bytes_sent_each=1, hold_s=hold_s,
                 rss_growth_mib=m.growth_mib, health_worst_ms=m.worst_latency_s * 1000, probes=len(m.latencies),
                 probe_failures=len(m.extra["probe_failures"]), answered_408=timed_out)


def bench_chunk0() -> Figures:
    requests_n, frame_mib = 50, 40
    with fake_process() as fake:
        m = chunk0_amplification(fake, requests_n=requests_n, frame_size=frame_mib * MiB)
    accepted = sum(1 for s in m.statuses if s == 202)
    ok = m.growth_mib < 64 and m.worst_latency_s < 0.5 and not m.extra["probe_failures"]
    return record("chunk0", ok, f"chunk-0 amplification: {requests_n} chunk 0s declaring {frame_mib} MiB "
                 f"({m.extra['bytes_sent']} bytes sent, {accepted} accepted): RSS +{m.growth_mib:.1f} MiB (bound 64), "
                 f"worst poll meanwhile {m.worst_latency_s * 1000:.0f} ms over {len(m.latencies)} polls (bound 500)",
                 requests=requests_n, payload_bytes=1, frame_mib=frame_mib, bytes_sent=m.extra["bytes_sent"],
                 accepted=accepted, rss_growth_mib=m.growth_mib, poll_worst_ms=m.worst_latency_s * 1000,
                 polls=len(m.latencies), probe_failures=len(m.extra["probe_failures"]))


def bench_accounts() -> Figures:
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
    return record("accounts", ok, f"accounts: token A's chunk 0s answered {codes} (cap 3 per account); token B's "
                 f"forward-backward in {chunks} chunks ran in {took * 1000:.0f} ms",
                 a_statuses=codes, b_chunks=chunks, b_ran="avg_loss" in result, b_ms=took * 1000)


def bench_results(calls: int) -> Figures:
    with fake_process() as fake:
        m = results_loop(fake, calls=calls)
    ok = m.growth_mib < 300 and m.extra["job_status"] == "running"
    samples = m.extra["growth_samples_mib"]
    rows, cols = m.extra["result_shape"]
    return record("results", ok, f"results: {calls} forward-no-grad calls, {m.extra['result_shape']} float32 results "
                 f"(1 MiB) read to the end, {m.extra['seconds']:.0f} s: RSS {m.rss_before / MiB:.0f} MiB at the start, "
                 f"peak +{m.growth_mib:.1f} MiB (bound 300), last sample +{samples[-1]:.1f} MiB, job still "
                 f"{m.extra['job_status']}",
                 calls=calls, result_mib=rows * cols * 4 / MiB, seconds=m.extra["seconds"],
                 rss_start_mib=m.rss_before / MiB, peak_growth_mib=m.growth_mib, last_growth_mib=samples[-1],
                 job_status=m.extra["job_status"])


def bench_admin() -> Figures:
    with fake_process("--token", "A", "--token", "B", "--admin-token", "Z") as fake:
        base = fake.base_url
        routes = [("GET", "health"), ("GET", "state"), ("GET", "variations"), ("GET", "faults"), ("PUT", "faults"),
                  ("POST", "faults"), ("DELETE", "faults"), ("POST", "jobs/x/state"), ("POST", "reset")]
        seen: dict[str, set[int]] = {"A": set(), "B": set(), "Z": set()}
        for method, path in routes:
            body: dict[str, list[str]] | None = {"rules": []} if path == "faults" and method in ("PUT", "POST") else None
            for token in ("A", "B", "Z"):
                if token == "Z" and path == "jobs/x/state":
                    continue  # no such job: 404 with the admin token
                r = requests.request(method, f"{base}/_fake/{path}", json=body, timeout=30,
                                     headers={"Authorization": f"Bearer {token}"})
                seen[token].add(r.status_code)
    ok = seen["A"] == seen["B"] == {403} and seen["Z"] == {200}
    return record("admin", ok, f"admin: {len(routes)} admin routes; token A answered {sorted(seen['A'])}, "
                 f"B {sorted(seen['B'])}, admin token Z {sorted(seen['Z'])}",
                 routes=len(routes), a_statuses=sorted(seen["A"]), b_statuses=sorted(seen["B"]),
                 z_statuses=sorted(seen["Z"]))


def bench_shared_reservations() -> Figures:
    """Fair shares: four accounts each send one chunk 0 (~460 bytes) declaring a 2 GiB
    frame, filling the 8 GiB server-wide chunk budget; account E's upload must still run."""
    from share_attacks import reservations

    accounts, frame_mib, upload_mib = ["A", "B", "C", "D"], 2048, 64
    args = [arg for t in [*accounts, "E"] for arg in ("--token", t)] + ["--admin-token", "Z"]
    with fake_process(*args) as fake:
        started = time.monotonic()
        m = reservations(fake, accounts=accounts, frame_size=frame_mib * MiB, victim="E",
                         upload_bytes=upload_mib * MiB, chunk_bytes=16 * MiB)
        took = time.monotonic() - started
        reclaimed = Admin(fake.base_url, "Z").budgets()["reclaimed_chunk_groups"]
    ok = m.statuses == [202] * 4 and "avg_loss" in m.extra["result"] and m.growth_mib < upload_mib * 2.3
    chunk_bytes = m.extra["sent_bytes"] // len(accounts)
    return record("shared_reservations", ok, f"shared reservations: {len(accounts)} accounts x 1 chunk 0 of "
                 f"{chunk_bytes} bytes declaring 2 GiB (8 GiB of the 8 GiB budget) answered {m.statuses}; account "
                 f"E's {upload_mib} MiB upload ran ({took:.1f} s for all), {reclaimed} idle group reclaimed, whose "
                 f"next chunk answered {sorted(set(m.extra['next_chunk_codes']))}; RSS +{m.growth_mib:.0f} MiB at "
                 f"peak (E's frame: {upload_mib})",
                 accounts=len(accounts), chunk0_bytes=chunk_bytes, frame_gib=frame_mib / 1024,
                 statuses=m.statuses, upload_mib=upload_mib, upload_ran="avg_loss" in m.extra["result"],
                 seconds=took, reclaimed=reclaimed, next_chunk_codes=sorted(set(m.extra["next_chunk_codes"])),
                 peak_growth_mib=m.growth_mib)


def bench_shared_inflight() -> Figures:
    """Fair shares: one account trickling 18 chunk bodies holds the 1 GiB in-flight
    budget; its next (small, fully sent) body must be refused at once, not after the 30 s
    --body-idle-s, and another account's upload must still run."""
    from share_attacks import trickled_bodies

    bodies = 18
    with fake_process("--token", "A", "--token", "B", "--admin-token", "Z") as fake:
        sent = (1024 * MiB - 64 * 1024) // bodies
        m = trickled_bodies(fake, Admin(fake.base_url, "Z"), holder="A", other="B", bodies=bodies,
                            body_bytes=60 * MiB - 8192, sent_bytes=sent)
    status, code, seconds = m.extra["late_refusal"]
    ok = (status, code) == (503, "unavailable") and seconds < 5 and "avg_loss" in m.extra["result"] \
        and m.extra["evicted"] >= 1
    return record("shared_inflight", ok, f"shared in-flight budget: account A trickles {bodies} bodies "
                 f"({bodies * sent / MiB:.0f} MiB of the 1024 MiB budget sent, fake RSS "
                 f"+{(m.extra['rss_held'] - m.rss_before) / MiB:.0f} MiB); A's next 128 KiB body answered {status} "
                 f"{code} in {seconds * 1000:.0f} ms (--body-idle-s 30); account B's upload ran, {m.extra['evicted']} "
                 f"of A's bodies dropped for it (answered {sorted(set(m.statuses))} on their next byte); RSS after "
                 f"{(m.rss_after - m.rss_before) / MiB:+.0f} MiB",
                 bodies=bodies, sent_mib=bodies * sent / MiB, held_growth_mib=(m.extra["rss_held"] - m.rss_before) / MiB,
                 late_body_kib=128, late_status=status, late_code=code, late_ms=seconds * 1000,
                 other_ran="avg_loss" in m.extra["result"], evicted=m.extra["evicted"],
                 evicted_statuses=sorted(set(m.statuses)), growth_after_mib=(m.rss_after - m.rss_before) / MiB)


def bench_poll_page() -> Figures:
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
    return record("poll_page", ok, f"poll page: {len(events)} result_chunk events, {size / MiB:.1f} MiB of JSON: built "
                 f"with {now / size:.2f}x its size in transient memory (re-serialising dicts: {before / size:.2f}x)",
                 events=len(events), page_mib=size / MiB, spliced_over_page=now / size,
                 reserialised_over_page=before / size)


def settled_rss(read: Callable[[], int], tries: int = 10) -> int:
    """An RSS once two readings a second apart agree within 1 MiB (lazy imports and the
    stage's start-up done), or the last of ``tries`` readings."""
    last = read()
    for _ in range(tries):
        time.sleep(1.0)
        now = read()
        if abs(now - last) < MiB:
            return now
        last = now
    return last


def bench_log_stage(total: int) -> Figures:
    """Unsigned PUTs at the stage, ``total`` bytes pushed twice: the stage's first
    connections cost it some memory once (its server's threads), so the bound is on the
    second push: the stage's RSS does not follow the bytes. The fake's RSS over both."""
    import psutil
    from stage_attacks import new_run, push_unsigned_put, tree_bytes, warm_stage
    from stress_helpers import rss_bytes

    def push() -> tuple[int, int, set[str]]:
        pushed, connections, statuses = 0, 0, set()
        while pushed < total:
            answer, sent = push_unsigned_put(str(creds.endpoint), 1 << 30, 1 << 30)
            pushed, connections = pushed + sent, connections + 1
            statuses.add(answer.split(b"\r\n", 1)[0].decode())
        return pushed, connections, statuses

    with fake_process("--token", "stage-a") as fake:
        _, creds = new_run(fake.base_url, "stage-a")
        stage = psutil.Process(fake.pid).children()[0]
        tmp = stage.cwd()
        warm_stage(creds)  # as tests/stress/test_log_stage.py does, then the unsigned path
        push_unsigned_put(str(creds.endpoint), 1 << 30, MiB)
        settled_rss(fake.rss), settled_rss(lambda: rss_bytes(stage.pid))
        before = (fake.rss(), rss_bytes(stage.pid), tree_bytes(tmp))
        started = time.monotonic()
        pushed, connections, statuses = push()
        took = time.monotonic() - started
        middle = (fake.rss(), rss_bytes(stage.pid), tree_bytes(tmp))
        again, connections_again, statuses_again = push()
        after = (fake.rss(), rss_bytes(stage.pid), tree_bytes(tmp))
    fake_rss, stage_rss = [[x[i] / MiB for x in (before, middle, after)] for i in (0, 1)]
    ok = fake_rss[2] - fake_rss[0] < 16 and stage_rss[2] - stage_rss[1] < 16 and after[2] == before[2]
    answers = sorted(statuses | statuses_again)
    return record("log_stage", ok, f"log stage: {connections} unauthenticated PUTs declaring 1 GiB pushed "
                  f"{pushed / 1e9:.2f} GB in {took:.1f} s, then {connections_again} more {again / 1e9:.2f} GB, "
                  f"answered {answers}: fake RSS {' -> '.join(f'{x:.0f}' for x in fake_rss)} MiB (bound +16), stage "
                  f"RSS {' -> '.join(f'{x:.0f}' for x in stage_rss)} MiB (bound +16 over the second push), stage "
                  f"temp disk {before[2]} -> {after[2]} bytes",
                  declared_gib=1, pushed_gb=pushed / 1e9, connections=connections, seconds=took,
                  pushed_again_gb=again / 1e9, connections_again=connections_again, answers=answers,
                  fake_rss_mib=fake_rss, stage_rss_mib=stage_rss, temp_disk_growth_bytes=after[2] - before[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 result calls and a 3 s hold (a smoke run)")
    parser.add_argument("--round", choices=("first", "second", "all"), default="all",
                        help="only the first hardening round's figures, only the second's "
                             "(with bench_hardening_bounds.py), or both")
    parser.add_argument("--json", metavar="PATH",
                        help="also write every attack's figures (unrounded), the date and the load average to PATH")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results: list[Figures] = []
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
    ok = all(f["ok"] for f in results)
    if args.json:
        measured = {"date": datetime.date.today().isoformat(), "cpus": os.cpu_count(),
                    "load_average_1min_before": load_before, "load_average_1min_after": os.getloadavg()[0]}
        document = {"command": " ".join(["python benchmarks/bench_hardening.py", *sys.argv[1:]]), "ok": ok,
                    "quick": args.quick, "round": args.round, "measured": measured,
                    "attacks": {f.pop("attack"): f for f in results}}
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=1)
            out.write("\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
