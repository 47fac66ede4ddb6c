"""What ``fake-gs`` tells a user at start-up, and what its ``--env-file`` exports.

- The execution-log stage starts with the fake (not on the first statement); the banner
  prints its loopback endpoint and the env file exports ``AWS_ENDPOINT_URL_S3`` and
  ``AWS_DEFAULT_REGION``, so a plain boto3 client (the service's reference CLI uses one,
  and ignores the endpoint a statement answer names) downloads a run's files from the
  stage with no code change, never from real AWS.
- ``--engine tiny`` says that token ids fold into its 259-token byte vocabulary.
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fake_gs_api import Api, sampling_config, training_config

from fake_gs.cli import (
    STAGE_ENDPOINT_VAR,
    STAGE_REGION_VAR,
    announcement,
    stage_exports,
    stage_lines,
)
from fake_gs.engines.byte_vocab import VOCAB_SIZE
from fake_gs.settings import FakeSettings

PAT = "start-up-pat"


def _start(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    env_file = tmp_path / "fake.env"
    proc = subprocess.Popen([sys.executable, "-m", "fake_gs", "--port", "0", "--token", PAT,
                             "--env-file", str(env_file), *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not env_file.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "fake-gs wrote no env file"
        time.sleep(0.05)
    return proc, dict(re.findall(r"export (\w+)=(\S+)", env_file.read_text()))


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    return proc.communicate(timeout=20)[0]


@pytest.mark.slow  # a fake process and moto's stage child: ~15 s on a shared 2-core machine
def test_banner_and_env_file_point_a_plain_boto3_client_at_the_stage(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("moto")
    from client.config import ClientConfig
    from client.logs import stage_credentials
    from client.rest import CortexRestClient

    proc, exports = _start(tmp_path)
    try:
        endpoint, region = exports[STAGE_ENDPOINT_VAR], exports[STAGE_REGION_VAR]
        host = urlsplit(endpoint).hostname
        assert host is not None and ipaddress.ip_address(host).is_loopback, endpoint
        base = exports["CORTEX_BASE_URL"]
        api = Api(base, PAT)
        job = api.running_job(training_config(), sampling_config())
        rest = CortexRestClient(ClientConfig(base_url=base, pat=PAT, database="DB", schema_name="PUBLIC"))
        creds = stage_credentials(rest, job)
        assert creds.endpoint == endpoint  # the statement names the same loopback stage
        # A plain boto3 client: no endpoint_url, no region; only the exported environment.
        monkeypatch.setenv(STAGE_ENDPOINT_VAR, endpoint)
        monkeypatch.setenv(STAGE_REGION_VAR, region)
        s3 = boto3.client("s3", aws_access_key_id=creds.access_key_id,
                          aws_secret_access_key=creds.secret_access_key, aws_session_token=creds.session_token)
        assert s3.meta.endpoint_url == endpoint
        listed = s3.list_objects_v2(Bucket=creds.bucket, Prefix=creds.prefix)
        keys = sorted(o["Key"] for o in listed.get("Contents", []))
        assert [k.rsplit("/", 2)[-2] for k in keys] == sorted(f"{job}:{t}:0" for t in ("training", "sampling"))
        body = s3.get_object(Bucket=creds.bucket, Key=keys[0])["Body"].read().decode()
        assert "job created" in body
    finally:
        out = _stop(proc)
    assert f"logs:     S3 stage {endpoint} (loopback; region {region})" in out
    assert f"export {STAGE_ENDPOINT_VAR}={endpoint} {STAGE_REGION_VAR}={region}" in out


def test_the_tiny_engine_says_it_folds_token_ids() -> None:
    tiny = announcement(FakeSettings(engine="tiny"), "http://127.0.0.1:1", "127.0.0.1:1", None)
    notes = [line for line in tiny if line.startswith("  note:")]
    assert len(notes) == 1 and f"fold into the tiny engine's {VOCAB_SIZE}-token byte vocabulary" in notes[0]


def test_stage_exports_and_lines() -> None:
    stage = ("http://127.0.0.1:9", "us-west-2")
    assert stage_exports(stage) == {STAGE_ENDPOINT_VAR: "http://127.0.0.1:9", STAGE_REGION_VAR: "us-west-2"}
    assert stage_exports(None) == {}
    lines = stage_lines(stage)
    assert "S3 stage http://127.0.0.1:9" in lines[0] and "export AWS_ENDPOINT_URL_S3=http://127.0.0.1:9" in lines[1]


def test_banner_without_the_logs_extra_or_the_tiny_engine() -> None:
    lines = stage_lines(None)
    assert len(lines) == 1 and "no execution-log stage" in lines[0] and "'logs' extra" in lines[0]
    shape = announcement(FakeSettings(), "http://127.0.0.1:1", "127.0.0.1:1", None)
    assert not any("note:" in line for line in shape)  # the shape engine folds nothing
