"""Stage credentials: the statement's JSON and back; a statement may leave the token out."""

from __future__ import annotations

import pytest

from contract.logs import StageCredentials, parse_stage_credentials


def test_stage_credentials_round_trip() -> None:
    creds = StageCredentials("bucket", "runs/j1", "us-west-2", "ASIAKEY", "secret", "token",
                             endpoint="http://127.0.0.1:9000")
    assert parse_stage_credentials(creds.to_json()) == creds


def test_a_statement_without_a_token_reads_as_an_empty_one() -> None:
    keys = {"AWS_KEY_ID": "k", "AWS_SECRET_KEY": "s"}
    stage = {"locationType": "S3", "location": "s3://bucket/p/", "creds": keys}
    assert parse_stage_credentials(stage) == StageCredentials("bucket", "p", "", "k", "s")
    del keys["AWS_SECRET_KEY"]
    with pytest.raises(ValueError, match="AWS_SECRET_KEY"):
        parse_stage_credentials(stage)
