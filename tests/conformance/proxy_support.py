"""gs-proxy in tests: the real command (``python -m conformance.proxy``) in front of a fake on
loopback, the kit's client driven through it, and the verdicts it wrote."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from client import ClientConfig, create_client

TOKEN = "proxy-test-token-4f9a1c"
ADMIN = "proxy-test-admin-77b2e0"
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ProxyRun:
    """A running gs-proxy; ``rc``, ``out``, ``err`` and ``verdicts`` once it stopped."""

    base_url: str
    process: subprocess.Popen[str]
    report: Path
    rc: int | None = None
    out: str = ""
    err: str = ""
    verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def stop(self) -> None:
        if self.rc is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        self.out, self.err = self.process.communicate(timeout=120)
        self.rc = self.process.returncode
        if self.report.exists():
            self.verdicts = {v["id"]: v for v in json.loads(self.report.read_text())["verdicts"]}

    def status(self, clause_id: str) -> str:
        return str(self.verdicts[clause_id]["status"])

    def red(self) -> dict[str, list[str]]:
        """Red clause -> the sides that broke it."""
        return {cid: [t.removesuffix(" side") for t in v["tests"]] for cid, v in self.verdicts.items()
                if v["status"] == "red"}


@contextmanager
def proxy(upstream: str, tmp: Path, *extra: str) -> Iterator[ProxyRun]:
    """``gs-proxy --upstream upstream`` with a JSON report (and ``extra`` options)."""
    report = tmp / "proxy-report.json"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen(
        [sys.executable, "-m", "conformance.proxy", "--upstream", upstream, "--kit-decisions",
         "--report", str(report), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"listening on (\S+)", line)
    if found is None:
        process.kill()
        raise AssertionError(f"gs-proxy did not start: {line!r} {process.communicate()[1][-2000:]}")
    run = ProxyRun(found.group(1), process, report)
    try:
        yield run
    finally:
        if run.rc is None and process.poll() is None:
            run.stop()


def rl_loop(base_url: str, steps: int = 2, **config: Any) -> None:
    """The kit client's RL loop: forward-backward, step, weight sync, generate; a save."""
    settings = ClientConfig(base_url=base_url, pat=TOKEN, model="Qwen/Qwen3-0.6B", training_gpus=1,
                            sampling_gpus=1, max_seq_len=512, poll_first_s=0.01, poll_cap_s=0.05,
                            max_chunk_bytes=16384, **config)
    with create_client(settings) as client:
        for _ in range(steps):
            ids = torch.randint(0, 1000, (4, 256))  # ~24 KiB: a group of chunks
            batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}
            client.fwd_bwd({"batch": batch, "meta": {}, "processing": {"post": []}})
            client.step(learning_rate=1e-5)
            client.sync_weights()
            client.generate([[1, 2, 3]], {"max_tokens": 4})
        client.save_checkpoint()
