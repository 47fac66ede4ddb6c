"""``fetch_execution_logs(job_id)``: every log file of a job's run (spec §12.2).

Three hops: ``experiment-run`` names the run; ``POST /api/v2/statements`` (outside the
service prefix, with the same PAT) answers the run stage's scoped S3 credentials; those
list the stage and read every object below a ``_logs/{sub_job_id}/`` subtree. The S3 hop
needs boto3 (the ``logs`` extra), imported only here so the plain client stays light.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from client.errors import ConfigError, CortexConnectionError, ProtocolError
from client.http import HttpSession
from contract.logs import (
    STATEMENTS_ROUTE,
    StageCredentials,
    parse_stage_credentials,
    split_log_key,
    stage_credentials_statement,
    statement_rows,
)

if TYPE_CHECKING:
    from client.rest import CortexRestClient

MISSING_BOTO3 = (
    "fetch_execution_logs needs boto3 to read the run's S3 stage: "
    "pip install 'cortex-contract-kit[logs]'"
)


def stage_credentials(rest: CortexRestClient, job_id: str) -> StageCredentials:
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


def fetch_execution_logs(rest: CortexRestClient, job_id: str) -> list[dict[str, str]]:
    """``[{"sub_job_id", "filename", "s3_uri", "content"}]``, one per log file, in key order."""
    creds = stage_credentials(rest, job_id)
    s3 = _s3(creds, rest.config.ca_bundle)
    prefix = creds.prefix.strip("/") + "/" if creds.prefix.strip("/") else ""
    from botocore.exceptions import BotoCoreError, ClientError

    out: list[dict[str, str]] = []
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=creds.bucket, Prefix=prefix):
            for item in page.get("Contents") or []:
                key = item.get("Key")
                found = split_log_key(key) if isinstance(key, str) else None
                if found is None:
                    continue
                data = s3.get_object(Bucket=creds.bucket, Key=key)["Body"].read()
                out.append({"sub_job_id": found[0], "filename": found[1],
                            "s3_uri": f"s3://{creds.bucket}/{key}",
                            "content": data.decode("utf-8", errors="replace")})
    except (BotoCoreError, ClientError) as exc:
        raise CortexConnectionError(f"reading the run's stage failed: {exc}",
                                    route="s3", job_id=job_id) from exc
    return out
