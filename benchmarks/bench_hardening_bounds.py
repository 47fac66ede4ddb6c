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


def _line(ok: bool, text: str) -> bool:
    print(f"{text}: {'OK' if ok else 'MISSED'}", flush=True)
    return ok


# --- 5: deadlines ----------------------------------------------------------------------------


def bench_stalled(quick: bool) -> bool:
    head_s, body_s, every_s = ("2", "4", 1.0) if quick else ("10", "30", 20.0)
    with fake_process("--head-timeout-s", head_s, "--body-timeout-s", body_s) as fake:
        m = stalled_connections(fake, heads=200, tricklers=50, trickle_every_s=every_s, within_s=90.0)
    timed_out = m.statuses.count(408)
    ok = timed_out == 250 and m.extra["closed"] == 250 and not m.extra["probe_failures"]
    return _line(ok, f"stalled: 200 partial heads + 50 bodies at 1 byte/{every_s:g} s, --head-timeout-s {head_s} "
                     f"--body-timeout-s {body_s}: {timed_out}/250 answered 408 and closed, the last after "
                     f"{m.extra['last_closed_after_s']:.1f} s; RSS {m.rss_before / MiB:.0f} MiB +{m.growth_mib:.1f}; "
                     f"health worst {m.worst_latency_s * 1000:.0f} ms over {len(m.latencies)} probes")


def bench_idle_sockets(quick: bool) -> bool:
    n = 5_000 if quick else 20_000
    with fake_process() as fake:
        m = idle_sockets(fake, sockets=n, per_process=5_000, hold_s=3.0)
    seen = m.extra["fake_connections"]
    ok = not m.extra["probe_failures"] and seen["open"] <= seen["cap"]
    return _line(ok, f"idle sockets: {m.extra['opened']} opened in {m.extra['open_s']:.1f} s (cap {seen['cap']}): "
                     f"the fake kept {seen['open']} open, closed {seen['evicted']} for newer ones; health worst "
                     f"{m.worst_latency_s * 1000:.0f} ms over {len(m.latencies)} probes, "
                     f"{len(m.extra['probe_failures'])} failed; RSS {m.rss_before / MiB:.0f} MiB +{m.growth_mib:.1f}")


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


def bench_drip() -> bool:
    whole = json_answer({"job_id": "j1", "pad": "x" * 40})  # ~110 bytes: 55 s at the drip's pace
    with hostile(lambda r: drip(whole, 0.5)) as srv:
        started = time.monotonic()
        got, _, _ = _own_peak(lambda: _client(srv.url, call_timeout_s=3.0).get_job("j1"))
        took = time.monotonic() - started
        sent = srv.settled()
    ok = took < 6.0 and type(got).__name__ == "DeadlineExceeded"
    return _line(ok, f"drip: 1 byte/0.5 s of a {len(whole)}-byte answer, call_timeout_s=3: ended after {took:.1f} s "
                     f"with {type(got).__name__} ({sum(s.bytes for s in sent)} bytes had arrived)")


def bench_gzip_bomb() -> bool:
    whole, wire = gzip_bomb(600 * MiB)
    with hostile(lambda r: Answer(iter([whole]))) as srv:
        got, before, growth = _own_peak(lambda: _client(srv.url, retries=0).get_job("j1"))
    ok = type(got).__name__ == "AnswerTooLarge" and growth < 200
    return _line(ok, f"gzip bomb: {wire / 1e6:.2f} MB of gzip decoding to 600 MiB of JSON floats: "
                     f"{type(got).__name__}; client RSS {before:.0f} MiB, peak +{growth:.0f} MiB (bound 200)")


def bench_endless_body() -> bool:
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
    ok = type(got).__name__ == "AnswerTooBig" and "AnswerTooBig" in str(replayed.get("error"))
    return _line(ok, f"endless JSON body: raw driver {type(got).__name__} after {sent[0].bytes / MiB:.0f} MiB sent "
                     f"in {took:.1f} s (cap 1024 MiB), RSS {before:.0f} MiB peak +{growth:.0f}; replayer "
                     f"{str(replayed.get('error'))[:24]!r} after {sent[1].bytes / MiB:.0f} MiB sent")


def bench_result_pages() -> bool:
    pages = {"n": 0}

    def script(request: Any) -> Answer:
        pages["n"] += 1
        return Answer(iter([result_page("j1", "r1", pages["n"], os.urandom(MiB))]))

    with hostile(script) as srv:
        started = time.monotonic()
        got, before, growth = _own_peak(lambda: _client(srv.url, poll_first_s=0.001).wait("j1", "r1"))
        took = time.monotonic() - started
    ok = type(got).__name__ == "ResultTooLarge"
    return _line(ok, f"endless result pages (1 MiB chunk each): {type(got).__name__} after {pages['n']} pages in "
                     f"{took:.1f} s (max_result_bytes 1 GiB); client RSS {before:.0f} MiB, peak +{growth:.0f}")


# --- 7: work on the fake ---------------------------------------------------------------------


def bench_json_step() -> bool:
    with fake_process() as fake:
        over, under = float_array_on_step(fake, 59), float_array_on_step(fake, 30)
    ok = over.statuses == [413] and under.statuses == [200] and not over.extra["probe_failures"] \
        and not under.extra["probe_failures"]
    return _line(ok, f"JSON float array on /step: 59 MiB -> {over.statuses[0]} {over.extra['code']} "
                     f"(RSS +{over.growth_mib:.0f} MiB, health worst {over.worst_latency_s * 1000:.0f} ms); "
                     f"30 MiB under the bound -> {under.statuses[0]}, parsed off the loop (RSS +{under.growth_mib:.0f} "
                     f"MiB = {under.growth_mib * MiB / under.extra['bytes_sent']:.1f}x the body, health worst "
                     f"{under.worst_latency_s * 1000:.0f} ms)")


def bench_tiny(quick: bool) -> bool:
    with fake_process("--engine", "tiny") as fake:
        big = tiny_batch(fake, 1024, 1024)
        nan = _nan_advantages(fake.base_url)
    ok = big.statuses == [400] and nan[0] == 400 and nan[2] == nan[2] and abs(nan[2]) < 100
    return _line(ok, f"tiny engine: 1024x1024 forward-backward -> {big.statuses[0]} {big.extra['code']} (RSS "
                     f"{big.rss_before / MiB:.0f} MiB +{big.growth_mib:.0f}); NaN advantages -> {nan[0]} {nan[1]}, "
                     f"the next loss {nan[2]:.3f}")


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


def bench_retention() -> bool:
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
    return _line(ok, f"retention: 12 creates with a 50 MiB experiment_name -> {sorted(set(names))} (RSS "
                     f"{(after_names - before) / MiB:+.0f} MiB); 400 saves -> {saves.count(200)} taken, "
                     f"{saves.count(400)} refused 400 (RSS {(after_saves - after_names) / MiB:+.0f} MiB); 400 exports -> "
                     f"{kept} kept (RSS {(after_exports - after_saves) / MiB:+.0f} MiB)")


def run(quick: bool = False) -> list[bool]:
    return [bench_drip(), bench_gzip_bomb(), bench_result_pages(), bench_endless_body(), bench_json_step(),
            bench_tiny(quick), bench_retention(), bench_stalled(quick), bench_idle_sockets(quick)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short deadlines and 5,000 idle sockets")
    raise SystemExit(0 if all(run(parser.parse_args().quick)) else 1)
