"""The execution-log stage's S3 server (spec §12.2): moto in a child process, sealed.

Why a process of its own: moto keeps its IAM switch and every account's objects in
process-wide globals. In a child they neither leak into the fake (nor into a test process
that uses moto itself) nor grow its memory, and stopping the child frees everything; its
``TMPDIR`` (where moto spills objects past its in-memory buffer) is a private directory the
parent removes.

What the stage enforces (``tests/stress/test_log_stage.py`` attacks each point):

- moto's own IAM checks are on (``INITIAL_NO_AUTH_ACTION_COUNT = 0``): every call is
  SigV4-verified against a key moto issued, the session token must match, and the caller's
  IAM policy decides. The fake hands out one STS session per run, of a role whose policy
  lists only its account's bucket and reads only the run's prefix.
- A gate in front of moto answers before a body byte is read: only signed ``GET``/``HEAD``
  calls without a body reach moto; writes, bucket creation, unsigned or presigned calls,
  non-S3 credential scopes and moto's own admin routes (``/moto-api``: reset, reset-auth,
  a data dump) get 403 and a closed connection.
- Connections are capped and idle ones are dropped.

The fake drives the stage over the child's stdin/stdout, one JSON object a line (no network
surface): ``bucket``, ``put``, ``delete``, ``grant`` (a run's credentials), ``revoke``,
``usage``. Stored bytes are capped here too (``--max-bytes``), a backstop under the fake's
own per-account accounting. EOF on stdin stops the child.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import logging
import os
import secrets
import shutil
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: Concurrent connections the stage serves; more are closed at once.
MAX_CONNECTIONS = 64
#: A connection with no complete request for this long is dropped.
IDLE_S = 10.0
_READ_METHODS = ("GET", "HEAD")
#: The IAM actions a run's role may list its bucket with. Real S3 (and moto 5.1) check
#: ``s3:ListBucket`` for a ListObjectsV2 call; moto 5.2 checks an action named after the
#: call, ``s3:ListObjectsV2``. Both name the same power over the same bucket resource.
LIST_ACTIONS = ("s3:ListBucket", "s3:ListObjectsV2")
_ERROR_XML = ('<?xml version="1.0" encoding="UTF-8"?>\n'
              "<Error><Code>{code}</Code><Message>{message}</Message></Error>")


def refusal(environ: dict[str, Any]) -> tuple[str, str] | None:
    """``(code, message)`` when the gate refuses this call before moto sees it, else None."""
    path = str(environ.get("PATH_INFO") or "")
    if path.startswith("/moto-api") or path.startswith("/_moto"):
        return "AccessDenied", "the stage's admin routes are closed"
    if environ.get("REQUEST_METHOD") not in _READ_METHODS:
        return "AccessDenied", "the stage is read-only over HTTP"
    declared = str(environ.get("CONTENT_LENGTH") or "0").strip() or "0"
    if declared != "0" or environ.get("HTTP_TRANSFER_ENCODING"):
        return "InvalidRequest", "a read carries no body"
    auth = str(environ.get("HTTP_AUTHORIZATION") or "")
    if not auth.startswith("AWS4-HMAC-SHA256 Credential="):
        return "AccessDenied", "requests must be signed (AWS SigV4 Authorization header)"
    scope = auth.partition("Credential=")[2].partition(",")[0].split("/")
    if len(scope) != 5 or scope[3] != "s3":
        return "AccessDenied", "only S3 calls are served"
    return None


class Gate:
    """WSGI middleware: refuse (403/400, unread, connection closed) what :func:`refusal` names."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        refused = refusal(environ)
        if refused is None:
            return self.app(environ, start_response)
        code, message = refused
        body = _ERROR_XML.format(code=code, message=message).encode()
        status = "400 Bad Request" if code == "InvalidRequest" else "403 Forbidden"
        start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return _answer_unread(body, environ.get("werkzeug.socket"))


def _answer_unread(body: bytes, sock: socket.socket | None) -> Iterator[bytes]:
    """Send the refusal, then stop reading: werkzeug would otherwise drain (read and drop)
    up to 10 GB of an unread body before it closes the connection."""
    yield body
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RD)


