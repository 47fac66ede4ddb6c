"""Execution-log download (spec §12.2): the facts the fake and the client share.

The download takes three hops: ``GET /{job_id}/experiment-run`` names the run; a SQL
statement sent to ``POST /api/v2/statements`` (outside the service prefix, spec §2.1)
calls ``SYSTEM$GET_VSTAGE_WRITE_CREDS`` on the run's stage and answers one row whose
single value is a JSON object of scoped S3 credentials; those credentials list the stage,
where each sub-job's files sit below ``_logs/{sub_job_id}/``.

The credential object: ``{"locationType": "S3", "location": "bucket/prefix/", "region",
"creds": {"AWS_KEY_ID", "AWS_SECRET_KEY", "AWS_TOKEN"}}`` plus an optional ``endPoint``
(Snowflake's name for a non-AWS S3 endpoint; the fake's loopback store uses it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contract.models.answers import StatementResult
from contract.routes import Route

#: The Snowflake SQL API route: absolute, not under the cortex-training prefix.
STATEMENTS_PATH = "/api/v2/statements"
STATEMENTS_ROUTE = Route(
    "sql_statements", "POST", STATEMENTS_PATH, "json", "sync", "current",
    "Run a SQL statement (the execution-log download asks it for stage credentials)",
    response_model=StatementResult,
    # It only hands out stage credentials: asking twice is harmless.
    idempotency="read", clauses=("JOB-LOGS-1", "JOB-LOGS-2"),
)
#: The directory of the run's stage that holds per-sub-job log files.
LOGS_DIR = "_logs"
#: The file the fake writes for each sub-job (the service may write others beside it).
EXECUTION_LOG = "execution.jsonl"
_STATEMENT_RE = re.compile(
    r"^\s*SELECT\s+SYSTEM\$GET_VSTAGE_WRITE_CREDS\(\s*'(?P<uri>(?:[^'\\]|''|\\.)*)'\s*\)\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_URI_RE = re.compile(r"^snow://experiment/(?P<experiment>.+?)/versions/(?P<run>[^/]+)/?$", re.DOTALL)
_UNESCAPE = re.compile(r"''|\\(.)", re.DOTALL)


def run_stage_uri(experiment_name: str, run_name: str) -> str:
    """The stage URI of one experiment run."""
    return f"snow://experiment/{experiment_name}/versions/{run_name}/"


def sql_string(text: str) -> str:
    """``text`` as a SQL string literal: names come from the server's answers, so a quote
    or a backslash in them must not end the literal (and run the rest as SQL)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def stage_credentials_statement(experiment_name: str, run_name: str) -> str:
    """The statement that asks for the run stage's S3 credentials."""
    return f"SELECT SYSTEM$GET_VSTAGE_WRITE_CREDS({sql_string(run_stage_uri(experiment_name, run_name))})"


def parse_stage_statement(statement: str) -> tuple[str, str] | None:
    """``(experiment_name, run_name)`` of a stage-credentials statement, else None."""
    match = _STATEMENT_RE.match(statement)
    if match is None:
        return None
    uri = _UNESCAPE.sub(lambda m: m.group(1) if m.group(1) is not None else "'", match["uri"])
    found = _URI_RE.match(uri)
    return (found["experiment"], found["run"]) if found else None


def unsafe_part(part: str) -> str | None:
    """Why ``part`` cannot name a file or directory below a download directory, else None.

    A log key comes from the stage, which a hostile or buggy server controls: a ``..``, an
    empty component (an absolute path), a backslash (a separator on Windows) or a control
    character would let it name a file outside the directory it is saved to.
    """
    if part in ("", ".", ".."):
        return f"the component {part!r} leaves its directory"
    if "\\" in part:
        return f"the component {part!r} holds a backslash"
    if any(ord(c) < 32 or ord(c) == 127 for c in part):
        return f"the component {part!r} holds a control character"
    return None


