"""The execution-log stage is sealed (spec §12.2).

Each attack of the red team is tried again against the real stage (moto's S3 server in its
child process, IAM checks on): account B with its own credentials, with made-up ones and
with none lists, reads, overwrites and plants under A's run, creates buckets and calls
moto's admin routes; every one is refused with the S3 status and code the table names, and
A's download still returns exactly A's files. An unauthenticated PUT declaring 1 GiB is
answered before its body and costs the stage neither memory nor temp disk.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

pytest.importorskip("moto")
boto3 = pytest.importorskip("boto3")

from botocore.exceptions import ClientError  # noqa: E402
from example_loader import load_example  # noqa: E402
from stage_attacks import new_run, push_unsigned_put, s3_of, tree_bytes, warm_stage  # noqa: E402
from stress_helpers import rest_client, rss_bytes  # noqa: E402

from client.errors import UnsafeLogKey  # noqa: E402
from client.logs import write_log_files  # noqa: E402
from contract.logs import StageCredentials, log_key  # noqa: E402
from fake_gs import FakeSettings  # noqa: E402
from fake_gs.server import FakeServer, start_in_background  # noqa: E402
from fake_gs.state import moto_account  # noqa: E402
from fake_gs.state.execution_logs import StageProcess  # noqa: E402

A, B = "stage-token-a-" + secrets.token_hex(4), "stage-token-b-" + secrets.token_hex(4)
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    server = start_in_background(FakeSettings(tokens=(A, B)))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def public_fake() -> Iterator[FakeServer]:
    """A fake whose stage drives moto through its public API (fake_gs.state.moto_account's
    fallback when moto's backends are not what it relies on)."""
    server = start_in_background(FakeSettings(tokens=(A, B)))
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv(moto_account.PATH_VARIABLE, "public")
            new_run(server.base_url, A)  # the stage starts here, under the variable
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["moto's backends", "moto's public API"])
def sealed(request: pytest.FixtureRequest) -> FakeServer:
    """Each stage path in turn: every attack gets the same answer on both."""
    server: FakeServer = request.getfixturevalue("fake" if request.param == "moto's backends" else "public_fake")
    new_run(server.base_url, A)
    assert server.state.store.execution_logs.stage().moto_path == request.param
    return server


def client_of(creds: StageCredentials, **change: str | None) -> Any:
    values: dict[str, str | None] = {"key": creds.access_key_id, "secret": creds.secret_access_key, "token": creds.session_token}
    values.update(change)
    assert creds.endpoint is not None
    return s3_of(creds.endpoint, values["key"] or "", values["secret"] or "", values["token"])


def refusal(call: Any) -> tuple[int, str]:
    """``(status, S3 error code)`` of a call that must be refused."""
    with pytest.raises(ClientError) as err:
        call()
    return int(err.value.response["ResponseMetadata"]["HTTPStatusCode"]), str(err.value.response["Error"]["Code"])