class Stage:
    """The moto account behind the gate: buckets, objects, per-run roles and sessions."""

    def __init__(self, max_bytes: int, region: str) -> None:
        from moto import settings
        from moto.iam.models import iam_backends
        from moto.s3.models import s3_backends
        from moto.sts.models import sts_backends

        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0  # moto's IAM checks, from the first call
        self.account = "".join(secrets.choice("123456789") for _ in range(12))
        self.iam = iam_backends[self.account]["aws"]
        self.s3 = s3_backends[self.account]["aws"]
        self.sts = sts_backends[self.account]["aws"]
        self.max_bytes = max_bytes
        self.region = region
        #: bucket -> key -> size: what the stage holds (only this process writes).
        self.sizes: dict[str, dict[str, int]] = {}
        self.roles: dict[str, dict[str, str]] = {}

    def used(self) -> int:
        return sum(sum(keys.values()) for keys in self.sizes.values())

    def bucket(self, name: str) -> dict[str, Any]:
        if name not in self.sizes:
            self.s3.create_bucket(name, self.region)
            self.sizes[name] = {}
        return {}

    def put(self, bucket: str, key: str, data64: str) -> dict[str, Any]:
        data = base64.b64decode(data64)
        keys = self.sizes[bucket]
        if self.used() - keys.get(key, 0) + len(data) > self.max_bytes:
            raise ValueError(f"the stage holds at most {self.max_bytes} bytes")
        self.s3.put_object(bucket, key, data)
        keys[key] = len(data)
        return {}

    def delete(self, bucket: str, keys: list[str]) -> dict[str, Any]:
        for key in keys:
            if self.sizes.get(bucket, {}).pop(key, None) is not None:
                self.s3.delete_object(bucket, key)
        return {}

    def grant(self, run: str, bucket: str, prefix: str) -> dict[str, Any]:
        """A fresh STS session of the run's role: list the bucket, read below the prefix."""
        role = "stage-" + run
        if role not in self.roles:
            trust = {"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{self.account}:root"},
                 "Action": "sts:AssumeRole"}]}
            self.iam.create_role(role, json.dumps(trust), "/", None, "fake-gs run stage", [], None)
            policy = {"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": list(LIST_ACTIONS), "Resource": f"arn:aws:s3:::{bucket}"},
                {"Effect": "Allow", "Action": "s3:GetObject",
                 "Resource": f"arn:aws:s3:::{bucket}/{prefix.strip('/')}/*"}]}
            self.iam.put_role_policy(role, "read-run-stage", json.dumps(policy))
            self.roles[role] = {}
        self._forget_sessions(role)
        session = self.sts.assume_role(region_name=self.region, role_session_name="fake-gs-logs",
                                       role_arn=f"arn:aws:iam::{self.account}:role/{role}",
                                       policy="", duration=3600, external_id="")
        return {"access_key_id": session.access_key_id, "secret_access_key": session.secret_access_key,
                "session_token": session.session_token}

    def revoke(self, run: str) -> dict[str, Any]:
        role = "stage-" + run
        if self.roles.pop(role, None) is not None:
            self._forget_sessions(role)
            self.iam.delete_role_policy(role, "read-run-stage")
            self.iam.delete_role(role)
        return {}

    def _forget_sessions(self, role: str) -> None:
        """Earlier sessions of ``role`` stop working (one live session per run, bounded)."""
        arn = f"arn:aws:iam::{self.account}:role/{role}"
        self.sts.assumed_roles[:] = [r for r in self.sts.assumed_roles if r.role_arn != arn]

    def usage(self) -> dict[str, Any]:
        return {"bytes": self.used(), "objects": sum(len(k) for k in self.sizes.values()),
                "runs": len(self.roles)}

    def handle(self, command: dict[str, Any]) -> dict[str, Any]:
        op = command.pop("op", None)
        ops: dict[str, Callable[..., dict[str, Any]]] = {
            "bucket": self.bucket, "put": self.put, "delete": self.delete, "grant": self.grant,
            "revoke": self.revoke, "usage": self.usage}
        if op not in ops:
            raise ValueError(f"unknown stage command {op!r}")
        return ops[op](**command)


def serve(host: str, port: int) -> Any:
    """moto's server app behind the gate on a bounded, timed-out threaded server."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import ThreadedWSGIServer

    class Handler(MotoRequestHandler):
        timeout = IDLE_S  # socket time-out: a silent or trickling client is dropped

        def log_request(self, *args: Any, **kwargs: Any) -> None:
            """No access log: the fake's own log is the one to read."""

    class Server(ThreadedWSGIServer):
        slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

        def process_request(self, request: Any, client_address: Any) -> None:
            if not self.slots.acquire(blocking=False):
                self.shutdown_request(request)
                return
            super().process_request(request, client_address)

        def process_request_thread(self, request: Any, client_address: Any) -> None:
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.slots.release()

    app = Gate(DomainDispatcherApplication(create_backend_app))
    server = Server(host, port, app, handler=Handler)
    threading.Thread(target=server.serve_forever, name="log-stage", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the fake's execution-log stage (run by fake_gs)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--max-bytes", type=int, required=True)
    ap.add_argument("--region", required=True)
    args = ap.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    stage = Stage(args.max_bytes, args.region)
    server = serve(args.host, 0)
    host, port = server.server_address[:2]
    print(json.dumps({"ok": True, "endpoint": f"http://{host}:{port}"}), flush=True)
    for line in sys.stdin:
        try:
            answer = {"ok": True, **stage.handle(json.loads(line))}
        except Exception as exc:  # every command gets an answer; the fake raises it
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
    server.shutdown()
    # The parent removes this directory too; a parent killed outright cannot.
    tmp = os.environ.get("TMPDIR", "")
    if os.path.basename(tmp).startswith("fake-gs-stage-"):
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
