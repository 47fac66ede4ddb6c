"""What a run cost the target: jobs created, GPU-minutes held, bytes sent and received.

A run against a real service pays for GPUs while its jobs live, so the report carries a
cost line a server team can put in a budget. The drivers attach :data:`COST` to their HTTP
sessions (every request and response is counted) and tell it when a job is created and
when its cancel was taken; a job still alive at the end is counted up to then. One
:class:`RunCost` per process (each xdist worker has its own); the plugin resets it when a
session starts, so sessions run one after another in one process stay apart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from typing import Any

import requests

MiB = 1024 * 1024


@dataclass
class _Held:
    gpus: int
    started: float
    ended: float | None = None


def gpus_of(body: Any) -> int:
    """GPUs a create-job body asks for: the sum of its sub-jobs' config ``n_gpus`` (1 if unset)."""
    subs = body.get("sub_job_configs") if isinstance(body, Mapping) else None
    if not isinstance(subs, list):
        return 0
    total = 0
    for sub in subs:
        sub = sub if isinstance(sub, Mapping) else {}
        cfg = sub.get("training_config") or sub.get("inference_config") or {}
        n = cfg.get("n_gpus", 1) if isinstance(cfg, Mapping) else 1
        total += n if isinstance(n, int) and n > 0 else 1
    return total


class RunCost:
    """Counters for one session, safe to bump from several threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.sent = 0
            self.received = 0
            self.requests = 0
            self.jobs: dict[str, _Held] = {}

    def count_response(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        """A ``requests`` response hook: bytes on the wire, bodies and header lines."""
        req = response.request
        body = req.body
        # A body sent as pieces (the kit client's chunk uploads) declares its length.
        sent = len(body) if isinstance(body, Sized) else 0
        sent += sum(len(k) + len(v) + 4 for k, v in req.headers.items())
        sent += len(req.method or "") + len(req.url or "") + 12
        # A streamed body is the caller's to read (the kit's client streams every answer):
        # count what it declares rather than reading it here.
        declared = response.headers.get("Content-Length", "")
        streamed = int(declared) if declared.isdigit() else 0
        received = streamed if kwargs.get("stream") else len(response.content)
        received += sum(len(k) + len(v) + 4 for k, v in response.headers.items()) + 17
        with self._lock:
            self.sent += sent
            self.received += received
            self.requests += 1

    def attach(self, session: requests.Session) -> requests.Session:
        hooks = session.hooks.setdefault("response", [])
        if self.count_response not in hooks:
            hooks.append(self.count_response)
        return session

    def job_created(self, job_id: str, gpus: int) -> None:
        with self._lock:
            self.jobs.setdefault(job_id, _Held(gpus=gpus, started=time.monotonic()))

    def job_ended(self, job_id: str) -> None:
        """The job's cancel was taken (or it was seen ended): it holds GPUs no longer."""
        with self._lock:
            held = self.jobs.get(job_id)
            if held is not None and held.ended is None:
                held.ended = time.monotonic()

    def summary(self) -> dict[str, Any]:
        """The figures the report prints (GPU-minutes: each job's lifetime x its GPUs)."""
        now = time.monotonic()
        with self._lock:
            gpu_s = sum(h.gpus * ((h.ended or now) - h.started) for h in self.jobs.values())
            return {
                "jobs_created": len(self.jobs),
                "gpu_minutes": round(gpu_s / 60.0, 3),
                "requests": self.requests,
                "bytes_sent": self.sent,
                "bytes_received": self.received,
            }


def cost_line(cost: Mapping[str, Any]) -> str:
    """``cost: 1 job created, 0.42 GPU-minutes held, 210 requests, 63.1 MiB sent, ...``."""
    if not cost:
        return ""
    jobs = int(cost.get("jobs_created", 0))
    return (
        f"cost: {jobs} job{'s' if jobs != 1 else ''} created, "
        f"{float(cost.get('gpu_minutes', 0.0)):.2f} GPU-minutes held (lifetime x GPUs), "
        f"{int(cost.get('requests', 0))} requests, "
        f"{int(cost.get('bytes_sent', 0)) / MiB:.1f} MiB sent, "
        f"{int(cost.get('bytes_received', 0)) / MiB:.1f} MiB received"
        + (f"; reused job {cost['reused_job']} was not cancelled" if cost.get("reused_job") else "")
    )


#: The process-wide counters (each xdist worker has its own).
COST = RunCost()