def test_another_accounts_run_is_sealed(sealed: FakeServer) -> None:
    job_a, creds_a = new_run(sealed.base_url, A)
    _, creds_b = new_run(sealed.base_url, B)
    _, creds_a2 = new_run(sealed.base_url, A)  # A's second run: its own credentials
    a, b = client_of(creds_a), client_of(creds_b)
    key_a = creds_a.prefix.rstrip("/") + f"/_logs/{job_a}:training:0/execution.jsonl"
    made_up = client_of(creds_a, key="ASIA" + secrets.token_hex(8).upper(),
                        secret=secrets.token_urlsafe(30), token=secrets.token_urlsafe(48))
    attacks = {
        "B lists A's bucket": (lambda: b.list_objects_v2(Bucket=creds_a.bucket), (403, "AccessDenied")),
        "B reads A's log": (lambda: b.get_object(Bucket=creds_a.bucket, Key=key_a), (403, "AccessDenied")),
        "B overwrites A's log": (lambda: b.put_object(Bucket=creds_a.bucket, Key=key_a, Body=b"x"),
                                 (403, "AccessDenied")),
        "B plants under A's prefix": (lambda: b.put_object(Bucket=creds_a.bucket, Body=b"x",
                                                           Key=creds_a.prefix.rstrip("/") + "/_logs/x/planted"), (403, "AccessDenied")),
        "B plants in its own run": (lambda: b.put_object(Bucket=creds_b.bucket, Body=b"x",
                                                         Key=creds_b.prefix.rstrip("/") + "/_logs/x/planted"), (403, "AccessDenied")),
        "B creates a bucket": (lambda: b.create_bucket(
            Bucket="fake-gs-stage-evil", CreateBucketConfiguration={"LocationConstraint": "us-west-2"}),
            (403, "AccessDenied")),
        "made-up keys list A's bucket": (lambda: made_up.list_objects_v2(Bucket=creds_a.bucket),
                                         (403, "InvalidAccessKeyId")),
        "A's key, a wrong secret": (lambda: client_of(creds_a, secret="wrong" * 8).list_objects_v2(
            Bucket=creds_a.bucket), (403, "SignatureDoesNotMatch")),
        "A's key, no session token": (lambda: client_of(creds_a, token=None).list_objects_v2(
            Bucket=creds_a.bucket), (403, "InvalidAccessKeyId")),
        "A's other run reads this run's log": (lambda: client_of(creds_a2).get_object(
            Bucket=creds_a.bucket, Key=key_a), (403, "AccessDenied")),
        "B lists every bucket": (lambda: b.list_buckets(), (403, "AccessDenied")),
    }
    for name, (call, expected) in attacks.items():
        assert refusal(call) == expected, name
    listed = [o["Key"] for o in a.list_objects_v2(Bucket=creds_a.bucket, Prefix=creds_a.prefix)["Contents"]]
    assert key_a in listed and all(k.startswith(creds_a.prefix) for k in listed)
    logs = rest_client(sealed.base_url, A).fetch_execution_logs(job_a)
    assert sorted(e["sub_job_id"] for e in logs) == [f"{job_a}:sampling:0", f"{job_a}:training:0"]
    assert all("planted" not in e["filename"] for e in logs)


def test_unsigned_calls_and_moto_admin_routes_are_closed(sealed: FakeServer) -> None:
    _, creds = new_run(sealed.base_url, A)
    base = str(creds.endpoint)
    for method, path in (("PUT", f"/{creds.bucket}/{creds.prefix}/_logs/x/planted"), ("GET", f"/{creds.bucket}"),
                         ("PUT", "/fake-gs-stage-unsigned"), ("POST", "/moto-api/reset-auth"),
                         ("GET", "/moto-api/data.json"), ("POST", "/moto-api/reset")):
        answer = requests.request(method, base + path, data=b"0" if method != "GET" else None, timeout=10)
        assert answer.status_code == 403 and "<Code>AccessDenied</Code>" in answer.text, (method, path)
        assert "close" in answer.headers.get("Connection", "").lower()
    # The IAM switch is still on: the made-up credentials are still refused.
    made_up = s3_of(base, "AKIA" + secrets.token_hex(8).upper(), "x" * 40, None)
    assert refusal(lambda: made_up.list_objects_v2(Bucket=creds.bucket)) == (403, "InvalidAccessKeyId")


def test_unsigned_put_of_a_gigabyte_costs_the_stage_nothing(fake: FakeServer) -> None:
    """Small version (64 MiB pushed); benchmarks/bench_hardening.py pushes 1 GiB."""
    _, creds = new_run(fake.base_url, A)
    stage: StageProcess = fake.state.store.execution_logs.stage()
    warm_stage(creds)
    push_unsigned_put(str(creds.endpoint), 1 << 30, MiB)
    rss0, disk0 = rss_bytes(stage.proc.pid), tree_bytes(stage.tmp)
    answer, sent = push_unsigned_put(str(creds.endpoint), 1 << 30, 64 * MiB)
    assert answer.startswith(b"HTTP/1.1 403") and b"Connection: close" in answer
    assert sent < 64 * MiB  # the stage closed the connection: the body is never read
    time.sleep(0.2)
    assert rss_bytes(stage.proc.pid) - rss0 < 16 * MiB  # a quarter of what was pushed: it does not follow
    assert tree_bytes(stage.tmp) - disk0 == 0


