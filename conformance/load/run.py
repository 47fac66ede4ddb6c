"""One load run across Locust's processes: set-up on the master, traffic on the workers, the
judgement back on the master.

- **init** (every process): gs-load's options join Locust's; the master (or the one local
  process) reads the profile, sets the users' weights and starts the embedded fake when no
  ``--url`` is given.
- **test_start** (master): the jobs are created (capped), the fake's counters read, and the
  set-up (target, token, jobs, profile) sent to every worker (``gs_setup``).
- **test_stopping** (master): each worker is asked to stop its users (``gs_stop``) and
  answers with its tally (``gs_tally``) once they have; the master waits for all of them,
  so nothing is lost when Locust quits.
- **test_stop** (master): the run is judged and its jobs cancelled
  (:mod:`conformance.load.finish`); **quitting** does the same after Ctrl-C or SIGTERM and
  puts the tables and picture into Locust's HTML report; **quit** prints them last.

In a run without workers the same process plays both parts and no message is sent.
"""

from __future__ import annotations

import logging
import resource
from typing import Any

from gevent.event import Event
from locust import User, between
from locust.env import Environment

from conformance.judge.answers import Judge
from conformance.judge.exchange import Exchange
from conformance.judge.tally import Tally
from conformance.load import options as opts
from conformance.load.checked_client import kit_client
from conformance.load.jobs import Target
from conformance.load.profile import Profile, profile_from
from conformance.reporting.clean import clip

log = logging.getLogger("gs-load")
SETUP, STOP, TALLY, HELLO = "gs_setup", "gs_stop", "gs_tally", "gs_hello"
#: Seconds past ``--stop-timeout`` the master waits for the workers' tallies.
TALLY_GRACE_S = 30.0


class AnswerError(Exception):
    """What Locust's failure table shows for an error answer: its status and code."""


class ContractViolation(Exception):
    """What Locust's failure table shows for a contract violation: its first example."""


#: At most this many failures a single booking feeds to Locust (a count of 10^6 would not).
VIOLATIONS_FED = 1000


class LoadRun:
    """This process's part of the run (one per process: :data:`RUN`)."""

    def __init__(self) -> None:
        self.environment: Environment | None = None
        self.tally = Tally()
        self.tally.listener = self.violation
        self.judge = Judge(self.tally)
        self.ready = Event()
        self.failed = ""
        self.target: Target | None = None
        self.profile = Profile()
        self.jobs: list[str] = []
        self.slot, self.slots, self._users = 0, 1, 0
        self.tallies: dict[str, Tally] = {}
        self.host: Any = None  # the master's part (conformance.load.finish.Host)
        #: A worker's copy of the run's secret and the nonce it proved it for (its set-up's
        #: token is sealed under both: ``conformance.load.surface``).
        self.secret: str | None = None
        self.nonce = ""
        #: The Locust user classes by kind; ``conformance.load.users`` enters them.
        self.user_classes: dict[str, type[User]] = {}

    # --- the workers' part (also the local process's) -------------------------------------
    def apply(self, setup: dict[str, Any]) -> None:
        """Take the master's set-up: where to call, with which jobs and profile (its token
        unsealed with the run's secret when the master sealed it)."""
        target = dict(setup["target"])
        if setup.get("sealed"):
            from conformance.load.surface import unseal

            runner = self.environment.runner if self.environment else None
            target["token"] = unseal(self.secret or "", self.nonce, str(getattr(runner, "client_id", "")),
                                     target.get("token"))
        self.target = Target(**target)
        self.jobs = list(setup["jobs"])
        self.profile = profile_from(setup["profile"])
        self.slots = max(1, int(setup.get("slots", 1)))
        runner = self.environment.runner if self.environment else None
        self.slot = max(0, getattr(runner, "worker_index", 0)) % self.slots
        for kind, cls in self.user_classes.items():
            low, high = self.profile.kind(kind).think_s
            cls.wait_time = between(low, high)
        self.failed = str(setup.get("failed") or "")
        self.ready.set()

    def wait_ready(self) -> bool:
        """Wait for the set-up (the master may still be starting jobs); False: no run."""
        timeout = float(opts.value(self._options(), "startup_timeout_s")) + 60.0
        return bool(self.ready.wait(timeout)) and not self.failed and bool(self.jobs)

    def next_job(self) -> tuple[str, int]:
        """The job for the next user of this process, and its run-wide slot."""
        slot = self.slot + self.slots * self._users
        self._users += 1
        return self.jobs[slot % len(self.jobs)], slot

    def client(self, job_id: str, fields: dict[str, Any]) -> Any:
        assert self.target is not None
        return kit_client(self.target, job_id, self.judge, self.report,
                          {**self.profile.client, **fields})

    def report(self, ex: Exchange) -> None:
        """One exchange to Locust's statistics, under its route name."""
        if self.environment is None:
            return
        failure: BaseException | None = ex.error
        if failure is None and (ex.status or 0) >= 400:
            failure = AnswerError(f"{ex.status} {ex.code or ''}".strip())
        self.environment.events.request.fire(
            request_type=ex.method, name=ex.name, response_time=ex.elapsed_ms,
            response_length=len(ex.body), exception=failure, context={"bytes_sent": ex.sent},
            url=ex.url, start_time=ex.started)

    def violation(self, clause_id: str, example: str, count: int) -> None:
        """A contract violation, as a failure in Locust's own tables (request type
        ``CONTRACT``, named by its clause), so "# Fails" never reads 0 on a red run."""
        if self.environment is None:
            return
        for _ in range(min(count, VIOLATIONS_FED)):
            self.environment.events.request.fire(
                request_type="CONTRACT", name=clause_id, response_time=0, response_length=0,
                exception=ContractViolation(clip(example, 200)), context={})

    def loop_error(self, kind: str, op: str, exc: BaseException) -> None:
        self.tally.loop_errors[f"{kind} {op}: {type(exc).__name__}"] += 1

    def own_tally(self) -> Tally:
        """This process's tally, with the CPU it used."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.tally.cpu_s = usage.ru_utime + usage.ru_stime
        return self.tally

    def _options(self) -> Any:
        return self.environment.parsed_options if self.environment else None


RUN = LoadRun()
