"""Shared by the stress tests: job bodies, a client with tiny back-offs, the fake's admin
API, and the fake run in a subprocess (so its RSS can be measured on its own)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import requests

from client.config import ClientConfig
from client.rest import CortexRestClient
from contract.routes import prefix

MODEL = "Qwen/Qwen3-0.6B"
DB, SCHEMA = "DB", "PUBLIC"


def job_body(seed: int | None = None) -> dict[str, Any]:
    """One training sub-job (1 GPU) with an explicit seed, so results are reproducible."""
    sub: dict[str, Any] = {
        "job_type": "training",
        "model_name": MODEL,
        "training_config": {"optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 4096,
                            "train_batch_size": 8, "n_gpus": 1},
    }
    if seed is not None:
        sub["seed"] = seed
    return {"sub_job_configs": [sub]}


def fast_config(base_url: str, **overrides: Any) -> ClientConfig:
    """A client config with millisecond back-offs and polls (runs fast against the fake)."""
    values: dict[str, Any] = dict(
        base_url=base_url, database=DB, schema_name=SCHEMA, model=MODEL,
        retries=4, backoff_first_s=0.001, backoff_factor=2.0, backoff_cap_s=0.005, backoff_jitter=0.0,
        poll_first_s=0.001, poll_factor=1.5, poll_cap_s=0.02, poll_timeout_s=60.0,
        job_start_timeout_s=60.0, connect_timeout_s=5.0, read_timeout_s=30.0, call_timeout_s=60.0,
        cancel_on_shutdown=False,
    )
    values.update(overrides)
    return ClientConfig(**values)


def rest_client(base_url: str, token: str | None = None, **overrides: Any) -> CortexRestClient:
    if token is not None:
        overrides.setdefault("pat", token)
    return CortexRestClient(fast_config(base_url, **overrides))


class Admin:
    """The fake's admin API over HTTP."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        r = self.session.request(method, f"{self.base_url}/_fake/{path}", json=body, timeout=30)
        r.raise_for_status()
        return r.json() if r.content else {}

    def state(self) -> dict[str, Any]:
        return dict(self._call("GET", "state"))

    def budgets(self) -> dict[str, Any]:
        return dict(self._call("GET", "budgets"))

    def set_faults(self, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(self._call("PUT", "faults", {"rules": rules})["rules"])

    def faults(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "faults")["rules"])

    def settle(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """The state once no request is in flight (bounded poll, no fixed sleep)."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.state()
            if state["requests"]["in_flight"] == 0 or time.monotonic() > deadline:
                return state
            time.sleep(0.01)


def service_prefix(base_url: str) -> str:
    return base_url.rstrip("/") + prefix(DB, SCHEMA, "cortex-training")


# --- the fake in a subprocess ----------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    import psutil

    return int(psutil.Process(pid).memory_info().rss)


@dataclass
class FakeProcess:
    proc: subprocess.Popen[str]
    base_url: str
    lines: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss(self) -> int:
        return rss_bytes(self.proc.pid)


class PeakSampler:
    """Samples a process's RSS in a thread; ``peak`` is the highest seen."""

    def __init__(self, pid: int, every_s: float = 0.005) -> None:
        self.pid, self.every_s = pid, every_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except Exception:
                return
            self._stop.wait(self.every_s)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        try:
            self.peak = max(self.peak, rss_bytes(self.pid))
        except Exception:
            pass


def _wait_warmed_up(base_url: str, args: tuple[str, ...], deadline: float) -> None:
    """Until the fake has loaded its engine (torch) at start-up: RSS measured from here on
    is the fake's work, not its imports (the admin API answers with the admin token, if set)."""
    token = args[args.index("--admin-token") + 1] if "--admin-token" in args else None
    if token is None and "--token" in args:
        return  # a random admin token: nothing to ask with
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    while time.monotonic() < deadline:
        if requests.get(base_url + "/_fake/budgets", headers=headers, timeout=10).json().get("warmed_up", True):
            return
        time.sleep(0.05)


def _drain(proc: subprocess.Popen[str], lines: list[str]) -> None:
    """Keep reading a child's output (kept in ``lines``) so a full pipe never blocks it."""
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)


@contextmanager
def fake_process(*args: str, env: Mapping[str, str] | None = None, timeout_s: float = 60.0) -> Iterator[FakeProcess]:
    """``python -m fake_gs --port 0 ARGS`` on a free port; yields once it serves."""
    cmd = [sys.executable, "-m", "fake_gs", "--port", "0", "--log-level", "warning", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})
    lines: list[str] = []
    base_url = None
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    try:
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            found = re.search(r"serving on (http://\S+)", line)
            if found:
                base_url = found.group(1)
                break
        if base_url is None:
            raise RuntimeError("fake-gs did not start:\n" + "".join(lines))
        # Keep draining its output so a chatty server never blocks on a full pipe.
        threading.Thread(target=_drain, args=(proc, lines), daemon=True).start()
        _wait_warmed_up(base_url, args, deadline)
        yield FakeProcess(proc, base_url, lines)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