def test_stage_bytes_are_capped_per_account_and_refilled_when_asked() -> None:
    server = start_in_background(FakeSettings(tokens=(A,), max_stage_bytes_per_account=3000))
    try:
        runs = [new_run(server.base_url, A) for _ in range(4)]
        usage = server.state.store.execution_logs.usage()
        assert 0 < usage["bytes"] <= 3000 and usage["accounts"] == 1
        first_job, _ = runs[0]
        logs = rest_client(server.base_url, A).fetch_execution_logs(first_job)
        assert len(logs) == 2 and all(e["content"] for e in logs)  # written again when asked
        assert server.state.store.execution_logs.usage()["bytes"] <= 3000
        stage = server.state.store.execution_logs.stage()
    finally:
        server.stop()
    assert stage.proc.poll() is not None and not os.path.exists(stage.tmp)  # stopped, temp files gone


# --- family 2: keys that leave their directory ---------------------------------------------

ESCAPES = [
    ("job:training:0", "../../escaped.txt"),
    ("..", "escaped.txt"),
    ("job:training:0", "/abs/escaped.txt"),
    ("", "escaped.txt"),
    ("job:training:0", "..\\..\\escaped.txt"),
    ("job:training:0", "ok/\x00escaped.txt"),
]


@pytest.mark.parametrize(("sub_job_id", "filename"), ESCAPES)
def test_keys_that_leave_the_directory_are_refused_typed(tmp_path: Path, sub_job_id: str, filename: str) -> None:
    target = tmp_path / "logs"
    entry = {"sub_job_id": sub_job_id, "filename": filename, "s3_uri": "s3://b/k", "content": "planted\n"}
    with pytest.raises(UnsafeLogKey) as err:
        write_log_files([entry], target)
    assert err.value.key and not [p for p in tmp_path.rglob("*") if p.is_file()]
    with pytest.raises(ValueError, match="unsafe log key"):
        log_key("experiments/e/versions/run-x", sub_job_id, filename)


def test_planted_symlinks_are_not_followed(tmp_path: Path) -> None:
    outside, target = tmp_path / "outside", tmp_path / "logs"
    outside.mkdir()
    target.mkdir()
    (target / "job_training_0").symlink_to(outside, target_is_directory=True)
    (target / "job_sampling_0").mkdir()
    (target / "job_sampling_0" / "execution.jsonl").symlink_to(outside / "victim.txt")
    for sub in ("job:training:0", "job:sampling:0"):
        entry = {"sub_job_id": sub, "filename": "execution.jsonl", "s3_uri": "s3://b/k", "content": "planted\n"}
        with pytest.raises(UnsafeLogKey, match="not a plain"):
            write_log_files([entry], target)
    assert list(outside.iterdir()) == []
    good = {"sub_job_id": "job:log_prob:0", "filename": "nested/execution.jsonl", "s3_uri": "s3://b/k",
            "content": "fine\n"}
    assert write_log_files([good], target) == [target / "job_log_prob_0" / "nested" / "execution.jsonl"]


def test_client_and_example_refuse_a_planted_key_from_the_stage(fake: FakeServer, tmp_path: Path) -> None:
    """A stage that lists a key leaving its directory (planted here through the fake's own
    command pipe, as a hostile server would): the download raises UnsafeLogKey, and the
    docs' recipe walk-through's ``--logs`` (the example's save_execution_logs) writes nothing."""
    job_id, creds = new_run(fake.base_url, A)
    stage: StageProcess = fake.state.store.execution_logs.stage()
    planted = creds.prefix.rstrip("/") + f"/_logs/{job_id}:training:0/../../../../escaped.txt"
    stage.call("put", bucket=creds.bucket, key=planted, data64="cGxhbnRlZAo=")
    rest = rest_client(fake.base_url, A)
    with pytest.raises(UnsafeLogKey) as err:
        rest.fetch_execution_logs(job_id)
    assert err.value.key == planted
    example = load_example("grpo_toy")

    class Client:
        def fetch_execution_logs(self) -> list[dict[str, str]]:
            return rest.fetch_execution_logs(job_id)

    with pytest.raises(UnsafeLogKey):
        example.save_execution_logs(Client(), tmp_path / "logs")
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
    stage.call("delete", bucket=creds.bucket, keys=[planted])


