"""The execution-log stage's S3 server (spec §12.2): moto in a child process, sealed.

Why a process of its own: moto keeps its IAM switch and every account's objects in
process-wide globals. In a child they neither leak into the fake (nor into a test process
that uses moto itself) nor grow its memory, and stopping the child frees everything; its
``TMPDIR`` (where moto spills objects past its in-memory buffer) is a private directory the
parent removes.

What the stage enforces (``tests/stress/test_log_stage.py`` attacks each point):

- moto's own IAM checks are on (``INITIAL_NO_AUTH_ACTION_COUNT=0``): every call is
  SigV4-verified against a key moto issued, the session token must match, and the caller's
  IAM policy decides. The fake hands out one STS session per run, of a role whose policy
  lists only its account's bucket and reads only the run's prefix. Every moto internal this
  takes is in :mod:`fake_gs.state.moto_account` (moto's public API when they are gone).
- Before it announces its endpoint, :func:`check_seal` tries the seal over HTTP; a moto
  that answers otherwise stops the stage with a message naming the moto it needs.
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
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING or __package__:
    from fake_gs.state import moto_account
else:  # run as the stage's script: its directory is on sys.path, and the fake is not imported
    import moto_account

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
    """The stage's account (:mod:`fake_gs.state.moto_account`): buckets, objects, per-run
    sessions, and what it holds."""

    def __init__(self, max_bytes: int, region: str) -> None:
        self.account = moto_account.open_account(region)
        self.max_bytes = max_bytes
        self.region = region
        #: bucket -> key -> size: what the stage holds (only this process writes).
        self.sizes: dict[str, dict[str, int]] = {}
        self.runs: set[str] = set()

    def used(self) -> int:
        return sum(sum(keys.values()) for keys in self.sizes.values())

    def bucket(self, name: str) -> dict[str, Any]:
        if name not in self.sizes:
            self.account.create_bucket(name)
            self.sizes[name] = {}
        return {}

    def put(self, bucket: str, key: str, data64: str) -> dict[str, Any]:
        data = base64.b64decode(data64)
        keys = self.sizes[bucket]
        if self.used() - keys.get(key, 0) + len(data) > self.max_bytes:
            raise ValueError(f"the stage holds at most {self.max_bytes} bytes")
        self.account.put_object(bucket, key, data)
        keys[key] = len(data)
        return {}

    def delete(self, bucket: str, keys: list[str]) -> dict[str, Any]:
        for key in keys:
            if self.sizes.get(bucket, {}).pop(key, None) is not None:
                self.account.delete_object(bucket, key)
        return {}

    def grant(self, run: str, bucket: str, prefix: str) -> dict[str, Any]:
        """A fresh STS session of the run's role: list the bucket, read below the prefix
        (the run's earlier sessions stop working)."""
        policy = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": list(LIST_ACTIONS), "Resource": f"arn:aws:s3:::{bucket}"},
            {"Effect": "Allow", "Action": "s3:GetObject",
             "Resource": f"arn:aws:s3:::{bucket}/{prefix.strip('/')}/*"}]}
        self.runs.add(run)
        return self.account.grant(run, json.dumps(policy))

    def revoke(self, run: str) -> dict[str, Any]:
        if run in self.runs:
            self.runs.discard(run)
            self.account.revoke(run)
        return {}

    def usage(self) -> dict[str, Any]:
        return {"bytes": self.used(), "objects": sum(len(k) for k in self.sizes.values()),
                "runs": len(self.runs)}

    def handle(self, command: dict[str, Any]) -> dict[str, Any]:
        op = command.pop("op", None)
        ops: dict[str, Callable[..., dict[str, Any]]] = {
            "bucket": self.bucket, "put": self.put, "delete": self.delete, "grant": self.grant,
            "revoke": self.revoke, "usage": self.usage}
        if op not in ops:
            raise ValueError(f"unknown stage command {op!r}")
        return ops[op](**command)


