"""``fetch_execution_logs(job_id)``: every log file of a job's run (spec §12.2).

Three hops: ``experiment-run`` names the run; ``POST /api/v2/statements`` (outside the
service prefix, with the same PAT) answers the run stage's scoped S3 credentials; those
list the stage and read every object below a ``_logs/{sub_job_id}/`` subtree. The S3 hop
needs boto3 (the ``logs`` extra), imported only here so the plain client stays light.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from client.calls.session import HttpSession
from client.errors import (
    AnswerTooLarge,
    ConfigError,
    CortexConnectionError,
    ProtocolError,
    UnsafeLogKey,
)
from contract.logs import (
    STATEMENTS_ROUTE,
    StageCredentials,
    parse_stage_credentials,
    split_log_key,
    stage_credentials_statement,
    statement_rows,
    unsafe_log_entry,
)

if TYPE_CHECKING:
    from client.config import ClientConfig

#: Most log files one download reads (a listing that goes on past it is refused).
MAX_LOG_FILES = 10_000
_READ_BYTES = 1024 * 1024
MISSING_BOTO3 = (
    "fetch_execution_logs needs boto3 to read the run's S3 stage: "
    "pip install 'cortex-contract-kit[logs]'"
)


class RunClient(Protocol):
    """What the download needs of a REST client (``client.rest.CortexRestClient`` is one):
    named by shape so this module never imports ``client.rest``, which imports it."""

    @property
    def config(self) -> ClientConfig: ...

    @property
    def http(self) -> HttpSession: ...

    def get_experiment_run(self, job_id: str) -> dict[str, Any]: ...


def stage_credentials(rest: RunClient, job_id: str) -> StageCredentials:
    """Hops 1 and 2: the run's name, then its stage credentials from the SQL API."""
    run = rest.get_experiment_run(job_id)
    experiment, name = run.get("experiment_name"), run.get("experiment_run_name")
    if not isinstance(experiment, str) or not isinstance(name, str):
        raise ProtocolError(f"experiment-run answered without both names: {run!r}"[:300],
                            route="get_experiment_run", job_id=job_id)
    sql = HttpSession(dataclasses.replace(rest.http.settings, prefix=""), **rest.http.seams())
    body = {"statement": stage_credentials_statement(experiment, name),
            "database": rest.config.database, "schema": rest.config.schema_name}
    answer = sql.call(STATEMENTS_ROUTE, json_body=body).body
    rows = statement_rows(answer)
    if not rows or not rows[0]:
        raise ProtocolError(f"the stage-credentials statement answered no rows: {answer!r}"[:300],
                            route=STATEMENTS_ROUTE.name, job_id=job_id)
    try:
        return parse_stage_credentials(rows[0][0])
    except ValueError as exc:
        raise ProtocolError(f"unusable stage credentials: {exc}", route=STATEMENTS_ROUTE.name,
                            job_id=job_id) from None


def _s3(creds: StageCredentials, ca_bundle: str | None) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise ConfigError(MISSING_BOTO3) from None
    options: dict[str, Any] = {}
    if creds.endpoint:
        endpoint = creds.endpoint if "://" in creds.endpoint else f"https://{creds.endpoint}"
        options = {"endpoint_url": endpoint, "config": Config(s3={"addressing_style": "path"})}
    return boto3.client(
        "s3", region_name=creds.region or None, aws_access_key_id=creds.access_key_id,
        aws_secret_access_key=creds.secret_access_key,
        aws_session_token=creds.session_token or None, verify=ca_bundle, **options,
    )


