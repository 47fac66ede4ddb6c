"""The log-stage attacks, shared by tests/stress/test_log_stage.py
and benchmarks/bench_hardening.py: a run's credentials as a client gets them, and an
unauthenticated PUT that declares a large body."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import requests
from stress_helpers import rest_client

from client.jobspec import create_job_body
from contract.auth import auth_headers
from contract.logs import (
    STATEMENTS_PATH,
    StageCredentials,
    parse_stage_credentials,
    stage_credentials_statement,
)

MiB = 1024 * 1024


def new_run(base_url: str, token: str) -> tuple[str, StageCredentials]:
    """A fresh job of ``token``'s account and its run's stage credentials."""
    rest = rest_client(base_url, token)
    job_id = str(rest.create_job(create_job_body(rest.config))["job_id"])
    run = rest.get_experiment_run(job_id)
    sql = stage_credentials_statement(run["experiment_name"], run["experiment_run_name"])
    answer = requests.post(base_url + STATEMENTS_PATH, json={"statement": sql},
                           headers=auth_headers(token), timeout=30)
    assert answer.status_code == 200, answer.text
    return job_id, parse_stage_credentials(answer.json()["data"][0][0])


def s3_of(endpoint: str, key: str, secret: str, token: str | None) -> Any:
    """A boto3 S3 client of the stage (path-style, one attempt per call)."""
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-west-2", aws_access_key_id=key,
                        aws_secret_access_key=secret, aws_session_token=token,
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def warm_stage(creds: StageCredentials) -> None:
    """A signed listing of the run's bucket, as a client makes one: moto imports its S3
    paths lazily, so an attack measured before it would count those imports."""
    assert creds.endpoint is not None
    s3_of(creds.endpoint, creds.access_key_id, creds.secret_access_key, creds.session_token).list_objects_v2(
        Bucket=creds.bucket)


def tree_bytes(root: str) -> int:
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())


def push_unsigned_put(endpoint: str, declared: int, send: int) -> tuple[bytes, int]:
    """An unauthenticated PUT declaring ``declared`` bytes: the answer read after the head,
    and how many body bytes the socket took before the stage closed it."""
    host, port = endpoint.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(f"PUT /fake-gs-stage-x/big HTTP/1.1\r\nHost: {host}\r\nContent-Length: {declared}\r\n\r\n".encode())
    answer = sock.recv(4096)
    sent, block = 0, b"\0" * MiB
    try:
        while sent < send:
            sent += sock.send(block)
    except OSError:
        pass
    sock.close()
    return answer, sent
