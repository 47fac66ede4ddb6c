"""gs-load end to end, as a user starts it: a Locust master and two worker processes on
loopback against the embedded fake for 15 s (both workers send traffic, no violation, exit
0, every job cancelled), and beside it, at the same time, a one-process run against a fake
mutant that runs steps twice under concurrency (the violation counted, exit 1). Both are
subprocesses; the assertions read each run's ``--results-json``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TIMEOUT_S = 240
#: Short think times, so a short run still has calls in flight together.
PROFILE = """
[rl]
think_s = [0.0, 0.1]
[sft]
think_s = [0.0, 0.1]
[sampler]
think_s = [0.0, 0.1]
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _gs_load(*args: str, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "conformance.load.cli", "--headless", "--only-summary", *args]
    return subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def _finish(proc: subprocess.Popen[bytes], log: Path, results: Path | None
            ) -> tuple[int, dict[str, Any], str]:
    """The run's exit status, its ``--results-json`` and the end of its output."""
    code = proc.wait(timeout=TIMEOUT_S)
    tail = log.read_text(errors="replace")[-3000:]
    assert results is None or results.exists(), tail
    return code, json.loads(results.read_text()) if results else {}, tail


def _counts(results: dict[str, Any]) -> dict[str, int]:
    return {cid: v["count"] for cid, v in results["violations"].items() if v["count"]}


@pytest.mark.long  # CI's slow tier runs a master and workers with the shared secret (test_load_surface)
@pytest.mark.heavy
def test_master_and_two_workers_conform_and_a_mutant_fails(tmp_path: Path) -> None:
    profile = tmp_path / "profile.toml"
    profile.write_text(PROFILE)
    port = str(_free_port())
    plain, mutant = tmp_path / "plain.json", tmp_path / "mutant.json"
    master = _gs_load("--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", port,
                      "--expect-workers", "2", "--users", "8", "--spawn-rate", "8",
                      "--run-time", "15s", "--load-profile", str(profile),
                      "--results-json", str(plain), "--html", str(tmp_path / "report.html"),
                      log=tmp_path / "master.log")
    workers = [_gs_load("--worker", "--master-host", "127.0.0.1", "--master-port", port,
                        log=tmp_path / f"worker{i}.log") for i in range(2)]
    broken = _gs_load("--mutant", "concurrent-step-twice", "--users", "8", "--spawn-rate", "8",
                      "--run-time", "8s", "--load-profile", str(profile),
                      "--results-json", str(mutant), log=tmp_path / "mutant.log")
    code, ran, tail = _finish(master, tmp_path / "master.log", plain)
    for i, worker in enumerate(workers):
        worker_code, _, worker_tail = _finish(worker, tmp_path / f"worker{i}.log", None)
        assert worker_code == 0, worker_tail
    assert (code, _counts(ran), ran["error"]) == (0, {}, ""), tail
    assert len(ran["nodes"]) == 2 and all(calls > 0 for calls in ran["nodes"].values()), tail
    assert ran["jobs_end"] and set(ran["jobs_end"].values()) <= {"cancelled", "cancelling"}
    assert ran["cost"]["jobs_created"] == len(ran["jobs_end"]) == 8
    assert "gs-load: CONFORMS UNDER LOAD" in (tmp_path / "report.html").read_text()
    code, ran, tail = _finish(broken, tmp_path / "mutant.log", mutant)
    assert code == 1, tail
    assert _counts(ran).keys() == {"REQ-ONCE-1", "STEP-COUNT-1"}, ran["violations"]
    assert set(ran["jobs_end"].values()) <= {"cancelled", "cancelling"}
