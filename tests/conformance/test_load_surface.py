"""gs-load's network surface: the web UI and the master listen on
loopback unless told otherwise, beyond loopback only with --load-secret; a worker proves the
secret before it gets any set-up and the token reaches it only sealed; Locust's web form
cannot change the run's job, outputs or job budget. The rogue worker and the web-form attack
are rerun against real gs-load processes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from conformance.load import surface
from conformance.load.cli import locust_argv

PAT = "pat-load-surface-6b1d0e3a-never-to-a-rogue"
SECRET = "load-secret-9a7c41f2-shared-by-the-run"
HERE = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_gs_load_binds_the_web_ui_and_the_master_to_loopback_unless_told() -> None:
    argv = locust_argv(["--users", "2"])
    assert argv[argv.index("--web-host") + 1] == "127.0.0.1"
    assert argv[argv.index("--master-bind-host") + 1] == "127.0.0.1"
    given = locust_argv(["--web-host=10.0.0.5", "--master-bind-host", "10.0.0.5"])
    assert given.count("--master-bind-host") == 1 and "127.0.0.1" not in given


@pytest.mark.parametrize(("master", "web", "secret", "refused"), [
    ("127.0.0.1", "127.0.0.1", None, False),
    ("*", "127.0.0.1", None, True),          # Locust's default: every interface
    ("127.0.0.1", "", None, True),
    ("0.0.0.0", "10.1.2.3", None, True),
    ("0.0.0.0", "10.1.2.3", SECRET, False),
    ("::1", "localhost", None, False),
])
def test_binding_beyond_loopback_needs_the_secret(master: str, web: str, secret: str | None,
                                                   refused: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    monkeypatch.delenv("GS_LOAD_SECRET", raising=False)
    options = argparse.Namespace(master_bind_host=master, web_host=web, load_secret=secret)
    why = surface.bind_refusal(options, master=True, web=True)
    assert (why is not None) == refused, why
    if why:
        assert "--load-secret" in why


def test_a_worker_gets_no_setup_before_it_proves_the_secret_and_the_token_only_sealed() -> None:
    gate = surface.Gate(SECRET)
    setup = {"target": {"url": "http://x", "token": PAT}, "jobs": ["j"]}
    nonce = gate.challenge("w1")
    assert nonce is not None and gate.setup_for("w1", setup) is None
    assert not gate.verify("w1", "0" * 64) and gate.setup_for("w1", setup) is None
    assert not gate.verify("w1", surface.proof("another secret", nonce, "w1"))
    assert not gate.verify("w1", surface.proof(SECRET, nonce, "w2"))  # bound to its own id
    assert gate.verify("w1", surface.proof(SECRET, nonce, "w1"))
    sent = gate.setup_for("w1", setup)
    assert sent is not None and PAT not in json.dumps(sent)
    assert surface.unseal(SECRET, nonce, "w1", sent["target"]["token"]) == PAT
    with pytest.raises(ValueError):
        surface.unseal("guess", nonce, "w1", sent["target"]["token"])
    again = gate.challenge("w1")  # a new hello: a new nonce, the old proof is void
    assert not gate.verify("w1", surface.proof(SECRET, nonce, "w1")) and again != nonce


def _gs_load(*args: str, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "conformance.load.cli", *args]
    return subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})}, start_new_session=True)


def _listening(port: int, deadline_s: float = 90.0) -> str:
    """The local address the process listening on ``port`` bound (from /proc/net/tcp*)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as f:
                for row in f.readlines()[1:]:
                    local, state = row.split()[1], row.split()[3]
                    address, hex_port = local.split(":")
                    if int(hex_port, 16) == port and state == "0A":
                        return address
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port}")


def _wait_for(log: Path, text: str, deadline_s: float = 90.0) -> None:
    end = time.monotonic() + deadline_s
    while text not in log.read_text(errors="replace"):
        assert time.monotonic() < end, log.read_text(errors="replace")[-2000:]
        time.sleep(0.2)


def _stop(proc: subprocess.Popen[bytes], log: Path) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # gs-load's own shutdown: it cancels its jobs
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return log.read_text(errors="replace")[-3000:]


