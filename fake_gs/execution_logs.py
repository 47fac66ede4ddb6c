"""Execution logs the way the service keeps them (spec §12.2): files in an S3 stage.

Why: a client's ``fetch_execution_logs`` goes experiment-run -> SQL statement for stage
credentials -> S3 listing and downloads. Only a real S3 API exercises the last hop, so the
fake starts moto's S3 server (the ``logs`` extra) on loopback the first time a client asks
for credentials, and writes each sub-job's log lines there as
``{stage}/_logs/{sub_job_id}/execution.jsonl`` (one JSON object per line). Lines about the
whole job (created, placed, running, ended) go to every sub-job's file.

An ended job's live log is dropped (tail-logs needs a running job), so its lines are kept
here, compressed, for the newest :data:`MAX_ARCHIVED_JOBS` ended jobs: enough to fetch
logs after a run, bounded so a long-lived fake does not grow.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import uuid
import zlib
from collections import OrderedDict
from typing import Any

from contract.errors import ErrorCode
from contract.logs import StageCredentials, log_key
from fake_gs.errors import ApiError
from fake_gs.records import JobRec

MAX_ARCHIVED_JOBS = 256
REGION = "us-west-2"
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
    return f"experiments/{job.experiment_name}/versions/{run_name(job.job_id)}"


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


class _S3Stage:
    """moto's S3 server on a free loopback port, with one bucket for this fake."""

    def __init__(self) -> None:
        try:
            import boto3
            from botocore.config import Config
            from moto.server import ThreadedMotoServer
        except ImportError:
            raise ApiError(ErrorCode.LOGS_EXTRA_MISSING, MISSING_EXTRA) from None
        # moto's server logs every S3 call through werkzeug at INFO: not the fake's news.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.bucket = f"fake-gs-stage-{uuid.uuid4().hex[:12]}"
        self.s3 = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id="fake-gs", aws_secret_access_key="fake-gs",
            config=Config(s3={"addressing_style": "path"}),
        )
        self.s3.create_bucket(Bucket=self.bucket,
                              CreateBucketConfiguration={"LocationConstraint": REGION})

    def put(self, key: str, data: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=data,
                           ContentType="application/x-ndjson")

    def close(self) -> None:
        """Empty the bucket (moto keeps objects in this process) and stop the server."""
        try:
            listing = self.s3.list_objects_v2(Bucket=self.bucket)
            for item in listing.get("Contents") or []:
                self.s3.delete_object(Bucket=self.bucket, Key=item["Key"])
            self.s3.delete_bucket(Bucket=self.bucket)
        finally:
            self.server.stop()


class ExecutionLogs:
    """Archived lines of ended jobs plus the S3 stage, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._archive: OrderedDict[str, bytes] = OrderedDict()
        self._stage: _S3Stage | None = None

    def keep(self, job: JobRec) -> None:
        """Archive an ending job's lines (called under the store lock: memory only)."""
        packed = zlib.compress(json.dumps(job.logs, separators=(",", ":")).encode())
        with self._lock:
            self._archive[job.job_id] = packed
            self._archive.move_to_end(job.job_id)
            while len(self._archive) > MAX_ARCHIVED_JOBS:
                self._archive.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._archive.clear()

    def lines(self, job: JobRec, live: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The job's lines: archived ones once it ended, else the live copy given."""
        with self._lock:
            packed = self._archive.get(job.job_id)
        if packed is None:
            return live
        archived: list[dict[str, Any]] = json.loads(zlib.decompress(packed))
        return archived

    def stage(self) -> _S3Stage:
        with self._lock:
            if self._stage is None:
                self._stage = _S3Stage()
            return self._stage

    def publish(self, job: JobRec, lines: list[dict[str, Any]], *, empty: bool = False) -> StageCredentials:
        """Write the job's files to the stage; answer credentials scoped (by name) to it.

        moto checks no keys, so the temporary keys are fresh random strings, as the
        service's would be. ``empty`` is the ``logs-stage-empty`` mutant: nothing written.
        """
        stage = self.stage()
        prefix = stage_prefix(job)
        if not empty:
            for sub_job_id, data in files_of(job, lines).items():
                stage.put(log_key(prefix, sub_job_id), data)
        return StageCredentials(
            bucket=stage.bucket, prefix=prefix + "/", region=REGION,
            access_key_id="ASIA" + secrets.token_hex(8).upper(),
            secret_access_key=secrets.token_urlsafe(30), session_token=secrets.token_urlsafe(48),
            endpoint=stage.endpoint,
        )

    def close(self) -> None:
        with self._lock:
            stage, self._stage = self._stage, None
        if stage is not None:
            stage.close()
