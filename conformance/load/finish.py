"""The master's part of a load run (also the one local process's): the target and its jobs
before the first user, the judgement, the cancels and the reports after the last.

Its steps are idempotent and run from Locust's events (:mod:`conformance.load.run`):
:meth:`Host.start` at test_start, :meth:`Host.finish` at test_stop (or from
:meth:`Host.quitting` after Ctrl-C or SIGTERM), :meth:`Host.print_report` last.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import gevent
from locust.env import Environment
from locust.runners import STATE_STOPPED, MasterRunner

from client.errors import CortexError
from conformance.judge.conclude import conclude
from conformance.judge.tally import Tally
from conformance.load import options as opts
from conformance.load import report
from conformance.load.fakeproc import EmbeddedFake, FakeStartError
from conformance.load.jobs import JobPool, Target, job_budget
from conformance.load.profile import ProfileError, load_profile
from conformance.load.run import RUN, SETUP
from conformance.load.surface import (
    CHALLENGE,
    Door,
    Gate,
    exposed_fake_tokens,
    fake_host_refusal,
    frozen_options,
    is_loopback,
    scrub_options,
)
from conformance.reporting import formats
from conformance.target import ProbeError, probe, probe_service
from contract.auth import auth_headers
from contract.redact import scrub_text
from contract.routes import prefix

log = logging.getLogger("gs-load")
EXIT_SETUP, EXIT_NO_SERVER = 2, 3


class Host:
    """Owns the run's target, jobs and embedded fake on the master."""

    def __init__(self, environment: Environment, gate: Gate | None = None, door: Door | None = None) -> None:
        self.environment, self.run = environment, RUN
        #: gs-load's options as given at start: Locust's web form cannot change them.
        self.options = frozen_options(environment.parsed_options)
        #: Locust's own options (its users and --html), live.
        self.locust = environment.parsed_options
        scrub_options(environment.parsed_options)
        #: Which workers proved the run's secret (all local ones without a secret), and the
        #: door holding Locust's own messages of the others (a run with a secret).
        self.gate = gate or Gate(opts.value(self.options, "load_secret"))
        self.door = door
        try:
            self.profile = load_profile(opts.value(self.options, "load_profile"))
        except ProfileError as exc:
            log.error("gs-load: %s", exc)
            sys.exit(EXIT_SETUP)
        self._weigh_users()
        self.fake = self._start_fake()
        self.target = self._target()
        if not environment.host:  # Locust's report header names the target ("Target Host")
            environment.host = self.target.url
        if not self.target.embedded:
            self._probe()
        self.pool = JobPool(self.target, float(opts.value(self.options, "startup_timeout_s")))
        self.before: dict[str, Any] | None = None
        self.setup: dict[str, Any] | None = None
        self.started: float | None = None
        self.error = ""
        self.outcome: report.Outcome | None = None
        self.run_started = time.time()

    def _weigh_users(self) -> None:
        """The profile's weights on the user classes; a weight of 0 leaves a class out."""
        from conformance.load.users import USERS

        for kind, cls in USERS.items():
            cls.weight = self.profile.kind(kind).weight
        keep = [cls for cls in self.environment.user_classes if getattr(cls, "weight", 1) > 0]
        self.environment.user_classes[:] = keep

    def _start_fake(self) -> EmbeddedFake | None:
        if opts.value(self.options, "url"):
            if opts.value(self.options, "mutant"):
                log.error("gs-load: --mutant applies to the embedded fake only (no --url)")
                sys.exit(EXIT_SETUP)
            return None
        args = (*self.profile.fake.args, *shlex.split(opts.value(self.options, "fake_args") or ""))
        host = opts.value(self.options, "fake_host")
        refusal = fake_host_refusal(host, bool(opts.value(self.options, "expose_fake")), args)
        if refusal:
            log.error("gs-load: %s", refusal)
            sys.exit(EXIT_SETUP)
        fake = EmbeddedFake(host, opts.value(self.options, "mutant"), args,
                            None if is_loopback(host) else exposed_fake_tokens())
        try:
            url = fake.start()
        except FakeStartError as exc:
            log.error("gs-load: %s", exc)
            sys.exit(EXIT_SETUP)
        log.info("gs-load: embedded fake at %s", url)
        return fake

    def _target(self) -> Target:
        value = lambda name: opts.value(self.options, name)  # noqa: E731
        token = self.fake.token if self.fake and self.fake.token else value("token")
        return Target(url=value("url") or (self.fake.url if self.fake else ""),
                      database=value("database"), schema=value("schema"),
                      endpoint=value("endpoint"), model=value("model"), token=token,
                      embedded=self.fake is not None)

    def _probe(self) -> None:
        """A URL where nothing (or no Cortex Training API) answers fails in seconds, as in
        gs-conformance (exit status 3)."""
        target = self.target
        try:
            probe(target.url)
            probe_service(target.url, prefix(target.database, target.schema, target.endpoint),
                          auth_headers(target.token) if target.token else {})
        except ProbeError as exc:
            log.error("gs-load: %s", exc)
            sys.exit(EXIT_NO_SERVER)

    # --- before the first user ----------------------------------------------------------
    def start(self) -> None:
        """Create the jobs, read the fake's counters, hand the set-up to every process."""
        if self.started is not None:
            return
        runner = self.environment.runner
        assert runner is not None, "test_start fires on a running Locust runner"
        asked = getattr(self.locust, "num_users", 0)
        users = int(getattr(runner, "target_user_count", 0) or asked or 1)
        try:
            budget = job_budget(opts.value(self.options, "max_jobs"), users, self.target.embedded)
            jobs = self.pool.open(budget, opts.value(self.options, "job_id"))
            if not jobs:
                raise ValueError("--max-jobs 0 and no --job-id: the run has no job to load")
            self.before = self.fake.state() if self.fake else None
        except (CortexError, ValueError, OSError) as exc:
            self.error, jobs = f"could not set up the run's jobs: {exc}", []
            log.error("gs-load: %s", self.error)
            gevent.spawn_later(0.5, runner.quit)
        workers = len(runner.clients.ready) if isinstance(runner, MasterRunner) else 1
        setup = {"target": self.target.to_wire(), "jobs": jobs, "slots": max(1, workers),
                 "profile": self.profile.model_dump(mode="json"), "failed": self.error}
        self.setup = setup
        if isinstance(runner, MasterRunner):
            for worker in sorted(self.gate.proven):
                self._send_setup(worker)
            # A worker whose hello came before the master listened for it: greeted now.
            waiting = {str(client.id) for client in runner.clients.all} | set(self.door.held if self.door else ())
            for worker in sorted(waiting):
                if worker not in self.gate.proven and worker not in self.gate.nonces:
                    self.hello(worker)
        self.run.apply(setup)
        self.started = time.monotonic()

    def hello(self, worker: str) -> None:
        """A worker started listening: challenge it to prove the run's secret (without one,
        it is let in and sent the set-up if the run has one already)."""
        runner = self.environment.runner
        if not isinstance(runner, MasterRunner):
            return
        nonce = self.gate.challenge(worker)
        if nonce is not None:
            runner.send_message(CHALLENGE, {"nonce": nonce}, client_id=worker)
        else:
            self._send_setup(worker)

    def proof(self, worker: str, answer: Any) -> None:
        """A worker's answer to its challenge: the set-up if it proves the secret."""
        if self.gate.verify(worker, answer):
            self._send_setup(worker)
        else:
            log.error("gs-load: worker %s did not prove the run's secret; it gets no set-up", worker)

    def _send_setup(self, worker: str) -> None:
        runner = self.environment.runner
        setup = self.gate.setup_for(worker, self.setup) if self.setup is not None else None
        if setup is not None and isinstance(runner, MasterRunner):
            runner.send_message(SETUP, setup, client_id=worker)

    # --- after the last ------------------------------------------------------------------
    def finish(self) -> None:
        """Judge the run, cancel its jobs, stop the fake, write the report files (once)."""
        if self.outcome is not None:
            return
        duration = time.monotonic() - self.started if self.started is not None else 0.0
        tally = self._merged()
        after = self.fake.drained() if self.fake and self.before is not None else None
        tally.listener = self.run.violation  # what the run concludes counts in Locust's tables too
        conclude(tally, self.pool.jobs, self.before, after)
        left = self.pool.cancel_all()
        jobs_end = self.pool.statuses()
        self.pool.close()
        if self.fake:
            self.fake.stop()
        self.outcome = report.Outcome(
            tally, duration, self.target.url if not self.target.embedded else
            f"the embedded fake ({self.target.url})", counts_decided=self.target.embedded
            or bool(opts.value(self.options, "all_clauses")),
            max_violations=int(opts.value(self.options, "max_violations")),
            cost=self._cost(tally), nodes=self._nodes(), jobs_end=jobs_end,
            fake_cpu_s=self.fake.cpu_s if self.fake else None, load_cpu_s=tally.cpu_s,
            error=self.error or (f"jobs not cancelled: {', '.join(left)}" if left else ""))
        self.environment.process_exit_code = self.outcome.exit_code
        self._write_files(self.outcome)

    def _merged(self) -> Tally:
        own = self.run.own_tally()
        if not isinstance(self.environment.runner, MasterRunner):
            return Tally(node="run").merge(own)
        total = Tally(node="run")
        for tally in self.run.tallies.values():
            total.merge(tally)
        total.cpu_s += own.cpu_s
        return total

    def _nodes(self) -> dict[str, int]:
        """Calls per process (the workers' own, or the local process's)."""
        tallies = self.run.tallies or {self.run.tally.node: self.run.tally}
        return {node: sum(t.exchanges.values()) for node, t in sorted(tallies.items())}

    def _cost(self, tally: Tally) -> dict[str, Any]:
        return self.pool.summary(sum(tally.exchanges.values()), sum(tally.sent.values()),
                                 sum(tally.received.values()))

    def _write_files(self, out: report.Outcome) -> None:
        for name, render in (("markdown", report.markdown), ("junit", report.junit)):
            path = opts.value(self.options, name)
            if path:
                formats.write(path, {formats.form_of(path): functools.partial(render, out)},
                              [self.target.token])
        path = opts.value(self.options, "results_json")
        if path:
            Path(path).write_text(json.dumps(results(out), indent=1), encoding="utf-8")

    # --- Ctrl-C, SIGTERM, and the end of Locust's own output ------------------------------
    def quitting(self) -> None:
        """Locust is shutting down: finish if the run was cut short, then add gs-load's part
        to Locust's HTML report."""
        runner = self.environment.runner
        if self.outcome is None and runner is not None and runner.state != STATE_STOPPED \
                and self.started is not None:
            runner.stop()  # test_stop finishes the run
        self.finish()
        page = getattr(self.locust, "html_file", None)
        if page and self.outcome is not None and os.path.exists(page) \
                and os.path.getmtime(page) >= self.run_started:
            text = Path(page).read_text(encoding="utf-8")
            Path(page).write_text(scrub_text(report.inject(text, self.outcome), [self.target.token]),
                                  encoding="utf-8")

    def print_report(self) -> None:
        if self.outcome is not None:
            print(report.text(self.outcome), flush=True)


def results(out: report.Outcome) -> dict[str, Any]:
    """The run's figures for tools (``--results-json``)."""
    return {
        "exit_code": out.exit_code, "verdict": out.verdict(), "error": out.error,
        "duration_s": out.duration_s, "calls_per_s": out.calls_per_s,
        "routes": [vars(r) for r in out.routes],
        "violations": {r.clause_id: {"count": r.count, "counts": r.counts,
                                     "examples": list(r.examples)} for r in out.violations},
        "counted": out.counted, "nodes": out.nodes, "jobs_end": out.jobs_end,
        "fake_cpu_s": out.fake_cpu_s, "load_cpu_s": out.load_cpu_s, "cost": out.cost,
        "loop_errors": dict(out.tally.loop_errors),
    }
