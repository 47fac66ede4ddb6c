"""The exit guard on SIGTERM and SIGHUP (``client.exit_guard``): a real process creates a
job on a fake, gets the signal, and the fake sees the cancel; the application's own
handler still runs after it, the default action still ends the process by the signal, and
an ignored signal cancels nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from client import ClientConfig, CortexRestClient
from fake_gs import FakeServer, start_in_background

ROOT = Path(__file__).resolve().parents[2]

#: The driver: create a job (guarded), install the handler the case asks for (or none),
#: say the job id, then wait for the signal.
_DRIVER = """
import os, signal, sys, threading, warnings
warnings.simplefilter("ignore")
from client import ArcticRLClientConfig, create_arctic_rl_client
mode = sys.argv[2]
signal.signal(signal.{sig}, signal.SIG_DFL)  # as a terminal leaves it (nohup, a parent's SIG_IGN, is inherited)
if mode == "ignored":
    signal.signal(signal.{sig}, signal.SIG_IGN)
if mode == "app-before":
    def mine(signum, frame):
        os.write(1, b"app handler ran\\n")  # not print(): a signal may land inside another print
        sys.exit(3)
    signal.signal(signal.{sig}, mine)
config = ArcticRLClientConfig(backend="cortex", base_url=sys.argv[1], model_name="Qwen/Qwen3-0.6B",
                              training_gpus=1, sampling_gpus=1, log_prob_gpus=0)
client = create_arctic_rl_client(config)
print(client.sync.job_id, flush=True)
threading.Event().wait(30 if mode != "ignored" else 1)
print("still here", flush=True)
"""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    srv = start_in_background()
    yield srv
    srv.stop()


def _run_until_signalled(fake: FakeServer, sig: str, mode: str) -> tuple[str, subprocess.CompletedProcess[str]]:
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER.format(sig=sig), fake.base_url, mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    job_id = proc.stdout.readline().strip()
    assert job_id, proc.communicate(timeout=30)
    proc.send_signal(getattr(signal, sig))
    out, err = proc.communicate(timeout=60)
    return job_id, subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _status(fake: FakeServer, job_id: str) -> str:
    return str(CortexRestClient(ClientConfig(base_url=fake.base_url)).get_job(job_id)["status"])


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_stop_signal_cancels_the_job_then_ends_the_process_by_it(fake: FakeServer, sig: str) -> None:
    job_id, done = _run_until_signalled(fake, sig, "default")
    assert _status(fake, job_id) in ("cancelling", "cancelled"), done.stderr
    assert done.returncode == -getattr(signal, sig), done  # ended as the default action ends it
    assert "still here" not in done.stdout
    assert "exiting without shutdown()" in done.stderr


def test_the_applications_own_handler_runs_after_the_cancel(fake: FakeServer) -> None:
    job_id, done = _run_until_signalled(fake, "SIGTERM", "app-before")
    assert _status(fake, job_id) in ("cancelling", "cancelled"), done.stderr
    assert "app handler ran" in done.stdout and done.returncode == 3, done


def test_an_ignored_signal_cancels_nothing(fake: FakeServer) -> None:
    job_id, done = _run_until_signalled(fake, "SIGTERM", "ignored")
    assert "still here" in done.stdout, done  # the run went on; at its normal exit the guard cancels
    assert done.returncode == 0
    assert _status(fake, job_id) in ("cancelling", "cancelled")