@pytest.mark.slow
def test_a_rogue_worker_gets_nothing_while_a_worker_with_the_secret_runs(tmp_path: Path) -> None:
    """A master with a secret and the token (the fake takes only that token); a rogue with no
    secret and a worker with it join. The rogue sends Locust's client_ready, says hello,
    guesses a proof and keeps its heartbeat for the whole run: it gets a bare ack and the
    challenge, nothing else: no spawn message, no heartbeat, no target host, no job id, no
    set-up, token or secret (before: the token in the set-up and in every spawn message, then
    Locust's spawn messages with the host and the options). The worker unseals the token and
    its calls succeed."""
    from fake_gs import serve_in_background

    port = _free_port()
    log, seen, results = tmp_path / "master.log", tmp_path / "rogue.jsonl", tmp_path / "results.json"
    with serve_in_background(tokens=(PAT,), max_total_gpus=1000) as url:
        _rogue_and_worker(url, port, log, seen, results, tmp_path)
    tail = log.read_text(errors="replace")[-3000:]
    got = seen.read_text()
    kinds = [json.loads(line)[0] for line in got.splitlines()]
    assert "gs_challenge" in kinds and set(kinds) <= {"ack", "gs_challenge"}, (kinds, tail)
    ran = json.loads(results.read_text())
    jobs = list(ran["jobs_end"])
    assert jobs, ran
    for secret in (PAT, SECRET, url.split("//", 1)[1], *jobs):
        assert secret not in got, (secret, got[:2000])
    assert "did not prove the run's secret" in log.read_text(errors="replace"), tail
    calls = {node: n for node, n in ran["nodes"].items() if n}
    assert len(calls) == 1 and ran["routes"] and not ran["error"], tail  # the worker with the secret ran
    assert not ran["loop_errors"] and all(not r["failures"] for r in ran["routes"]), ran  # its token worked


