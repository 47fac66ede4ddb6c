"""JOB-LOGS: the execution-log download (spec §12.2) against any URL.

experiment-run names the run; the stage-credentials statement, sent to the SQL API route
outside the service prefix with the same token, answers S3 credentials; they list the run's
stage, whose ``_logs/{sub_job_id}/`` subtrees hold the sub-jobs' logs. The S3 hop needs
boto3 (the kit's ``logs`` extra); without it the property skips rather than guesses.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.drivers.raw import RawDriver
from conformance.jobs import SharedJob
from conformance.reporting.clean import clip
from conformance.reporting.violations import Soft
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.logs import (
    STATEMENTS_PATH,
    StageCredentials,
    parse_stage_credentials,
    split_log_key,
    stage_credentials_statement,
    statement_rows,
)
from contract.routes import JSON


def _stage_keys(creds: StageCredentials) -> list[str]:
    boto3 = pytest.importorskip("boto3", reason="listing the stage needs boto3 (the logs extra)")
    from botocore.config import Config

    extra: dict[str, Any] = {}
    if creds.endpoint:
        endpoint = creds.endpoint if "://" in creds.endpoint else f"https://{creds.endpoint}"
        extra = {"endpoint_url": endpoint, "config": Config(s3={"addressing_style": "path"})}
    s3 = boto3.client("s3", region_name=creds.region or None, aws_access_key_id=creds.access_key_id,
                      aws_secret_access_key=creds.secret_access_key,
                      aws_session_token=creds.session_token or None, **extra)
    prefix = creds.prefix.strip("/") + "/" if creds.prefix.strip("/") else ""
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=creds.bucket, Prefix=prefix):
        keys.extend(str(item["Key"]) for item in page.get("Contents") or [])
    return keys


@checks("JOB-LOGS-1", "JOB-LOGS-2")
def test_execution_log_download(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """The statement answers S3 credentials for the run; its stage holds this job's logs."""
    run = gs_raw.call("get_experiment_run", job_id=gs_job.job_id)
    if not run.ok:
        pytest.skip(f"experiment-run did not answer (JOB-EXPRUN-1 judges it): {run}")
    sql = stage_credentials_statement(run.field("experiment_name"), run.field("experiment_run_name"))
    ans = gs_raw.send("POST", gs_raw.target.base_url.rstrip("/") + STATEMENTS_PATH,
                      name="sql_statements", content_type=JSON,
                      data=json.dumps({"statement": sql}))
    if ans.status == 501 and ans.code == ErrorCode.LOGS_EXTRA_MISSING:
        pytest.skip("the embedded fake runs without its logs extra (moto[server], boto3)")
    soft = Soft()
    rows = statement_rows(ans.body)
    if not soft.expect("JOB-LOGS-1", ans.ok and rows and rows[0],
                       f"stage-credentials statement: {ans}"):
        soft.check()
    try:
        creds = parse_stage_credentials(rows[0][0])
    except ValueError as exc:
        soft.expect("JOB-LOGS-1", False, clip(f"stage credentials unusable: {exc}: {rows[0][0]!r}", 400))
        soft.check()
        return
    try:
        keys = _stage_keys(creds)
    except pytest.skip.Exception:
        raise
    except Exception as exc:  # any S3 failure is the credentials' failure
        soft.expect("JOB-LOGS-1", False, f"listing the stage with the credentials failed: {exc}")
        soft.check()
        return
    subs = {str(s.get("sub_job_id")) for s in gs_job.job.get("sub_jobs") or []}
    found = [hit for hit in map(split_log_key, keys) if hit is not None]
    soft.expect("JOB-LOGS-2", bool(found), f"no object below _logs/ in the stage ({len(keys)} keys)")
    strangers = sorted({sid for sid, _ in found} - subs)
    soft.expect("JOB-LOGS-2", not strangers, f"logs of sub-jobs not in this job: {strangers}")
    soft.check()
