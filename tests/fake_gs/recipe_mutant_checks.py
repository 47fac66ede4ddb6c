"""Liveness checks for the recipes/logs/TLS mutants, merged into
test_fake_mutants.CHECKS: each asserts its violation shows, as small as it can."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_gs_api import Api, sampling_config, training_config

from contract.logs import STATEMENTS_PATH, stage_credentials_statement


def logs_stage_empty(api: Api) -> None:
    """Credentials are answered, yet the stage they open holds no log at all."""
    import boto3

    from contract.logs import parse_stage_credentials

    job = api.create_job(training_config(), sampling_config())
    api.wait_running(job)
    run = api.get(f"/{job}/experiment-run").json()
    sql = stage_credentials_statement(run["experiment_name"], run["experiment_run_name"])
    answer = api.session.post(api.base_url + STATEMENTS_PATH, json={"statement": sql}, timeout=30)
    assert answer.status_code == 200, answer.text
    creds = parse_stage_credentials(answer.json()["data"][0][0])
    s3 = boto3.client("s3", endpoint_url=creds.endpoint, region_name=creds.region,
                      aws_access_key_id=creds.access_key_id,
                      aws_secret_access_key=creds.secret_access_key,
                      aws_session_token=creds.session_token)  # the sealed stage checks it
    assert s3.list_objects_v2(Bucket=creds.bucket, Prefix=creds.prefix).get("KeyCount") == 0


RECIPE_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "logs-stage-empty": (logs_stage_empty, {}),
}