def fetch_execution_logs(rest: RunClient, job_id: str) -> list[dict[str, str]]:
    """``[{"sub_job_id", "filename", "s3_uri", "content"}]``, one per log file, in key order.

    Every key is checked as it is read (:class:`UnsafeLogKey` for one that would leave its
    directory once saved) and the download is bounded: at most :data:`MAX_LOG_FILES` files
    and ``max_answer_bytes`` in all (:class:`AnswerTooLarge` past either).
    """
    creds = stage_credentials(rest, job_id)
    s3 = _s3(creds, rest.config.ca_bundle)
    prefix = creds.prefix.strip("/") + "/" if creds.prefix.strip("/") else ""
    from botocore.exceptions import BotoCoreError, ClientError

    budget = _Budget(rest.http.settings.max_answer_bytes, job_id)
    out: list[dict[str, str]] = []
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=creds.bucket, Prefix=prefix):
            for item in page.get("Contents") or []:
                key = item.get("Key")
                found = split_log_key(key) if isinstance(key, str) else None
                if found is None:
                    continue
                _check_entry(str(key), *found, job_id=job_id)
                budget.file()
                data = budget.read(s3.get_object(Bucket=creds.bucket, Key=key)["Body"])
                out.append({"sub_job_id": found[0], "filename": found[1],
                            "s3_uri": f"s3://{creds.bucket}/{key}",
                            "content": data.decode("utf-8", errors="replace")})
    except (BotoCoreError, ClientError) as exc:
        raise CortexConnectionError(f"reading the run's stage failed: {exc}",
                                    route="s3", job_id=job_id) from exc
    return out


def _check_entry(key: str, sub_job_id: str, filename: str, job_id: str | None = None) -> None:
    reason = unsafe_log_entry(sub_job_id, filename)
    if reason is not None:
        raise UnsafeLogKey(f"refused the execution-log key {key!r}: {reason}", route="s3",
                           job_id=job_id, key=key)


class _Budget:
    """The download's bounds: files and bytes in all, counted as they arrive."""

    def __init__(self, max_bytes: int, job_id: str) -> None:
        self.left = max_bytes
        self.files = 0
        self.job_id = job_id

    def file(self) -> None:
        self.files += 1
        if self.files > MAX_LOG_FILES:
            raise AnswerTooLarge(f"the run's stage lists more than {MAX_LOG_FILES} log files",
                                 route="s3", job_id=self.job_id)

    def read(self, body: Any) -> bytes:
        parts: list[bytes] = []
        while chunk := body.read(_READ_BYTES):
            self.left -= len(chunk)
            if self.left < 0:
                body.close()
                raise AnswerTooLarge("the run's log files exceed max_answer_bytes in all",
                                     route="s3", job_id=self.job_id)
            parts.append(chunk)
        return b"".join(parts)


def write_log_files(files: Iterable[Mapping[str, str]], directory: str | Path) -> list[Path]:
    """Save each file of :func:`fetch_execution_logs` as ``directory/<sub_job_id>/<filename>``
    (``:`` in the sub-job id becomes ``_``); the paths written, in order.

    Nothing is written outside ``directory``: a key that would leave it, or a symlink
    planted below it, raises :class:`UnsafeLogKey` (directories are entered and files
    created without following links).
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for item in files:
        sub_job_id, filename = str(item["sub_job_id"]), str(item["filename"])
        _check_entry(f"{sub_job_id}/{filename}", sub_job_id, filename)
        parts = [sub_job_id.replace(":", "_"), *filename.split("/")]
        _write_below(root, parts, str(item["content"]).encode())
        written.append(root.joinpath(*parts))
    return written


def _write_below(root: Path, parts: list[str], data: bytes) -> None:
    """Create ``root/parts...`` through directory descriptors opened with O_NOFOLLOW."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=fd)
            try:
                inner = os.open(part, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow, dir_fd=fd)
            except OSError as exc:
                raise _refused(root, parts, f"{part!r} is not a plain directory ({exc.strerror})") from None
            os.close(fd)
            fd = inner
        try:
            out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | nofollow, 0o644, dir_fd=fd)
        except OSError as exc:
            raise _refused(root, parts, f"{parts[-1]!r} is not a plain file ({exc.strerror})") from None
        with os.fdopen(out, "wb") as fh:
            fh.write(data)
    finally:
        os.close(fd)


def _refused(root: Path, parts: list[str], why: str) -> UnsafeLogKey:
    key = "/".join(parts)
    return UnsafeLogKey(f"refused to write {key!r} below {str(root)!r}: {why}", route="s3", key=key)