def unsafe_log_entry(sub_job_id: str, filename: str) -> str | None:
    """Why a log file's ``(sub_job_id, filename)`` cannot be saved below a directory as
    ``<sub_job_id>/<filename>`` (the filename may hold subdirectories), else None."""
    for part in (sub_job_id, *filename.split("/")):
        reason = unsafe_part(part)
        if reason is not None:
            return reason
    return None


def log_key(stage_prefix: str, sub_job_id: str, filename: str = EXECUTION_LOG) -> str:
    """The object key of one sub-job's log file under a stage prefix; ValueError for a
    sub-job id or file name that would leave its directory once downloaded."""
    reason = unsafe_log_entry(sub_job_id, filename)
    if reason is not None:
        raise ValueError(f"unsafe log key: {reason}")
    head = stage_prefix.strip("/")
    return f"{head}/{LOGS_DIR}/{sub_job_id}/{filename}" if head else f"{LOGS_DIR}/{sub_job_id}/{filename}"


def split_log_key(key: str) -> tuple[str, str] | None:
    """``(sub_job_id, filename)`` of a key below a ``_logs/{sub_job_id}/`` subtree, else None."""
    marker = f"{LOGS_DIR}/"
    if key.startswith(marker):
        rest = key[len(marker):]
    else:
        _, sep, rest = key.partition(f"/{marker}")
        if not sep:
            return None
    sub_job_id, _, filename = rest.partition("/")
    return (sub_job_id, filename) if sub_job_id and filename else None


@dataclass(frozen=True)
class StageCredentials:
    """Where a run's stage is and the temporary keys that read it."""

    bucket: str
    prefix: str
    region: str
    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)
    #: Empty for keys that need none: the statement may leave ``AWS_TOKEN`` out.
    session_token: str = field(default="", repr=False)
    endpoint: str | None = None

    def to_json(self) -> str:
        body: dict[str, Any] = {
            "locationType": "S3",
            "location": f"{self.bucket}/{self.prefix.strip('/')}/" if self.prefix else f"{self.bucket}/",
            "region": self.region,
            "creds": {"AWS_KEY_ID": self.access_key_id, "AWS_SECRET_KEY": self.secret_access_key,
                      "AWS_TOKEN": self.session_token},
        }
        if self.endpoint:
            body["endPoint"] = self.endpoint
        return json.dumps(body)


def parse_stage_credentials(value: Any) -> StageCredentials:
    """The statement's single value (a JSON string or object) as credentials.

    Raises ValueError naming what is missing; only S3 stages are understood.
    """
    stage = json.loads(value) if isinstance(value, str) else value
    if not isinstance(stage, Mapping):
        raise ValueError("stage credentials are not a JSON object")
    if str(stage.get("locationType") or "").upper() != "S3":
        raise ValueError(f"only S3 stages are supported, got locationType {stage.get('locationType')!r}")
    location = str(stage.get("location") or "").removeprefix("s3://").strip("/")
    bucket, _, prefix = location.partition("/")
    creds = stage.get("creds")
    if not bucket or not isinstance(creds, Mapping):
        raise ValueError("stage credentials lack a bucket or creds")
    try:
        keys = (str(creds["AWS_KEY_ID"]), str(creds["AWS_SECRET_KEY"]))
    except KeyError as exc:
        raise ValueError(f"stage credentials lack {exc.args[0]}") from None
    endpoint = stage.get("endPoint") or None
    return StageCredentials(bucket, prefix, str(stage.get("region") or ""), *keys,
                            session_token=str(creds.get("AWS_TOKEN") or ""),
                            endpoint=str(endpoint) if endpoint else None)


def statement_rows(answer: Any) -> list[list[Any]]:
    """The ``data`` rows of a SQL API answer (empty when there are none)."""
    rows = answer.get("data") if isinstance(answer, Mapping) else None
    return [r for r in rows if isinstance(r, list)] if isinstance(rows, list) else []
