"""The second hardening round's deadlines, readers and work bounds, at the full sizes (run by
``benchmarks/bench_hardening.py --round second``, or alone).

5. Deadlines: 200 partial heads and 50 bodies trickling a byte every 20 s against
   ``--body-timeout-s 30``: when each is closed and with what; 20,000 idle sockets: the
   worst ``/_fake/health`` latency meanwhile and what the cap did.
6. Readers: the client against a 1-byte-per-0.5 s drip with ``call_timeout_s=3``; a
   0.6 MB gzip of JSON floats decoding to 600 MiB; the suite's raw driver and the parity
   replayer against an endless JSON body; endless valid result pages.
7. Work: a 59 MiB JSON float array on /step (and a 30 MiB one under the value bound), a
   1024x1024 tiny forward-backward, NaN advantages, 12 creates with a 50 MiB
   experiment_name, 400 saves and 400 exports.

Each prints one line with its figures and OK/MISSED against the bound it names.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "stress")]

from deadline_attacks import idle_sockets, stalled_connections  # noqa: E402
from hostile_server import Answer, drip, endless_json, gzip_bomb, hostile, json_answer, result_page  # noqa: E402
from stress_helpers import PeakSampler, fake_process, job_body, service_prefix  # noqa: E402
from work_attacks import float_array_on_step, tiny_batch  # noqa: E402

MiB = 1024 * 1024


#: One attack's figures as ``--json`` writes them: ``ok`` (its bound held) and what it
#: measured, in the units its line prints (MiB, ms, s), unrounded.
Figures = dict[str, Any]


def record(name: str, ok: bool, text: str, **figures: Any) -> Figures:
    print(f"{text}: {'OK' if ok else 'MISSED'}", flush=True)
    return {"attack": name, "ok": ok, **figures}


# --- 5: deadlines ----------------------------------------------------------------------------


def bench_stalled(quick: bool) -> Figures:
    head_s, body_s, every_s = ("2", "4", 1.0) if quick else ("10", "30", 20.0)
    with fake_process("--head-timeout-s", head_s, "--body-timeout-s", body_s) as fake:
        m = stalled_connections(fake, heads=200, tricklers=50, trickle_every_s=every_s, within_s=90.0)
    timed_out = m.statuses.count(408)
    ok = timed_out == 250 and m.extra["closed"] == 250 and not m.extra["probe_failures"]
    return record("stalled", ok, f"stalled: 200 partial heads + 50 bodies at 1 byte/{every_s:g} s, --head-timeout-s {head_s} "
                     f"--body-timeout-s {body_s}: {timed_out}/250 answered 408 and closed, the last after "
                     f"{m.extra['last_closed_after_s']:.1f} s; RSS {m.rss_before / MiB:.0f} MiB +{m.growth_mib:.1f}; "
                     f"health worst {m.worst_latency_s * 1000:.0f} ms over {len(m.latencies)} probes",
                 heads=200, tricklers=50, trickle_every_s=every_s, head_timeout_s=float(head_s),
                 body_timeout_s=float(body_s), answered_408=timed_out, closed=m.extra["closed"],
                 last_closed_after_s=m.extra["last_closed_after_s"], rss_start_mib=m.rss_before / MiB,
                 rss_growth_mib=m.growth_mib, health_worst_ms=m.worst_latency_s * 1000, probes=len(m.latencies),
                 probe_failures=len(m.extra["probe_failures"]))


def bench_idle_sockets(quick: bool) -> Figures:
    n = 5_000 if quick else 20_000
    with fake_process() as fake:
        m = idle_sockets(fake, sockets=n, per_process=5_000, hold_s=3.0)
    seen = m.extra["fake_connections"]
    ok = not m.extra["probe_failures"] and seen["open"] <= seen["cap"]
    return record("idle_sockets", ok, f"idle sockets: {m.extra['opened']} opened in {m.extra['open_s']:.1f} s (cap {seen['cap']}): "
                     f"the fake kept {seen['open']} open, closed {seen['evicted']} for newer ones; health worst "
                     f"{m.worst_latency_s * 1000:.0f} ms over {len(m.latencies)} probes, "
                     f"{len(m.extra['probe_failures'])} failed; RSS {m.rss_before / MiB:.0f} MiB +{m.growth_mib:.1f}",
                 sockets=n, opened=m.extra["opened"], open_s=m.extra["open_s"], cap=seen["cap"], kept_open=seen["open"],
                 evicted=seen["evicted"], health_worst_s=m.worst_latency_s, probes=len(m.latencies),
                 probe_failures=len(m.extra["probe_failures"]), rss_start_mib=m.rss_before / MiB,
                 rss_growth_mib=m.growth_mib)


# --- 6: readers ------------------------------------------------------------------------------


def _own_peak(run: Callable[[], Any]) -> tuple[Any, float, float]:
    """(what ``run`` returned or raised, this process's RSS before in MiB, peak growth in MiB)."""
    import psutil

    before = psutil.Process().memory_info().rss
    with PeakSampler(os.getpid(), every_s=0.01) as sampler:
        try:
            got: Any = run()
        except Exception as exc:
            got = exc
    return got, before / MiB, (sampler.peak - before) / MiB


def _client(url: str, **cfg: Any) -> Any:
    from client.config import ClientConfig
    from client.rest import CortexRestClient

    return CortexRestClient(ClientConfig(base_url=url, database="DB", schema="SC", backoff_first_s=0.01, **cfg))


def bench_drip() -> Figures:
    whole = json_answer({"job_id": "j1", "pad": "x" * 40})  # ~110 bytes: 55 s at the drip's pace
    with hostile(lambda r: drip(whole, 0.5)) as srv:
        started = time.monotonic()
        got, _, _ = _own_peak(lambda: _client(srv.url, call_timeout_s=3.0).get_job("j1"))
        took = time.monotonic() - started
        sent = srv.settled()
    ok = took < 6.0 and type(got).__name__ == "DeadlineExceeded"
    return record("drip", ok, f"drip: 1 byte/0.5 s of a {len(whole)}-byte answer, call_timeout_s=3: ended after {took:.1f} s "
                     f"with {type(got).__name__} ({sum(s.bytes for s in sent)} bytes had arrived)",
                 seconds_per_byte=0.5, call_timeout_s=3.0, answer_bytes=len(whole), ended_after_s=took,
                 raised=type(got).__name__, bytes_arrived=sum(s.bytes for s in sent))


def bench_gzip_bomb() -> Figures:
    whole, wire = gzip_bomb(600 * MiB)
    with hostile(lambda r: Answer(iter([whole]))) as srv:
        got, before, growth = _own_peak(lambda: _client(srv.url, retries=0).get_job("j1"))
    ok = type(got).__name__ == "AnswerTooLarge" and growth < 200
    return record("gzip_bomb", ok, f"gzip bomb: {wire / 1e6:.2f} MB of gzip decoding to 600 MiB of JSON floats: "
                     f"{type(got).__name__}; client RSS {before:.0f} MiB, peak +{growth:.0f} MiB (bound 200)",
                 gzip_mb=wire / 1e6, decoded_mib=600, raised=type(got).__name__, client_rss_start_mib=before,
                 client_peak_growth_mib=growth)


def bench_endless_body() -> Figures:
    from conformance.drivers.raw import RawDriver
    from conformance.parity.replay import Replayer
    from conformance.parity.targets import ReplayTarget
    from conformance.target import Target

    with hostile(lambda r: endless_json(1 << 20)) as srv:
        driver = RawDriver(Target(srv.url, "DB", "SC", "e", "proposed"))
        started = time.monotonic()
        got, before, growth = _own_peak(lambda: driver.send("GET", srv.url + "/x"))
        took = time.monotonic() - started
        replayed, _, _ = _own_peak(
            lambda: Replayer([]).send(ReplayTarget(srv.url, (), "/p"), {"method": "GET", "path": "/p/x", "headers": {}}, None))
        sent = srv.settled()
    # The raw driver judges an overlong answer (red, OverlongAnswer); the replayer's bounded
    # session raises the client's AnswerTooBig.
    ok = type(got).__name__ == "OverlongAnswer" and "AnswerTooBig" in str(replayed.get("error"))
    return record("endless_body", ok, f"endless JSON body: raw driver {type(got).__name__} after {sent[0].bytes / MiB:.0f} MiB sent "
                     f"in {took:.1f} s (cap 1024 MiB), RSS {before:.0f} MiB peak +{growth:.0f}; replayer "
                     f"{str(replayed.get('error'))[:24]!r} after {sent[1].bytes / MiB:.0f} MiB sent",
                 raised=type(got).__name__, driver_sent_mib=sent[0].bytes / MiB, driver_s=took,
                 rss_start_mib=before, peak_growth_mib=growth, replayer_error=str(replayed.get("error"))[:80],
                 replayer_sent_mib=sent[1].bytes / MiB)


def bench_result_pages() -> Figures:
    pages = {"n": 0}

    def script(request: Any) -> Answer:
        pages["n"] += 1
        return Answer(iter([result_page("j1", "r1", pages["n"], os.urandom(MiB))]))

    with hostile(script) as srv:
        started = time.monotonic()
        got, before, growth = _own_peak(lambda: _client(srv.url, poll_first_s=0.001).wait("j1", "r1"))
        took = time.monotonic() - started
    ok = type(got).__name__ == "ResultTooLarge"
    return record("result_pages", ok, f"endless result pages (1 MiB chunk each): {type(got).__name__} after {pages['n']} pages in "
                     f"{took:.1f} s (max_result_bytes 1 GiB); client RSS {before:.0f} MiB, peak +{growth:.0f}",
                 chunk_mib=1, raised=type(got).__name__, pages=pages["n"], seconds=took, client_rss_start_mib=before,
                 client_peak_growth_mib=growth)


# --- 7: work on the fake ---------------------------------------------------------------------


def bench_json_step() -> Figures:
    over_mib, under_mib = 59, 30
    with fake_process() as fake:
        over, under = float_array_on_step(fake, over_mib), float_array_on_step(fake, under_mib)
    ok = over.statuses == [413] and under.statuses == [200] and not over.extra["probe_failures"] \
        and not under.extra["probe_failures"]
    return record("json_step", ok, f"JSON float array on /step: {over_mib} MiB -> {over.statuses[0]} {over.extra['code']} "
                     f"(RSS +{over.growth_mib:.0f} MiB, health worst {over.worst_latency_s * 1000:.0f} ms); "
                     f"{under_mib} MiB under the bound -> {under.statuses[0]}, parsed off the loop (RSS +{under.growth_mib:.0f} "
                     f"MiB = {under.growth_mib * MiB / under.extra['bytes_sent']:.1f}x the body, health worst "
                     f"{under.worst_latency_s * 1000:.0f} ms)",
                 over_mib=over_mib, over_status=over.statuses[0], over_code=over.extra["code"],
                 over_rss_growth_mib=over.growth_mib, over_health_worst_ms=over.worst_latency_s * 1000,
                 under_mib=under_mib, under_status=under.statuses[0], under_rss_growth_mib=under.growth_mib,
                 under_growth_over_body=under.growth_mib * MiB / under.extra["bytes_sent"],
                 under_health_worst_ms=under.worst_latency_s * 1000)


def bench_tiny(quick: bool) -> Figures:
    with fake_process("--engine", "tiny") as fake:
        big = tiny_batch(fake, 1024, 1024)
        nan = _nan_advantages(fake.base_url)
    ok = big.statuses == [400] and nan[0] == 400 and nan[2] == nan[2] and abs(nan[2]) < 100
    return record("tiny", ok, f"tiny engine: 1024x1024 forward-backward -> {big.statuses[0]} {big.extra['code']} (RSS "
                     f"{big.rss_before / MiB:.0f} MiB +{big.growth_mib:.0f}); NaN advantages -> {nan[0]} {nan[1]}, "
                     f"the next loss {nan[2]:.3f}",
                 rows=1024, cols=1024, big_status=big.statuses[0], big_code=big.extra["code"],
                 big_rss_start_mib=big.rss_before / MiB, big_rss_growth_mib=big.growth_mib, nan_status=nan[0],
                 nan_code=nan[1], next_loss=nan[2])


def _nan_advantages(base_url: str) -> tuple[int, str, float]:
    import torch

    from contract import wire

    job = requests.post(service_prefix(base_url) + "/", json=job_body(1), timeout=60).json()["job_id"]
    url = service_prefix(base_url) + f"/{job}/forward-backward"

    def send(obj: Any) -> requests.Response:
        frame = wire.dumps(obj)
        chunk, = wire.encode_byte_chunks(frame, "request", operation="forward_backward", force_chunk=True)
        return requests.post(url, data=chunk, headers={"Content-Type": "application/octet-stream"}, timeout=60)

    ids = torch.randint(0, 256, (4, 16))
    bad = send({"args": [], "kwargs": {"input_ids": ids, "advantages": torch.tensor([1.0, float("nan"), 1, 1])},
                "processing": {"loss_fn": "grpo"}})
    rid = send({"args": [], "kwargs": {"input_ids": ids, "labels": ids}}).json()["request_id"]
    while (page := requests.get(service_prefix(base_url) + f"/{job}/requests/{rid}", timeout=60).json())["status"] != "done":
        time.sleep(0.05)
    return bad.status_code, bad.json()["code"], float(page["result"]["avg_loss"])


def bench_retention() -> Figures:
    with fake_process("--engine", "tiny") as fake:
        base = service_prefix(fake.base_url)
        job = requests.post(base + "/", json=job_body(1), timeout=60).json()["job_id"]  # the engine loads
        before = fake.rss()
        names = [requests.post(base + "/", json={**job_body(1), "experiment_name": "e" * (50 * MiB)}, timeout=120)
                 .status_code for _ in range(12)]
        after_names = fake.rss()
        saves = [requests.post(base + f"/{job}/save", json={"checkpoint_id": f"c{i}"}, timeout=60).status_code
                 for i in range(400)]
        time.sleep(2.0)
        after_saves = fake.rss()
        exported = [requests.post(base + f"/{job}/checkpoints/c0:export", timeout=60).status_code
                    for _ in range(400)]
        after_exports = fake.rss()
        kept = requests.get(fake.base_url + "/_fake/state", timeout=60).json()["exports"]
    ok = set(names) == {400} and saves.count(200) == 64 and set(exported) == {200} and kept == 16
    return record("retention", ok, f"retention: 12 creates with a 50 MiB experiment_name -> {sorted(set(names))} (RSS "
                     f"{(after_names - before) / MiB:+.0f} MiB); 400 saves -> {saves.count(200)} taken, "
                     f"{saves.count(400)} refused 400 (RSS {(after_saves - after_names) / MiB:+.0f} MiB); 400 exports -> "
                     f"{kept} kept (RSS {(after_exports - after_saves) / MiB:+.0f} MiB)",
                 creates=len(names), experiment_name_mib=50, create_statuses=sorted(set(names)),
                 creates_rss_growth_mib=(after_names - before) / MiB, saves=len(saves), saves_taken=saves.count(200),
                 saves_refused=saves.count(400), saves_rss_growth_mib=(after_saves - after_names) / MiB,
                 exports=len(exported), exports_kept=kept, exports_rss_growth_mib=(after_exports - after_saves) / MiB)


def run(quick: bool = False) -> list[Figures]:
    return [bench_drip(), bench_gzip_bomb(), bench_result_pages(), bench_endless_body(), bench_json_step(),
            bench_tiny(quick), bench_retention(), bench_stalled(quick), bench_idle_sockets(quick)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short deadlines and 5,000 idle sockets")
    raise SystemExit(0 if all(f["ok"] for f in run(parser.parse_args().quick)) else 1)