def test_a_hostile_experiment_name_neither_leaves_the_prefix_nor_the_sql_string(fake: FakeServer) -> None:
    """The name is the caller's text: quoted in the statement, one escaped key segment."""
    from client.jobspec import create_job_body

    rest = rest_client(fake.base_url, A)
    name = "x'); DROP TABLE t; --/../_logs/evil/..\\"
    job_id = str(rest.create_job({**create_job_body(rest.config), "experiment_name": name})["job_id"])
    assert rest.get_experiment_run(job_id)["experiment_name"] == name
    logs = rest.fetch_execution_logs(job_id)
    assert sorted(e["sub_job_id"] for e in logs) == [f"{job_id}:sampling:0", f"{job_id}:training:0"]
    assert all("/_logs/evil/" not in e["s3_uri"] and "/../" not in e["s3_uri"] for e in logs)


# --- the fence around moto's internals (fake_gs.state.moto_account) ----------------------------

STAGE_DIR = Path(moto_account.__file__).parent


def test_the_backends_are_used_where_moto_is_what_the_stage_was_tested_on() -> None:
    assert moto_account.backends_missing() is None, moto_account.backends_missing()


@pytest.mark.parametrize(("change", "named"), [
    (lambda mp: mp.setattr(moto_account, "moto_release", lambda: "5.3.0"),
     "moto 5.3.0 is outside the tested range >=5.2.4,<5.3"),
    (lambda mp: mp.setattr("moto.iam.models.IAMBackend.create_role", lambda self, name, doc: None),
     "IAMBackend.create_role no longer takes role_name"),
    (lambda mp: mp.delattr("moto.sts.models.sts_backends"), "moto.sts.models.STSBackend and its backends"),
])
def test_the_stage_falls_back_to_motos_public_api_naming_what_is_missing(
        monkeypatch: pytest.MonkeyPatch, change: Any, named: str) -> None:
    change(monkeypatch)
    reason = moto_account.backends_missing()
    assert reason is not None and named in reason, reason


def test_a_stage_whose_seal_does_not_hold_stops_naming_the_moto_it_needs() -> None:
    """The start-up self-check (log_stage.check_seal), in a child like the fake's: here a run's
    role reads its whole bucket, as it would under a moto that stopped checking resources."""
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import log_stage\n"
              "grant = log_stage.Stage.grant\n"
              "log_stage.Stage.grant = lambda self, run, bucket, prefix: grant(self, run, bucket, '*')\n"
              "sys.exit(log_stage.main(['--max-bytes', '1000', '--region', 'us-west-2']))\n")
    done = subprocess.run([sys.executable, "-c", script, str(STAGE_DIR)], input="", capture_output=True,
                          text=True, timeout=120)
    hello = json.loads(done.stdout.splitlines()[0])
    assert done.returncode == 1 and hello["ok"] is False, done
    assert "moto >=5.2.4,<5.3" in hello["error"] and moto_account.moto_release() in hello["error"], hello["error"]
    assert "the run reads outside its prefix: 200 (expected 403)" in hello["error"], hello["error"]


def test_the_logs_extra_bounds_moto_to_the_range_the_stage_names() -> None:
    import tomllib

    project = tomllib.loads((STAGE_DIR.parents[1] / "pyproject.toml").read_text())["project"]
    assert "moto[server]" + moto_account.TESTED_MOTO in project["optional-dependencies"]["logs"]


@pytest.mark.parametrize(("release", "said"), [
    ("5.3.0", "the execution-log stage needs moto >=5.2.4,<5.3 (found 5.3.0): x"),
    ("5.1.22", "the execution-log stage needs moto >=5.2.4,<5.3 (found 5.1.22): x"),
    ("5.2.5", "the execution-log stage failed on moto 5.2.5 with botocore "),
])
def test_the_message_names_the_tested_moto_and_the_one_found(
        monkeypatch: pytest.MonkeyPatch, release: str, said: str) -> None:
    monkeypatch.setattr(moto_account, "moto_release", lambda: release)
    message = moto_account.needs_moto("x")
    assert message.startswith(said) and "moto >=5.2.4,<5.3" in message, message
