"""gs-load's network surface: who may steer a run and who may learn its credential.

- **Binding.** The web UI and the master listen on loopback unless told otherwise
  (:func:`default_binds`); listening anywhere else needs ``--load-secret`` (:func:`bind_refusal`),
  and then the web UI asks for it (HTTP Basic, any user name, the secret as the password).
- **Workers.** With a secret, a worker gets no set-up (target, jobs, profile, token) until it
  has proven the secret: the master answers its hello with a fresh nonce, the worker answers
  with an HMAC of it under the secret (:class:`Gate`), and the token travels sealed under a key
  derived from the secret and that nonce (:func:`seal`), never in clear text. Locust's own
  messages wait for the proof too (:class:`Door`): a worker's ``client_ready`` is held, so
  until it proves the secret it is no Locust worker of the run: no spawn message (which
  names the target host and Locust's parsed options), no heartbeat, no stop; it gets an
  ``ack`` (so its gs-load hooks start and can answer the challenge) and the challenge. The
  run's token and secret are also taken off the options Locust sends every worker
  (:func:`scrub_options`). Without a secret (loopback only) every local worker is let in.
- **The embedded fake.** It listens on loopback unless ``--fake-host`` names another
  interface, which also needs ``--expose-fake`` (:func:`fake_host_refusal`); the fake then
  takes only fresh random tokens (:func:`exposed_fake_tokens`): the kit's fixed ones (or none)
  would let anyone on that network in, its admin API included.
- **Web form.** ``POST /swarm`` may set only Locust's own run fields (users, spawn rate,
  run time, user classes); a field naming anything else (a job, an output path, the job
  budget, a report file of Locust's) is refused with 400 before Locust reads the form
  (:func:`guard_web_ui`), and the master reads gs-load's options from a copy taken at start
  (:func:`frozen_options`), which no form can touch.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import ipaddress
import logging
import secrets
from collections.abc import Callable
from typing import Any

from conformance.load import options as opts
from contract.auth import AUTHORIZATION_HEADER

#: Fields of Locust's ``POST /swarm`` form a gs-load run takes (its web UI's start form).
SWARM_FIELDS = frozenset({"user_count", "spawn_rate", "run_time", "user_classes", "shape_class", "host"})
LOOPBACK = "127.0.0.1"
#: Messages of the worker handshake (after the worker's hello).
CHALLENGE, PROOF = "gs_challenge", "gs_proof"
_NONCE_BYTES = 32
#: Workers the master keeps a nonce or a held ``client_ready`` for at once (oldest dropped):
#: a flood of hellos under fresh ids costs a bounded amount.
MAX_PENDING_WORKERS = 256
log = logging.getLogger("gs-load")


def is_loopback(host: str | None) -> bool:
    """Whether an interface to bind is loopback only (``""`` and ``*`` mean every interface)."""
    if not host or host == "*":
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_binds(argv: list[str]) -> list[str]:
    """``--web-host`` and ``--master-bind-host`` on loopback unless ``argv`` names them
    (Locust's defaults are every interface)."""
    extra: list[str] = []
    for flag in ("--web-host", "--master-bind-host"):
        if not any(a == flag or a.startswith(flag + "=") for a in argv):
            extra += [flag, LOOPBACK]
    return extra


def bind_refusal(options: Any, master: bool, web: bool) -> str | None:
    """Why this process must not start: it listens beyond loopback without a secret."""
    if opts.value(options, "load_secret"):
        return None
    wide = []
    if master and not is_loopback(getattr(options, "master_bind_host", LOOPBACK)):
        wide.append(f"the master (--master-bind-host {getattr(options, 'master_bind_host', '')!r})")
    if web and not is_loopback(getattr(options, "web_host", LOOPBACK)):
        wide.append(f"the web UI (--web-host {getattr(options, 'web_host', '')!r})")
    if not wide:
        return None
    return (f"{' and '.join(wide)} would listen beyond loopback with no --load-secret: anyone who "
            "reaches it could join as a worker (and get the token) or start a run; give every process "
            "the same --load-secret (or $GS_LOAD_SECRET), or bind 127.0.0.1")


def fake_host_refusal(host: str, exposed: bool, fake_args: tuple[str, ...]) -> str | None:
    """Why the embedded fake must not start on ``host``: beyond loopback without
    ``--expose-fake``, or a ``--host`` of its own among the fake's extra flags."""
    if any(a == "--host" or a.startswith("--host=") for a in fake_args):
        return ("--fake-args (or the profile's [fake] args) name --host: the fake's interface is "
                "--fake-host's (beyond loopback with --expose-fake)")
    if is_loopback(host) or exposed:
        return None
    return (f"--fake-host {host!r} is beyond loopback: anyone on that network could call the fake "
            "and its admin API; add --expose-fake to mean it (the fake then takes only random tokens), "
            "or bind 127.0.0.1")


def exposed_fake_tokens() -> tuple[str, str]:
    """A fresh service token and admin token for a fake reachable beyond loopback."""
    return f"gs-load-{secrets.token_urlsafe(24)}", f"gs-load-admin-{secrets.token_urlsafe(24)}"


def frozen_options(options: Any) -> argparse.Namespace:
    """gs-load's options as they are now (values from the environment included): what the
    master reads for the rest of the run, out of reach of Locust's web form."""
    return argparse.Namespace(**{o.name: opts.value(options, o.name) for o in opts.OPTIONS})


def scrub_options(options: Any) -> None:
    """Take the credentials off Locust's parsed options: the master sends them whole to every
    worker with each spawn message (the token and secret were read already)."""
    for name in ("token", "load_secret"):
        if hasattr(options, name):
            setattr(options, name, None)


def guard_web_ui(web_ui: Any, secret: str | None) -> None:
    """Refuse, before Locust's own handler reads it, a ``POST /swarm`` carrying a field beyond
    :data:`SWARM_FIELDS`; with a secret, ask every request for it (HTTP Basic)."""
    from flask import Response, request

    @web_ui.app.before_request
    def _guard() -> Response | None:
        if secret is not None and not _authorised(request.headers.get(AUTHORIZATION_HEADER, ""), secret):
            return Response("gs-load: this web UI needs the run's --load-secret (any user name)", 401,
                            {"WWW-Authenticate": 'Basic realm="gs-load"'})
        if request.method == "POST" and request.path.rstrip("/").endswith("/swarm"):
            refused = sorted(set(request.form) - SWARM_FIELDS)
            if refused:
                return Response(f"gs-load: the web form cannot set {', '.join(refused)}: a run's job, outputs "
                                "and job budget are its command line's", 400)
        return None


def _authorised(header: str, secret: str) -> bool:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        _, _, password = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")
    except (ValueError, UnicodeDecodeError):
        return False
    return hmac.compare_digest(password.encode(), secret.encode())


def proof(secret: str, nonce: str, worker: str) -> str:
    """A worker's answer to the master's nonce: it holds the secret (bound to its own id)."""
    return hmac.new(secret.encode(), f"gs-load-proof|{nonce}|{worker}".encode(), hashlib.sha256).hexdigest()


def _keystream(secret: str, nonce: str, worker: str, n: int) -> bytes:
    out = b""
    counter = 0
    while len(out) < n:
        block = f"gs-load-seal|{nonce}|{worker}|{counter}".encode()
        out += hmac.new(secret.encode(), block, hashlib.sha256).digest()
        counter += 1
    return out[:n]


def seal(secret: str, nonce: str, worker: str, text: str | None) -> dict[str, str] | None:
    """``text`` (the token) encrypted for one worker under a key derived from the secret and
    its nonce (an HMAC-SHA256 keystream), with a tag; None stays None."""
    if text is None:
        return None
    data = text.encode()
    box = bytes(a ^ b for a, b in zip(data, _keystream(secret, nonce, worker, len(data)), strict=True))
    tag = hmac.new(secret.encode(), b"gs-load-tag|" + nonce.encode() + box, hashlib.sha256).hexdigest()
    return {"box": base64.b64encode(box).decode(), "tag": tag}


def unseal(secret: str, nonce: str, worker: str, sealed: dict[str, str] | None) -> str | None:
    """The token a worker's sealed set-up holds; ValueError if it was not sealed for it."""
    if sealed is None:
        return None
    box = base64.b64decode(sealed["box"])
    tag = hmac.new(secret.encode(), b"gs-load-tag|" + nonce.encode() + box, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(tag, str(sealed.get("tag", ""))):
        raise ValueError("the set-up's token was not sealed under this run's secret")
    return bytes(a ^ b for a, b in zip(box, _keystream(secret, nonce, worker, len(box)), strict=True)).decode()


class Gate:
    """The master's side of the worker handshake: who was challenged with what, who proved it."""

    def __init__(self, secret: str | None) -> None:
        self.secret = secret
        self.nonces: dict[str, str] = {}
        self.proven: set[str] = set()
        #: Called with a worker's id once it proved the secret (the :class:`Door` lets it in).
        self.on_proven: Callable[[str], None] | None = None

    def challenge(self, worker: str) -> str | None:
        """A fresh nonce for ``worker`` (None: no secret, the worker is let in as it is)."""
        if self.secret is None:
            self.proven.add(worker)
            return None
        nonce = secrets.token_hex(_NONCE_BYTES)
        self.nonces.pop(worker, None)
        _keep_newest(self.nonces, MAX_PENDING_WORKERS - 1)
        self.nonces[worker] = nonce
        self.proven.discard(worker)
        return nonce

    def verify(self, worker: str, answer: Any) -> bool:
        """Whether ``answer`` proves the secret for the nonce ``worker`` was given (once)."""
        nonce = self.nonces.get(worker)
        if self.secret is None or nonce is None or not isinstance(answer, str):
            return False
        ok = hmac.compare_digest(answer, proof(self.secret, nonce, worker))
        if ok:
            self.proven.add(worker)
            if self.on_proven is not None:
                self.on_proven(worker)
        return ok

    def setup_for(self, worker: str, setup: dict[str, Any]) -> dict[str, Any] | None:
        """The set-up a proven worker gets (its token sealed for it); None for anyone else."""
        if worker not in self.proven:
            return None
        if self.secret is None:
            return setup
        nonce = self.nonces[worker]
        target = dict(setup["target"])
        target["token"] = seal(self.secret, nonce, worker, target.get("token"))
        return {**setup, "target": target, "sealed": True}


def _keep_newest(pending: dict[str, Any], n: int) -> None:
    """Drop the oldest entries of ``pending`` (insertion order) until at most ``n`` remain."""
    while len(pending) > n:
        del pending[next(iter(pending))]


class Door:
    """Locust's own messages from a worker, held until it proved the run's secret.

    Locust's master makes any process that sends ``client_ready`` a worker of the run: it
    sends it every spawn message (the target host, Locust's parsed options: the job id, the
    output paths), heartbeats and stops. Installed on the master's runner when the run has a
    secret, the door passes an unproven worker's gs-load hello and proof only; its
    ``client_ready`` is held and answered with a bare ``ack`` (no worker index: it takes
    none of the run's), and everything else it sends is dropped. Once the :class:`Gate` says
    it proved the secret, its held ``client_ready`` goes to Locust as if it had just
    arrived. A message whose sender id is not the connection's own is dropped as well (a
    worker cannot speak for another)."""

    def __init__(self, runner: Any, gate: Gate, let_through: frozenset[str]) -> None:
        self.runner, self.gate, self.let_through = runner, gate, let_through
        self.held: dict[str, Any] = {}
        self._handle = runner.handle_message
        runner.handle_message = self.handle
        gate.on_proven = self.admit

    def handle(self, client_id: str, msg: Any) -> None:
        """Locust's dispatch of one message from ``client_id``, behind the door."""
        if getattr(msg, "node_id", None) != client_id:
            log.warning("gs-load: dropped a %r message whose sender id is not its connection's",
                        getattr(msg, "type", "?"))
            return
        if client_id in self.gate.proven or msg.type in self.let_through:
            self._handle(client_id, msg)
        elif msg.type == "client_ready":
            self.held.pop(client_id, None)
            _keep_newest(self.held, MAX_PENDING_WORKERS - 1)
            self.held[client_id] = msg
            self.runner.server.send_to_client(type(msg)("ack", None, client_id))  # Locust's Message

    def admit(self, worker: str) -> None:
        """``worker`` proved the secret: Locust learns of it now (its held ``client_ready``)."""
        msg = self.held.pop(worker, None)
        if msg is not None:
            self._handle(worker, msg)
