"""Big forward-backward uploads and the small-call path, side by side in one process tree.

Servers (each its own subprocess): the fake of this tree, a bare Starlette app whose routes
only read the body (``/sink``) or answer a fixed poll (``/poll``), and with ``--baseline
TREE`` the fake of another checkout (say today's main, from ``git archive``). Every client
runs in a process of its own, started fresh for each measurement:

* upload, for each ``--sizes`` (MiB, default 64 and 512), of the same frame bytes (an int64
  ``input_ids`` batch): the kit's ``CortexRestClient.forward_backward`` (also given the
  batch as tensors, encoding included), a bare ``requests`` loop of sequential 60 MiB POSTs
  of the same bytes to ``/sink``, the baseline tree's client against the baseline fake, and
  ``--reference module:function`` when importable (any client: see ``reference_upload``
  below for what the function gets). After one warm-up call, one timed call until its
  request id is back. Printed: MiB/s, the ratio to the bare loop of the same run, the
  client process's peak RSS over the frame (its RSS before the frame was built counted
  out), the server's peak RSS over the frame above its idle RSS (sampled until the
  request is done), and the CPU seconds per GiB each of the two processes spent until the
  request id was back (user + system, every thread): on a shared machine wall-clock follows
  the neighbours' load, CPU time much less, so it is the figure to judge a change by.
  Below each table: the frame's sha256 timed alone in the kit's worker (staged through a
  scratch buffer as the kit hashes, and in place), and the bare loop's ratio had it hashed
  the frame first (what the kit's ratio reaches if all else matched).
* the small-call path: create a job, ``--calls`` forward-backward calls of ``--small-kib``
  KiB each waited to their result, one step waited: calls per second, against the same
  number of exchanges (one POST of the same bytes and one poll per call) to the bare
  routes; with ``--baseline`` the baseline tree's figures beside, so "no slower than
  today" is a ratio of ratios measured in the same run.

Every figure is the median of ``--runs`` rounds (default 3; ``--small-runs``, default 6,
for the small-call path) with its range; the rounds interleave the clients, each round starting
with the next one (the small-call stacks in alternating order), so load from elsewhere and
what one client leaves behind hit all alike. Targets: 512
MiB at least 0.8x the bare loop, client peak at most 1.3x and fake peak at most 1.3x the
frame; 64 MiB at least 0.7x; the small-call path no slower than the baseline.

Run: ``python benchmarks/bench_upload.py [--quick] [--baseline /tmp/main-tree]
[--reference mypkg.adapter:upload]``. Absolute numbers depend on the machine and its load;
read the ratios.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

MiB = 1024 * 1024
GiB = 1024 * MiB
DB, SCHEMA = "BENCH", "PUBLIC"
SEQ = 16384
OCTET = {"Content-Type": "application/octet-stream"}
JOB = {"sub_job_configs": [{"job_type": "training", "model_name": "Qwen/Qwen3-0.6B", "training_config": {
    "optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": SEQ, "train_batch_size": 8, "n_gpus": 1}}]}


# --- in a client process ------------------------------------------------------------------------


class Peak:
    """Samples processes' RSS every couple of milliseconds while in a ``with`` block."""

    def __init__(self, *pids: int) -> None:
        self.procs = [psutil.Process(pid) for pid in pids]
        self.peaks = [p.memory_info().rss for p in self.procs]
        #: CPU seconds (user + system, every thread) each process spent inside the block.
        self.cpu = [0.0 for _ in self.procs]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        self.peaks = [max(peak, p.memory_info().rss) for peak, p in zip(self.peaks, self.procs, strict=True)]

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            self._sample()

    def _cpu(self) -> list[float]:
        return [sum(p.cpu_times()[:2]) for p in self.procs]

    def __enter__(self) -> Peak:
        self._cpu0 = self._cpu()
        self._thread.start()
        return self

    def stop_cpu(self) -> None:
        """The CPU seconds so far are the measured ones (what follows is waiting for the result)."""
        self.cpu = [now - then for now, then in zip(self._cpu(), self._cpu0, strict=True)]

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def batch(size_mib: int) -> dict[str, Any]:
    """The forward-backward batch every client sends: int64 ids, ``size_mib`` MiB."""
    import torch

    rows = max(1, size_mib * MiB // (SEQ * 8))
    ids = torch.arange(rows * SEQ, dtype=torch.int64).reshape(rows, SEQ) % 151_000
    return {"args": [], "kwargs": {"input_ids": ids}}


def frame_of(size_mib: int) -> bytes:
    from contract import wire

    return wire.dumps(batch(size_mib), metadata=wire.standard_request_metadata())


def kit_client(url: str) -> Any:
    from client.config import ClientConfig
    from client.rest import CortexRestClient

    return CortexRestClient(ClientConfig(base_url=url, database=DB, schema_name=SCHEMA, poll_first_s=0.002,
                                         poll_cap_s=0.01, call_timeout_s=600.0, read_timeout_s=600.0))


def idle_rss(pid: int) -> int:
    ps = psutil.Process(pid)
    values = []
    for _ in range(5):
        values.append(ps.memory_info().rss)
        time.sleep(0.05)
    return min(values)


def frame_size(payload: Any) -> int:
    from contract import wire

    if isinstance(payload, bytes):
        return len(payload)
    return wire.dumps_parts(payload, metadata=wire.standard_request_metadata()).size


def baseline_rss() -> int:
    """The client process's RSS before the frame exists: torch, the codec and the clients
    imported (every worker imports the same), nothing built yet."""
    import requests  # noqa: F401
    import torch  # noqa: F401

    import client.rest  # noqa: F401
    from contract import wire  # noqa: F401

    return int(psutil.Process().memory_info().rss)


def measure_kit(args: argparse.Namespace, as_tensors: bool) -> dict[str, Any]:
    """One warm-up, then one timed ``forward_backward`` of the frame (or the batch)."""
    rss0 = baseline_rss()
    payload: Any = batch(args.size) if as_tensors else frame_of(args.size)
    client = kit_client(args.url)
    job = client.create_job(JOB)["job_id"]
    client.wait_running(job)
    client.wait(job, client.forward_backward(job, payload)["request_id"])
    idle = idle_rss(args.server_pid)
    with Peak(os.getpid(), args.server_pid) as peak:
        started = time.perf_counter()
        rid = client.forward_backward(job, payload)["request_id"]
        seconds = time.perf_counter() - started
        peak.stop_cpu()
        client.wait(job, rid)
    return {"seconds": seconds, "rss0": rss0, "client_peak": peak.peaks[0], "server_idle": idle,
            "server_peak": peak.peaks[1], "frame": frame_size(payload), "cpu": peak.cpu,
            "sha256_s": sha256_seconds(payload)}


def sha256_seconds(payload: Any) -> dict[str, float]:
    """How long the frame's sha256 alone takes here, now, the kit's way (``sha256_hex``:
    staged through a scratch buffer) and hashed in place: every chunk header carries it
    (spec §9.3), so a client computes it before chunk 0 can go."""
    import hashlib

    from contract import wire

    def in_place(parts: Any) -> str:
        hasher = hashlib.sha256()
        for part in parts:
            hasher.update(part)
        return hasher.hexdigest()

    try:
        from contract.wire.basics import sha256_hex
    except ImportError:  # a baseline tree from before the staged hash hashes in place
        sha256_hex = in_place
    parts = (payload,) if isinstance(payload, bytes) else wire.dumps_parts(
        payload, metadata=wire.standard_request_metadata()).parts
    seconds = {}
    for name, digest in (("staged", sha256_hex), ("in_place", in_place)):
        started = time.perf_counter()
        digest(parts)
        seconds[name] = time.perf_counter() - started
    return seconds


def measure_bare(args: argparse.Namespace) -> dict[str, Any]:
    """Sequential 60 MiB POSTs of the frame's bytes to a route that reads the body."""
    import requests

    rss0 = baseline_rss()
    frame = memoryview(frame_of(args.size))
    session = requests.Session()

    def send() -> None:
        for start in range(0, len(frame), 60 * MiB):
            # A view, not a copy: requests sends any buffer (its stubs name only bytes).
            answer = session.post(args.url + "/sink", data=frame[start : start + 60 * MiB],  # type: ignore[arg-type]
                                  headers=OCTET)
            answer.raise_for_status()

    send()
    idle = idle_rss(args.server_pid)
    with Peak(os.getpid(), args.server_pid) as peak:
        started = time.perf_counter()
        send()
        seconds = time.perf_counter() - started
        peak.stop_cpu()
    return {"seconds": seconds, "rss0": rss0, "client_peak": peak.peaks[0], "server_idle": idle,
            "server_peak": peak.peaks[1], "frame": len(frame), "cpu": peak.cpu}


def reference_upload(args: argparse.Namespace) -> dict[str, Any]:
    """``--reference module:function``: the function gets ``(target, frame)`` and returns once
    the final chunk's request id is back. ``target`` holds ``base_url``, ``database``,
    ``schema``, ``service_url`` (base plus the service prefix) and ``job_id`` (a running job)."""
    import importlib

    from contract.routes import prefix

    module, _, name = args.reference.partition(":")
    upload: Callable[[dict[str, Any], bytes], Any] = getattr(importlib.import_module(module), name)
    rss0 = baseline_rss()
    frame = frame_of(args.size)
    client = kit_client(args.url)  # only to create the job the reference client uploads to
    job = client.create_job(JOB)["job_id"]
    client.wait_running(job)
    target = {"base_url": args.url, "database": DB, "schema": SCHEMA, "job_id": job,
              "service_url": args.url + prefix(DB, SCHEMA)}
    upload(target, frame)
    idle = idle_rss(args.server_pid)
    with Peak(os.getpid(), args.server_pid) as peak:
        started = time.perf_counter()
        upload(target, frame)
        seconds = time.perf_counter() - started
        peak.stop_cpu()
    return {"seconds": seconds, "rss0": rss0, "client_peak": peak.peaks[0], "server_idle": idle,
            "server_peak": peak.peaks[1], "frame": len(frame), "cpu": peak.cpu}


def small_kit(args: argparse.Namespace) -> dict[str, Any]:
    """create, ``calls`` forward-backward calls of ``small_kib`` KiB each waited, one step."""
    import torch

    payload = {"args": [], "kwargs": {"input_ids": torch.ones(8, args.small_kib * 1024 // 64, dtype=torch.int64)}}
    client = kit_client(args.url)
    warm = client.create_job(JOB)["job_id"]
    client.wait_running(warm)
    client.wait(warm, client.forward_backward(warm, payload)["request_id"])
    started = time.perf_counter()
    job = client.create_job(JOB)["job_id"]
    client.wait_running(job)
    for _ in range(args.calls):
        client.wait(job, client.forward_backward(job, payload)["request_id"])
    client.wait(job, client.step(job)["request_id"])
    return {"calls": args.calls + 2, "seconds": time.perf_counter() - started}


def small_bare(args: argparse.Namespace) -> dict[str, Any]:
    """The same exchanges to the bare routes: a POST of the same bytes and a poll per call."""
    import requests

    body = b"\x01" * (args.small_kib * 1024)
    session = requests.Session()
    session.post(args.url + "/sink", data=body, headers=OCTET).raise_for_status()
    started = time.perf_counter()
    for _ in range(args.calls + 2):
        session.post(args.url + "/sink", data=body, headers=OCTET).raise_for_status()
        session.get(args.url + "/poll").raise_for_status()
    return {"calls": args.calls + 2, "seconds": time.perf_counter() - started}


WORKERS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "kit": lambda a: measure_kit(a, as_tensors=False),
    "kit-tensors": lambda a: measure_kit(a, as_tensors=True),
    "bare": measure_bare,
    "reference": reference_upload,
    "small-kit": small_kit,
    "small-bare": small_bare,
}


# --- the benchmark process: servers, rounds, the table ----------------------------------------


def run_worker(kind: str, url: str, server_pid: int, tree: str, args: argparse.Namespace,
               size: int = 0) -> dict[str, Any]:
    """One measurement in a fresh process whose ``contract``/``client`` come from ``tree``."""
    argv = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--url", url, "--server-pid",
            str(server_pid), "--tree", tree, "--size", str(size), "--calls", str(args.calls),
            "--small-kib", str(args.small_kib)]
    if args.reference:
        argv += ["--reference", args.reference]
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tree, timeout=1800)
    if done.returncode:
        raise RuntimeError(f"{kind} worker failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def reference_importable(spec: str | None) -> bool:
    if not spec:
        return False
    import importlib.util

    try:
        return importlib.util.find_spec(spec.partition(":")[0]) is not None
    except (ImportError, ValueError):
        return False


def upload_rows(args: argparse.Namespace, servers: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, worker kind, server) for every upload client measured."""
    rows = [("kit, frame bytes", "kit", "fake"), ("kit, batch as tensors", "kit-tensors", "fake"),
            ("bare requests loop", "bare", "bare")]
    if "baseline" in servers:
        rows.append(("baseline tree's kit, frame bytes", "kit", "baseline"))
    if reference_importable(args.reference):
        rows.append((f"reference {args.reference}", "reference", "fake"))
    return rows


def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} [{format(min(values), fmt)}-{format(max(values), fmt)}]"


def print_upload(size: int, rows: list[tuple[str, str, str]],
                 results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Print one size's table; return its figures per client, one value per round (``--json``)."""
    frame = results["bare"][0]["frame"]
    figures: dict[str, Any] = {"frame_mib": frame / MiB, "rounds": len(results["bare"]), "clients": {}}
    print(f"\nupload of a {frame / MiB:.0f} MiB frame ({len(results['bare'])} rounds: median [min-max])")
    print(f"  {'client':34} {'MiB/s':>18} {'vs bare loop':>20} {'client peak/frame':>20} {'server peak/frame':>20}"
          f" {'client CPU s/GiB':>20} {'server CPU s/GiB':>20}")
    for label, _, _ in rows:
        runs = results[label]
        rates = [frame / MiB / r["seconds"] for r in runs]
        ratios = [rate / (frame / MiB / bare["seconds"]) for rate, bare in zip(rates, results["bare"], strict=True)]
        client = [(r["client_peak"] - r["rss0"]) / frame for r in runs]
        server = [(r["server_peak"] - r["server_idle"]) / frame for r in runs]
        cpu = [[r["cpu"][side] * GiB / frame for r in runs] for side in (0, 1)]
        print(f"  {label:34} {spread(rates, '.0f'):>18} {spread(ratios, '.2f') + 'x':>20} "
              f"{spread(client, '.2f') + 'x':>20} {spread(server, '.2f') + 'x':>20} "
              f"{spread(cpu[0], '.2f'):>20} {spread(cpu[1], '.2f'):>20}")
        figures["clients"][label] = {"mib_s": rates, "vs_bare": ratios, "client_peak_over_frame": client,
                                     "server_peak_over_frame": server, "client_cpu_s_gib": cpu[0],
                                     "server_cpu_s_gib": cpu[1]}
    hashing = [r["sha256_s"]["staged"] for r in results["kit, frame bytes"]]
    in_place = [r["sha256_s"]["in_place"] for r in results["kit, frame bytes"]]
    ceiling = [bare["seconds"] / (bare["seconds"] + h) for h, bare in zip(hashing, results["bare"], strict=True)]
    print(f"  the frame's sha256 alone (in every chunk header, so before chunk 0: spec §9.3): "
          f"{spread(hashing, '.3f')} s staged as the kit hashes, {spread(in_place, '.3f')} s in place; "
          f"the bare loop with the staged hash first: {spread(ceiling, '.2f')}x")
    return figures


def measure_uploads(args: argparse.Namespace, servers: dict[str, Any]) -> dict[str, Any]:
    """Every size's uploads, printed; their figures by size in MiB."""
    rows = upload_rows(args, servers)
    by_size: dict[str, Any] = {}
    for size in args.sizes:
        results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in rows}
        results["bare"] = results["bare requests loop"]
        for round_no in range(args.runs):
            shift = round_no % len(rows)  # no row always follows the same one
            for label, kind, server in rows[shift:] + rows[:shift]:
                proc, tree = servers[server]
                results[label].append(run_worker(kind, proc.base_url, proc.proc.pid, tree, args, size))
        by_size[str(size)] = print_upload(size, rows, results)
    return by_size


def measure_small(args: argparse.Namespace, servers: dict[str, Any]) -> None:
    stacks = [("this tree", "fake")] + ([("baseline tree", "baseline")] if "baseline" in servers else [])
    rates: dict[str, list[float]] = {label: [] for label, _ in stacks}
    bare: list[float] = []
    for round_no in range(args.small_runs):
        for label, server in stacks if round_no % 2 == 0 else stacks[::-1]:  # ABBA: drift hits both alike
            proc, tree = servers[server]
            out = run_worker("small-kit", proc.base_url, proc.proc.pid, tree, args)
            rates[label].append(out["calls"] / out["seconds"])
        proc, tree = servers["bare"]
        out = run_worker("small-bare", proc.base_url, proc.proc.pid, tree, args)
        bare.append(out["calls"] / out["seconds"])
    print(f"\nsmall-call path: create, {args.calls} forward-backward calls of {args.small_kib} KiB waited to "
          f"their result, one step ({args.small_runs} rounds, the stacks' order alternating: median [min-max])")
    print(f"  {'stack':34} {'calls/s':>18} {'vs bare routes':>20}")
    print(f"  {'bare starlette (POST + poll a call)':34} {spread(bare, '.0f'):>18}")
    for label, _ in stacks:
        ratios = [r / b for r, b in zip(rates[label], bare, strict=True)]
        print(f"  {label:34} {spread(rates[label], '.0f'):>18} {spread(ratios, '.3f') + 'x':>20}")
    if len(stacks) == 2:
        ratio = [a / b for a, b in zip(rates["this tree"], rates["baseline tree"], strict=True)]
        print(f"  this tree vs the baseline tree, per round: {spread(ratio, '.3f')}x (target >= 1.0x)")


def start_servers(args: argparse.Namespace) -> dict[str, Any]:
    from bench_fake_server import BARE_APP, Proc

    fake_argv = [sys.executable, "-m", "fake_gs", "--port", "0", "--log-level", "warning"]
    servers: dict[str, Any] = {"fake": (Proc(fake_argv, cwd=ROOT, env={"PYTHONPATH": ROOT}), ROOT)}
    servers["bare"] = (Proc([sys.executable, "-c", BARE_APP]), ROOT)
    if args.baseline:
        tree = os.path.abspath(args.baseline)
        servers["baseline"] = (Proc(fake_argv, cwd=tree, env={"PYTHONPATH": tree}), tree)
    return servers


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",")], default=[64, 512],
                   help="frame sizes in MiB (default 64,512)")
    p.add_argument("--runs", type=int, default=3, help="rounds of the uploads")
    p.add_argument("--small-runs", type=int, default=6, help="rounds of the small-call path")
    p.add_argument("--calls", type=int, default=200, help="forward-backward calls of the small-call path")
    p.add_argument("--small-kib", type=int, default=64, help="size of each small call's batch in KiB")
    p.add_argument("--baseline", metavar="TREE", help="another checkout (e.g. today's main) measured beside")
    p.add_argument("--reference", metavar="MODULE:FUNCTION", help="a reference client's upload function")
    p.add_argument("--skip", choices=("upload", "small"), action="append", default=[])
    p.add_argument("--quick", action="store_true", help="one round, 64 MiB, 50 small calls (a smoke run)")
    p.add_argument("--json", metavar="PATH", help="also write the uploads' figures (one value per round), the "
                                                  "date and the load average to PATH")
    for name in ("--worker", "--url", "--tree"):
        p.add_argument(name, help=argparse.SUPPRESS)
    p.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    p.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.runs, args.small_runs, args.calls = [64], 1, 2, 50
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.worker:
        sys.path.insert(0, args.tree or ROOT)
        print(json.dumps(WORKERS[args.worker](args)))
        return 0
    sys.path[:0] = [ROOT, HERE]
    load_before = os.getloadavg()[0]
    servers = start_servers(args)
    uploads: dict[str, Any] = {}
    try:
        if "upload" not in args.skip:
            uploads = measure_uploads(args, servers)
        if "small" not in args.skip:
            measure_small(args, servers)
    finally:
        for proc, _ in servers.values():
            proc.stop()
    if args.json:
        measured = {"date": datetime.date.today().isoformat(), "cpus": os.cpu_count(),
                    "load_average_1min_before": load_before, "load_average_1min_after": os.getloadavg()[0]}
        document = {"command": " ".join(["python benchmarks/bench_upload.py", *(argv or sys.argv[1:])]),
                    "measured": measured, "uploads": uploads}
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=1)
            out.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