def _rogue_and_worker(url: str, port: int, log: Path, seen: Path, results: Path, tmp_path: Path) -> None:
    master = _gs_load("--master", "--headless", "--master-bind-port", str(port), "--expect-workers", "1",
                      "--users", "2", "--spawn-rate", "2", "--run-time", "8s", "--url", url, "--token", PAT,
                      "--max-jobs", "1", "--load-secret", SECRET, "--results-json", str(results), log=log)
    worker = rogue = None
    try:
        assert _listening(port) in ("0100007F", "00000000000000000000000001000000")  # loopback
        _wait_for(log, "Waiting for workers")  # the master's gs-load hooks are listening
        rogue = subprocess.Popen([sys.executable, str(HERE / "rogue_worker.py"), str(port), str(seen), "25"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        time.sleep(1.0)  # the rogue first: were it a worker of the run, the run would start with it
        assert "workers connected" not in log.read_text(errors="replace")
        worker = _gs_load("--worker", "--master-host", "127.0.0.1", "--master-port", str(port),
                          log=tmp_path / "worker.log", env={"GS_LOAD_SECRET": SECRET})
        master.wait(timeout=120)
        out, _ = rogue.communicate(timeout=60)
        assert rogue.returncode == 0, out
    finally:
        _stop(master, log)
        if worker is not None:
            _stop(worker, tmp_path / "worker.log")
        if rogue is not None and rogue.poll() is None:
            rogue.kill()
            rogue.wait()


@pytest.mark.slow
def test_the_web_form_cannot_change_the_job_the_outputs_or_the_budget(tmp_path: Path) -> None:
    """The web UI's POST /swarm with another job's id, a report path and a raised --max-jobs
    is refused (400) and changes nothing; the UI listens on loopback only."""
    web = _free_port()
    log, report = tmp_path / "ui.log", tmp_path / "victim.md"
    proc = _gs_load("--web-port", str(web), "--max-jobs", "1", "--token", PAT, log=log)
    try:
        assert _listening(web) == "0100007F"
        url = f"http://127.0.0.1:{web}/swarm"
        for field, value in (("job_id", "another-accounts-job"), ("markdown", str(report)),
                             ("max_jobs", "4"), ("html_file", str(report)), ("results_json", str(report))):
            answer = requests.post(url, data={"user_count": "1", "spawn_rate": "1", field: value}, timeout=30)
            assert answer.status_code == 400 and field in answer.text, (field, answer.text)
    finally:
        tail = _stop(proc, log)
    assert not report.exists(), tail
    assert "Swarming started" not in tail


def test_the_master_reads_its_options_from_a_copy_no_form_reaches() -> None:
    import argparse

    live = argparse.Namespace(job_id=None, max_jobs=1, markdown=None, token=PAT, load_secret=SECRET)
    frozen = surface.frozen_options(live)
    surface.scrub_options(live)
    live.job_id, live.max_jobs, live.markdown = "other", 4, "/tmp/x"  # what the form did before
    assert (frozen.job_id, frozen.max_jobs, frozen.markdown, frozen.token) == (None, 1, None, PAT)
    assert live.token is None and live.load_secret is None  # what Locust's spawn messages carry


def test_the_web_ui_asks_for_the_secret_beyond_loopback() -> None:
    from base64 import b64encode

    from flask import Flask

    class UI:
        app = Flask("t")

    UI.app.add_url_rule("/", "root", lambda: "ok")
    UI.app.add_url_rule("/swarm", "swarm", lambda: "started", methods=["POST"])
    surface.guard_web_ui(UI, SECRET)
    client = UI.app.test_client()
    assert client.get("/").status_code == 401
    auth = {"Authorization": "Basic " + b64encode(f"me:{SECRET}".encode()).decode()}
    assert client.get("/", headers=auth).status_code == 200
    assert client.post("/swarm", data={"user_count": "1", "spawn_rate": "1"}, headers=auth).status_code == 200
    assert client.post("/swarm", data={"job_id": "x"}, headers=auth).status_code == 400
    wrong: dict[str, Any] = {"Authorization": "Basic " + b64encode(b"me:guess").decode()}
    assert client.get("/", headers=wrong).status_code == 401


def test_the_door_holds_locusts_own_messages_until_the_worker_proves_the_secret() -> None:
    """Locust's master makes any sender of client_ready a worker (spawn messages with the
    host and options follow); behind the door an unproven worker gets a bare ack, only
    gs-load's hello and proof pass, and its client_ready reaches Locust once it proves the
    secret. A message claiming another sender's id is dropped."""
    from dataclasses import dataclass

    @dataclass
    class Message:  # Locust's (importing locust here would monkey-patch this process)
        type: str
        data: Any
        node_id: str

    class Runner:
        def __init__(self) -> None:
            self.handled: list[tuple[str, str]] = []
            self.sent: list[Message] = []
            self.server = self

        def handle_message(self, client_id: str, msg: Message) -> None:
            self.handled.append((client_id, msg.type))

        def send_to_client(self, msg: Message) -> None:
            self.sent.append(msg)

    runner, gate = Runner(), surface.Gate(SECRET)
    door = surface.Door(runner, gate, frozenset({"gs_hello", "gs_proof"}))
    for kind in ("client_ready", "heartbeat", "stats", "spawning", "locustfile", "gs_hello"):
        runner.handle_message("w1", Message(kind, None, "w1"))
    runner.handle_message("w1", Message("gs_hello", None, "w2"))  # speaking for another
    assert runner.handled == [("w1", "gs_hello")]
    assert [(m.type, m.data, m.node_id) for m in runner.sent] == [("ack", None, "w1")]
    nonce = gate.challenge("w1")
    assert nonce is not None and not gate.verify("w1", "0" * 64) and runner.handled == [("w1", "gs_hello")]
    assert gate.verify("w1", surface.proof(SECRET, nonce, "w1"))
    assert runner.handled[-1] == ("w1", "client_ready") and "w1" not in door.held
    runner.handle_message("w1", Message("heartbeat", None, "w1"))
    assert runner.handled[-1] == ("w1", "heartbeat")
    for n in range(surface.MAX_PENDING_WORKERS + 10):  # a flood of ids: bounded
        runner.handle_message(f"r{n}", Message("client_ready", None, f"r{n}"))
        gate.challenge(f"r{n}")
    assert len(door.held) <= surface.MAX_PENDING_WORKERS and len(gate.nonces) <= surface.MAX_PENDING_WORKERS


@pytest.mark.parametrize(("host", "exposed", "args", "refused"), [
    ("127.0.0.1", False, (), False),
    ("localhost", False, (), False),
    ("10.0.0.5", False, (), True),
    ("0.0.0.0", False, (), True),
    ("10.0.0.5", True, (), False),
    ("127.0.0.1", False, ("--host", "0.0.0.0"), True),  # the fake's own flag cannot go around it
    ("127.0.0.1", True, ("--host=10.0.0.5",), True),
])
def test_the_embedded_fake_goes_beyond_loopback_only_when_told_to(
        host: str, exposed: bool, args: tuple[str, ...], refused: bool) -> None:
    why = surface.fake_host_refusal(host, exposed, args)
    assert (why is not None) == refused, why
    if why and not args:
        assert "--expose-fake" in why


def test_gs_load_refuses_a_lan_fake_host_without_expose_fake(tmp_path: Path) -> None:
    """--fake-host on a LAN address exposed the embedded fake (no tokens: anyone on that
    network could call it and its admin API): now gs-load exits 2 before starting it."""
    log = tmp_path / "gs-load.log"
    proc = _gs_load("--headless", "--users", "1", "--run-time", "1s", "--fake-host", "0.0.0.0", log=log)
    assert proc.wait(timeout=120) == 2, log.read_text()
    assert "--expose-fake" in log.read_text() and "embedded fake at" not in log.read_text()


def test_an_exposed_fake_takes_only_its_fresh_random_tokens() -> None:
    """What --expose-fake starts (here on loopback): a fake that refuses a call without its
    random service token, and an admin API only its random admin token opens."""
    from conformance.load.fakeproc import EmbeddedFake
    from contract.auth import auth_headers
    from contract.routes import prefix, route

    service, admin = surface.exposed_fake_tokens()
    assert (service, admin) != surface.exposed_fake_tokens() and len(service) > 30
    fake = EmbeddedFake("127.0.0.1", tokens=(service, admin))
    try:
        url = fake.start()
        assert service not in repr(fake)
        jobs = url + prefix("DB", "S", "E") + route("list_jobs").render()
        assert requests.get(jobs, timeout=30).status_code == 401
        assert requests.get(jobs, headers=auth_headers("gs-conformance-token-a"), timeout=30).status_code == 401
        assert requests.get(jobs, headers=auth_headers(service), timeout=30).status_code == 200
        assert requests.get(url + "/_fake/state", timeout=30).status_code in (401, 403)
        assert requests.get(url + "/_fake/state", headers=auth_headers(service), timeout=30).status_code == 403
        assert "requests" in fake.state()  # with the admin token
    finally:
        fake.stop()
