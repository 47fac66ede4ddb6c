"""The run's jobs, and what they cost: created by the master (or the one local process) before
the first user starts, at most ``--max-jobs`` of them, each cancelled when the run ends
(also on Ctrl-C and SIGTERM: the run's shutdown calls :meth:`JobPool.cancel_all`).

The cost is gs-conformance's (:class:`conformance.reporting.cost.RunCost`): each job's lifetime times
its GPUs, and the bytes every process of the run sent and received.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from client.config import ClientConfig
from client.errors import CortexError
from client.rest import CortexRestClient
from conformance.inputs import valid_bodies
from conformance.reporting.cost import RunCost, gpus_of
from contract.states import normalize_job_state

log = logging.getLogger("gs-load")


@dataclass(frozen=True)
class Target:
    """Where the run's users call: the service base and prefix, its token, and whether it is
    the fake the run started (whose admin API the end-of-run judgement reads)."""

    url: str
    database: str
    schema: str
    endpoint: str
    model: str
    token: str | None = field(default=None, repr=False)
    embedded: bool = False

    def client_config(self, **fields: Any) -> ClientConfig:
        """A ClientConfig addressing this target (``fields``: the rest, e.g. a job id)."""
        return ClientConfig(base_url=self.url, database=self.database, schema_name=self.schema,
                            endpoint=self.endpoint, model=self.model, pat=self.token, **fields)

    def to_wire(self) -> dict[str, Any]:
        return {"url": self.url, "database": self.database, "schema": self.schema,
                "endpoint": self.endpoint, "model": self.model, "token": self.token,
                "embedded": self.embedded}


def job_budget(max_jobs: int | None, users: int, embedded: bool) -> int:
    """Jobs the run creates: one per user, at most ``--max-jobs`` (by default no cap on the
    embedded fake, one job against a URL, where every job costs GPUs)."""
    cap = max_jobs if max_jobs is not None else (None if embedded else 1)
    wanted = max(1, users)
    return wanted if cap is None else max(0, min(wanted, cap))


class JobPool:
    """The jobs the run created (or reused) and their cost."""

    def __init__(self, target: Target, startup_timeout_s: float) -> None:
        self.target = target
        self.cost = RunCost()
        self.rest = CortexRestClient(target.client_config(job_start_timeout_s=startup_timeout_s))
        self.cost.attach(self.rest.http.session)
        self.jobs: list[str] = []
        self.created: list[str] = []
        self.reused: str | None = None

    def open(self, count: int, reuse: str | None = None) -> list[str]:
        """``count`` new running jobs (or the running job ``reuse``, creating none)."""
        if reuse:
            self.rest.wait_running(reuse)
            self.reused, self.jobs = reuse, [reuse]
            return self.jobs
        model = self.target.model
        body = valid_bodies.job(valid_bodies.training(model), valid_bodies.sampling(model), experiment="gs-load")
        for _ in range(count):
            job = str(self.rest.create_job(body)["job_id"])
            self.created.append(job)
            self.cost.job_created(job, gpus_of(body))
        for job in self.created:
            self.rest.wait_running(job)
        self.jobs = list(self.created)
        log.info("gs-load: %d job(s) running: %s", len(self.jobs), ", ".join(self.jobs))
        return self.jobs

    def cancel_all(self) -> list[str]:
        """Cancel every job the run created (each once; a failure is logged, not raised):
        the ones whose cancel was not taken."""
        left = []
        while self.created:
            job = self.created.pop(0)
            try:
                self.rest.cancel_job(job)
            except CortexError as exc:
                log.error("gs-load: could not cancel job %s: %s", job, exc)
                left.append(job)
                continue
            self.cost.job_ended(job)
        return left

    def statuses(self) -> dict[str, str]:
        """Each of the run's jobs' status now (after the cancels: cancelling or cancelled)."""
        out = {}
        for job in self.jobs:
            try:
                out[job] = normalize_job_state(self.rest.get_job(job).get("status"))
            except CortexError as exc:
                out[job] = f"unknown ({type(exc).__name__})"
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.rest.close()

    def summary(self, requests: int, sent: int, received: int) -> dict[str, Any]:
        """The cost figures: the jobs', plus every process's traffic."""
        out = self.cost.summary()
        out["requests"] += requests
        out["bytes_sent"] += sent
        out["bytes_received"] += received
        if self.reused:
            out["reused_job"] = self.reused
        return out
