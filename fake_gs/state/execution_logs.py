"""Execution logs the way the service keeps them (spec §12.2): files in an S3 stage.

Why: a client's ``fetch_execution_logs`` goes experiment-run -> SQL statement for stage
credentials -> S3 listing and downloads. Only a real S3 API exercises the last hop, so the
fake starts moto's S3 server (the ``logs`` extra) in a child process (:mod:`fake_gs.state.log_stage`:
moto's IAM checks on, a read-only gate in front): ``fake-gs`` at start-up, so it can print the
endpoint and export it for plain boto3 clients; an embedded fake the first time a client asks
for credentials. It writes each sub-job's log lines there as
``{prefix}/_logs/{sub_job_id}/execution.jsonl`` (one JSON object per line). Lines about the
whole job (created, placed, running, ended) go to every sub-job's file.

Each account (token) has a bucket of its own; each run gets credentials of its own (an STS
session of a role that lists the account's bucket and reads the run's prefix), so one
account's credentials, or made-up ones, read nothing of another's. The stage is a cache of
the fake's own records: every statement writes the run's files anew, so the stage's bytes
are capped per account and in total by dropping the least recently written runs' files.

An ended job's live log is dropped (tail-logs needs a running job), so its lines are kept
here, compressed, for the newest :data:`MAX_ARCHIVED_JOBS` ended jobs.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from contract.errors import ErrorCode
from contract.logs import StageCredentials, log_key
from fake_gs.answers.refusals import ApiError
from fake_gs.settings import FakeSettings
from fake_gs.state.records import JobRec

MAX_ARCHIVED_JOBS = 256
REGION = "us-west-2"
#: Run as a script, so the child imports moto and none of the fake.
STAGE_SCRIPT = Path(__file__).with_name("log_stage.py")
#: Runs holding credentials at once; the least recently written one's are revoked past it.
MAX_GRANTED_RUNS = 512
RUN_PREFIX = "run-"
MISSING_EXTRA = (
    "execution-log download needs the fake's 'logs' extra (an S3 store on loopback): "
    "pip install 'cortex-contract-kit[logs]' (moto[server], boto3)"
)


def run_name(job_id: str) -> str:
    """The experiment run a job's ``experiment-run`` answer names."""
    return RUN_PREFIX + job_id


def job_id_of_run(run: str) -> str | None:
    return run[len(RUN_PREFIX):] if run.startswith(RUN_PREFIX) else None


def stage_prefix(job: JobRec) -> str:
    """The run's prefix; the experiment name (the caller's text) as one escaped segment."""
    name = quote(job.experiment_name, safe="")
    name = name.replace(".", "%2E") if not name.strip(".") else name
    return f"experiments/{name}/versions/{run_name(job.public_id)}"


def files_of(job: JobRec, lines: list[dict[str, Any]]) -> dict[str, bytes]:
    """``sub_job_id -> execution.jsonl bytes``: a sub-job's own lines plus the job's."""
    out: dict[str, list[str]] = {s.sub_job_id: [] for s in job.sub_jobs}
    for entry in lines:
        text = json.dumps(entry, separators=(",", ":"))
        owner = entry.get("sub_job_id")
        for sub_job_id, file in out.items():
            if owner is None or owner == sub_job_id:
                file.append(text)
    return {sid: "".join(t + "\n" for t in texts).encode() for sid, texts in out.items()}