def _signed_get(endpoint: str, path: str, creds: dict[str, str], region: str) -> tuple[int, str]:
    """``(status, S3 error code or "")`` of a SigV4-signed GET sent through the gate."""
    import http.client
    from urllib.parse import urlsplit

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method="GET", url=endpoint + path)
    S3SigV4Auth(Credentials(creds["access_key_id"], creds["secret_access_key"], creds.get("session_token")),
                "s3", region).add_auth(request)
    where = urlsplit(endpoint)
    conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=IDLE_S)
    try:
        conn.request("GET", path, headers=dict(request.headers.items()))
        answer = conn.getresponse()
        body = answer.read(64 * 1024).decode(errors="replace")
    finally:
        conn.close()
    code = body.partition("<Code>")[2].partition("</Code>")[0]
    return answer.status, code


def check_seal(stage: Stage, endpoint: str) -> None:
    """At start-up, over HTTP through the gate, what ``tests/stress/test_log_stage.py``
    attacks at length: a made-up key is refused; a run's session lists its bucket and reads
    below its prefix, and nothing else; once revoked, it is refused. Raises RuntimeError
    naming the moto the stage needs when any answer differs (a moto that changes which IAM
    action a call is checked against, as 5.2 did for listing, fails here, not in a user's
    download)."""
    bucket, run = "fake-gs-seal-check-" + secrets.token_hex(4), "seal-check-" + secrets.token_hex(4)
    stage.account.create_bucket(bucket)
    # Keys like a run's (a sub-job id holds ':', which a signature must survive), and a
    # listing with a prefix, as the client's download makes them.
    inside, outside = "run/_logs/job:training:0/execution.jsonl", "other/_logs/job:training:0/execution.jsonl"
    listing = f"/{bucket}?list-type=2&prefix=run%2F"
    for key in (inside, outside):
        stage.account.put_object(bucket, key, b"{}\n")
    made_up = {"access_key_id": "ASIA" + secrets.token_hex(8).upper(), "secret_access_key": secrets.token_urlsafe(30),
               "session_token": secrets.token_urlsafe(48)}
    try:
        creds = stage.grant(run, bucket, "run/")
        seen = {"a made-up key lists the bucket": _signed_get(endpoint, listing, made_up, stage.region),
                "the run lists its bucket": _signed_get(endpoint, listing, creds, stage.region),
                "the run reads below its prefix": _signed_get(endpoint, f"/{bucket}/{quote(inside)}", creds, stage.region),
                "the run reads outside its prefix": _signed_get(endpoint, f"/{bucket}/{quote(outside)}", creds,
                                                                stage.region)}
        stage.revoke(run)
        seen["the revoked run lists its bucket"] = _signed_get(endpoint, listing, creds, stage.region)
    finally:
        stage.revoke(run)
        for key in (inside, outside):
            stage.account.delete_object(bucket, key)
        stage.account.delete_bucket(bucket)
    expected = {"a made-up key lists the bucket": 403, "the run lists its bucket": 200,
                "the run reads below its prefix": 200, "the run reads outside its prefix": 403,
                "the revoked run lists its bucket": 403}
    wrong = [f"{what}: {status} {code}".rstrip() + f" (expected {expected[what]})"
             for what, (status, code) in seen.items() if status != expected[what]]
    if wrong:
        raise RuntimeError(moto_account.needs_moto(f"the stage's seal self-check failed on {stage.account.path}: "
                                                   + "; ".join(wrong)))


def serve(host: str, port: int) -> Any:
    """moto's server app behind the gate on a bounded, timed-out threaded server."""
    from werkzeug.serving import ThreadedWSGIServer

    moto_handler: Any = moto_account.request_handler()  # a class, found at run time

    class Handler(moto_handler):
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

    app = Gate(moto_account.moto_app())
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
    moto_account.prepare()
    try:
        stage = Stage(args.max_bytes, args.region)
        server = serve(args.host, 0)
    except Exception as exc:  # the parent reads the reason off the first line
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    host, port = server.server_address[:2]
    endpoint = f"http://{host}:{port}"
    try:
        check_seal(stage, endpoint)
    except Exception as exc:
        server.shutdown()
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    print(json.dumps({"ok": True, "endpoint": endpoint, "moto": stage.account.path}), flush=True)
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
