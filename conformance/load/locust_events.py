"""The Locust event hooks of a load run: which part each process plays, and when.

The sequence (init, test_start, test_stopping, test_stop, quitting, quit) is
:mod:`conformance.load.run`'s docstring; the state it acts on is that module's :data:`RUN`,
and the master's part is :class:`conformance.load.finish.Host`. Importing this module
registers the hooks (the locustfile does).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import gevent
from locust import events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from conformance.judge.tally import Tally
from conformance.load import options as opts
from conformance.load import surface
from conformance.load.finish import EXIT_SETUP, Host
from conformance.load.run import HELLO, RUN, SETUP, STOP, TALLY, TALLY_GRACE_S, log
from conformance.load.surface import CHALLENGE, PROOF


@events.init_command_line_parser.add_listener
def _arguments(parser: Any) -> None:
    opts.add_locust_arguments(parser)


@events.init.add_listener
def _init(environment: Environment, runner: Any, web_ui: Any = None, **_: Any) -> None:
    RUN.environment = environment
    secret = opts.value(environment.parsed_options, "load_secret")
    if isinstance(runner, WorkerRunner):
        RUN.tally.node = f"worker-{runner.client_id}"
        RUN.secret = secret
        runner.register_message(CHALLENGE, lambda msg, **_: _answer_challenge(runner, msg.data))
        runner.register_message(SETUP, lambda msg, **_: RUN.apply(msg.data))
        runner.register_message(STOP, _worker_stop, concurrent=True)
        runner.send_message(HELLO, None)  # a set-up sent before this worker listened is resent
        return
    refusal = surface.bind_refusal(environment.parsed_options, isinstance(runner, MasterRunner), web_ui is not None)
    if refusal:
        log.error("gs-load: %s", refusal)
        sys.exit(EXIT_SETUP)
    if web_ui is not None:
        surface.guard_web_ui(web_ui, secret)
    RUN.tally.node = "master" if isinstance(runner, MasterRunner) else "local"
    gate = surface.Gate(secret)
    door = None
    if isinstance(runner, MasterRunner):  # before the host: starting the fake lets workers in
        runner.register_message(TALLY, _tally_in)
        runner.register_message(HELLO, _hello)
        runner.register_message(PROOF, _proof)
        if secret:  # Locust's own messages too wait for a worker's proof
            door = surface.Door(runner, gate, frozenset({HELLO, PROOF}))
    RUN.host = Host(environment, gate, door)


def _answer_challenge(runner: Any, data: Any) -> None:
    """The master's nonce: answer with the proof of the secret (none: nothing to prove)."""
    nonce = data.get("nonce") if isinstance(data, dict) else None
    if RUN.secret and isinstance(nonce, str):
        RUN.nonce = nonce
        runner.send_message(PROOF, {"proof": surface.proof(RUN.secret, nonce, runner.client_id)})
    else:
        log.error("gs-load: the master asks for the run's secret; give this worker --load-secret")


def _proof(environment: Environment, msg: Any, **_: Any) -> None:
    if RUN.host is not None:
        RUN.host.proof(str(msg.node_id), msg.data.get("proof") if isinstance(msg.data, dict) else None)


def _worker_stop(environment: Environment, msg: Any, **_: Any) -> None:
    """The master asks: stop the users, then send the tally (test_stop does)."""
    runner = environment.runner
    assert runner is not None, "a worker's message handler runs on its runner"
    runner.stop()


@events.test_start.add_listener
def _test_start(environment: Environment, **_: Any) -> None:
    if RUN.host is not None:
        RUN.host.start()


@events.test_stopping.add_listener
def _test_stopping(environment: Environment, **_: Any) -> None:
    runner = environment.runner
    if not isinstance(runner, MasterRunner):
        return
    expected = {client.id for client in runner.clients.all}
    runner.send_message(STOP, None)
    deadline = time.monotonic() + float(environment.stop_timeout or 0) + TALLY_GRACE_S
    while not expected <= set(RUN.tallies) and time.monotonic() < deadline:
        gevent.sleep(0.1)
    missing = expected - set(RUN.tallies)
    if missing:
        log.error("gs-load: no tally from %d worker(s): %s", len(missing), ", ".join(sorted(missing)))


def _hello(environment: Environment, msg: Any, **_: Any) -> None:
    if RUN.host is not None:
        RUN.host.hello(str(msg.node_id))


def _tally_in(environment: Environment, msg: Any, **_: Any) -> None:
    RUN.tallies[str(msg.node_id)] = Tally.from_wire(msg.data)


@events.test_stop.add_listener
def _test_stop(environment: Environment, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        runner.send_message(TALLY, RUN.own_tally().to_wire())
    elif RUN.host is not None:
        RUN.host.finish()


@events.quitting.add_listener
def _quitting(environment: Environment, **_: Any) -> None:
    if RUN.host is not None:
        RUN.host.quitting()


@events.quit.add_listener
def _quit(exit_code: int, **_: Any) -> None:
    if RUN.host is not None:
        RUN.host.print_report()