class StageProcess:
    """The child running :mod:`fake_gs.state.log_stage`, and its command pipe."""

    def __init__(self, max_bytes: int) -> None:
        # Found, not imported: moto's import takes seconds, and the child imports it anyway.
        if any(importlib.util.find_spec(name) is None for name in ("boto3", "moto", "flask")):
            raise ApiError(ErrorCode.LOGS_EXTRA_MISSING, MISSING_EXTRA)
        self.tmp = tempfile.mkdtemp(prefix="fake-gs-stage-")
        env = {**os.environ, "TMPDIR": self.tmp, "PYTHONUNBUFFERED": "1"}
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, str(STAGE_SCRIPT), "--max-bytes", str(max_bytes), "--region", REGION],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=self.tmp, text=True,
        )
        self.endpoint = ""

    def wait_ready(self) -> None:
        """Wait for the child's hello (its moto import takes seconds): its endpoint. A stage
        whose seal self-check failed says why, and stops."""
        try:
            hello = self._answer()
        except ApiError:
            self.close()
            raise
        self.endpoint = str(hello["endpoint"])
        #: How the child drives moto: its backends, or its public API (fake_gs.state.moto_account).
        self.moto_path = str(hello.get("moto", ""))

    def _answer(self) -> dict[str, Any]:
        out: IO[str] | None = self.proc.stdout
        line = out.readline() if out is not None else ""
        if not line:
            raise ApiError(ErrorCode.UNAVAILABLE, "the execution-log stage stopped")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise ApiError(ErrorCode.INTERNAL, f"execution-log stage: {answer.get('error')}")
        return answer

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        with self._lock:
            pipe = self.proc.stdin
            if pipe is None or self.proc.poll() is not None:
                raise ApiError(ErrorCode.UNAVAILABLE, "the execution-log stage stopped")
            pipe.write(json.dumps({"op": op, **args}) + "\n")
            pipe.flush()
            return self._answer()

    def close(self) -> None:
        """Stop the child (EOF on its stdin, then a kill if it lingers) and remove its files."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


@dataclass
class _Run:
    """What the stage holds for one run: its account, keys, bytes and credentials."""

    owner: str
    prefix: str
    keys: list[str] = field(default_factory=list)
    bytes: int = 0
    creds: dict[str, str] | None = None


class ExecutionLogs:
    """Archived lines of ended jobs plus the S3 stage, started on first use."""

    def __init__(self, settings: FakeSettings | None = None) -> None:
        settings = settings or FakeSettings()
        self.per_account = settings.max_stage_bytes_per_account
        self.total = settings.max_stage_bytes_total
        self._lock = threading.Lock()
        self._publish = threading.Lock()
        self._starting = threading.Lock()
        self._archive: OrderedDict[str, bytes] = OrderedDict()
        self._stage: StageProcess | None = None
        #: The child being started (close() stops it rather than wait for its import).
        self._spawning: StageProcess | None = None
        self._closed = False
        self._buckets: dict[str, str] = {}
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._name = uuid.uuid4().hex[:12]

    def keep(self, job: JobRec) -> None:
        """Archive an ending job's lines (called under the store lock: memory only)."""
        packed = zlib.compress(json.dumps(job.logs, separators=(",", ":")).encode())
        with self._lock:
            self._archive[job.job_id] = packed
            self._archive.move_to_end(job.job_id)
            while len(self._archive) > MAX_ARCHIVED_JOBS:
                self._archive.popitem(last=False)

    def clear(self) -> None:
        """Forget every archived line; the stage drops every run's files and credentials."""
        with self._lock:
            self._archive.clear()
        with self._publish:
            for job_id in list(self._runs):
                self._drop(job_id, revoke=True)

    def lines(self, job: JobRec, live: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The job's lines: archived ones once it ended, else the live copy given."""
        with self._lock:
            packed = self._archive.get(job.job_id)
        if packed is None:
            return live
        archived: list[dict[str, Any]] = json.loads(zlib.decompress(packed))
        return archived

    def stage(self) -> StageProcess:
        """The stage process, started on first use or by ``fake-gs`` at start-up (under a
        lock of its own: the archive's is taken under the store lock and must never wait
        for a process to start)."""
        with self._starting:
            if self._stage is None:
                if self._closed:
                    raise ApiError(ErrorCode.UNAVAILABLE, "the fake is stopping")
                spawned = self._spawning = StageProcess(self.total)
                try:
                    if self._closed:  # close() came while the extra was imported
                        raise ApiError(ErrorCode.UNAVAILABLE, "the fake is stopping")
                    spawned.wait_ready()
                except BaseException:
                    spawned.close()
                    raise
                finally:
                    self._spawning = None
                self._stage = spawned
            return self._stage

    def usage(self) -> dict[str, int]:
        """What the stage holds: bytes, runs with credentials, accounts with a bucket."""
        with self._publish:
            return {"bytes": sum(r.bytes for r in self._runs.values()), "runs": len(self._runs),
                    "accounts": len(self._buckets)}

    def publish(self, job: JobRec, lines: list[dict[str, Any]], *, empty: bool = False) -> StageCredentials:
        """Write the job's files to its account's bucket; answer the run's credentials.

        ``empty`` is the bend ``stage-logs-unwritten``: nothing written.
        """
        stage = self.stage()
        prefix = stage_prefix(job)
        files = {} if empty else {log_key(prefix, sid): data for sid, data in files_of(job, lines).items()}
        size = sum(len(d) for d in files.values())
        if size > self.per_account:
            raise ApiError(ErrorCode.LIMIT_EXCEEDED, f"the run's logs ({size} bytes) exceed the "
                           f"stage's {self.per_account} bytes per account")
        with self._publish:
            bucket = self._bucket(stage, job.owner)
            run = self._runs.pop(job.job_id, None) or _Run(job.owner, prefix)
            self._make_room(job.owner, size - run.bytes)
            stale = [k for k in run.keys if k not in files]
            if stale:
                stage.call("delete", bucket=bucket, keys=stale)
            for key, data in files.items():
                stage.call("put", bucket=bucket, key=key, data64=base64.b64encode(data).decode())
            run.keys, run.bytes = list(files), size
            if run.creds is None:
                run.creds = stage.call("grant", run=job.job_id, bucket=bucket, prefix=prefix)
            self._runs[job.job_id] = run
            while len(self._runs) > MAX_GRANTED_RUNS:
                self._drop(next(iter(self._runs)), revoke=True)
            creds = run.creds
        return StageCredentials(
            bucket=bucket, prefix=prefix + "/", region=REGION,
            access_key_id=creds["access_key_id"], secret_access_key=creds["secret_access_key"],
            session_token=creds["session_token"], endpoint=stage.endpoint,
        )

    def _bucket(self, stage: StageProcess, owner: str) -> str:
        """The account's bucket (named by a counter: never by its token)."""
        if owner not in self._buckets:
            name = f"fake-gs-stage-{self._name}-{len(self._buckets)}"
            stage.call("bucket", name=name)
            self._buckets[owner] = name
        return self._buckets[owner]

    def _make_room(self, owner: str, more: int) -> None:
        """Drop the least recently written runs' files until ``more`` bytes fit: the
        account's own first (its cap), then anyone's (the total; they are rewritten on the
        next statement, so nothing is lost)."""
        for mine_only, cap in ((True, self.per_account), (False, self.total)):
            def held(mine: bool = mine_only) -> int:
                return sum(r.bytes for r in self._runs.values() if r.owner == owner or not mine)

            for job_id, run in list(self._runs.items()):
                if held() + more <= cap:
                    break
                if run.bytes and (run.owner == owner or not mine_only):
                    self._drop(job_id, revoke=False)

    def _drop(self, job_id: str, *, revoke: bool) -> None:
        """Delete a run's files (and with ``revoke``, its credentials and record)."""
        run = self._runs[job_id] if not revoke else self._runs.pop(job_id, None)
        if run is None or self._stage is None:
            return
        if run.keys:
            self._stage.call("delete", bucket=self._buckets[run.owner], keys=run.keys)
        run.keys, run.bytes = [], 0
        if revoke and run.creds is not None:
            self._stage.call("revoke", run=job_id)

    def close(self) -> None:
        """Stop the stage; one still starting is killed, not waited for."""
        self._closed = True
        spawning = self._spawning
        if spawning is not None:
            spawning.proc.kill()  # its wait_ready() sees EOF; stage() cleans it up
        with self._starting:
            stage, self._stage = self._stage, None
        if stage is not None:
            stage.close()
