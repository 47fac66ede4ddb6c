"""Execution-log download end to end (spec §12.2), through the kit's client.

experiment-run names the run; ``POST /api/v2/statements`` (outside the service prefix)
answers the run stage's S3 credentials; the fake's moto S3 server on loopback holds each
sub-job's ``_logs/{sub_job_id}/execution.jsonl``. Without the ``logs`` extra the statement
route answers 501 with a code naming the extra.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator

import pytest
import requests

pytest.importorskip("moto")
pytest.importorskip("boto3")

from e2e_fake import FAST  # noqa: E402

from client import ClientConfig, create_client  # noqa: E402
from client.errors import CortexHTTPError  # noqa: E402
from client.jobspec import create_job_body  # noqa: E402
from client.rest import CortexRestClient  # noqa: E402
from contract.auth import auth_headers  # noqa: E402
from contract.logs import STATEMENTS_PATH, stage_credentials_statement  # noqa: E402
from fake_gs import FakeSettings  # noqa: E402
from fake_gs.server import FakeServer, start_in_background  # noqa: E402

TOKEN = "logs-token"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    server = start_in_background(FakeSettings(tokens=(TOKEN, TOKEN + "-other")))
    try:
        yield server
    finally:
        server.stop()


def config(fake: FakeServer, token: str = TOKEN) -> ClientConfig:
    return ClientConfig(base_url=fake.base_url, pat=token, **FAST)


def lines(entry: dict[str, str]) -> list[dict[str, str]]:
    return [json.loads(line) for line in entry["content"].splitlines()]


def test_client_downloads_each_sub_jobs_log_after_the_run(fake: FakeServer) -> None:
    client = create_client(config(fake))
    client.start()
    job_id = client.job_id
    assert job_id is not None
    client.step()
    live = client.fetch_execution_logs()  # while running
    client.shutdown()  # cancels the job; its logs stay downloadable
    logs = client.fetch_execution_logs(job_id)
    subs = [f"{job_id}:training:0", f"{job_id}:sampling:0"]
    assert sorted(e["sub_job_id"] for e in logs) == sorted(subs)
    assert {e["filename"] for e in logs} == {"execution.jsonl"}
    for entry in logs:
        assert entry["s3_uri"].startswith("s3://fake-gs-stage-")
        assert entry["s3_uri"].endswith(f"/_logs/{entry['sub_job_id']}/execution.jsonl")
        messages = [line["message"] for line in lines(entry)]
        assert messages[0].startswith("job created") and "job cancelled" in messages[-1]
        assert any("(step) done" in m for m in messages)
        assert all({"timestamp", "level", "message"} <= set(line) for line in lines(entry))
    assert len(live) == 2 and all("job cancelled" not in e["content"] for e in live)


def statement(fake: FakeServer, body: object, token: str | None = TOKEN) -> requests.Response:
    headers = auth_headers(token) if token else {}
    return requests.post(fake.base_url + STATEMENTS_PATH, json=body, headers=headers, timeout=30)


def test_statement_route_refusals(fake: FakeServer) -> None:
    rest = CortexRestClient(config(fake))
    job_id = rest.create_job(create_job_body(config(fake)))["job_id"]
    run = rest.get_experiment_run(job_id)
    good = {"statement": stage_credentials_statement(run["experiment_name"], run["experiment_run_name"])}
    answer = statement(fake, good)
    assert answer.status_code == 200 and answer.json()["data"][0][0].startswith("{")
    assert statement(fake, good, token=None).status_code == 401
    other = statement(fake, good, token=TOKEN + "-other")
    assert (other.status_code, other.json()["code"]) == (404, "job_not_found")
    for body, status in (({"statement": "SELECT 1"}, 400), ({}, 400), ([1], 400),
                         ({"statement": stage_credentials_statement("nope", "run-x")}, 404)):
        refused = statement(fake, body)
        assert refused.status_code == status, (body, refused.text)
        assert refused.json()["code"] and refused.json()["message"]


def test_without_the_logs_extra_the_route_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    server = start_in_background(FakeSettings())
    try:
        for name in ("moto", "moto.server"):
            monkeypatch.setitem(sys.modules, name, None)  # as if moto were not installed
        client = create_client(ClientConfig(base_url=server.base_url, **FAST))
        client.start()
        with pytest.raises(CortexHTTPError) as err:
            client.fetch_execution_logs()
        # the kit's string code, or the spec's numeric one (spec §3.6) in the any dialect
        assert err.value.status == 501 and err.value.code in ("logs_extra_missing", "501", 501)
        assert "[logs]" in err.value.message
        client.shutdown()
    finally:
        server.stop()


def test_mutant_stage_empty_downloads_nothing() -> None:
    server = start_in_background(FakeSettings(variation="logs-stage-empty"))
    try:
        client = create_client(ClientConfig(base_url=server.base_url, **FAST))
        client.start()
        assert client.fetch_execution_logs() == []
        client.shutdown()
    finally:
        server.stop()


def test_client_errors_are_typed(fake: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """No boto3 on the client side: a ConfigError naming the extra; an unknown job: 404."""
    from client.errors import ConfigError

    client = create_client(config(fake))
    client.start()
    assert len(client.fetch_execution_logs()) == 2  # the fake's stage is up from here on
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(ConfigError, match=r"\[logs\]"):
        client.fetch_execution_logs()
    monkeypatch.undo()
    with pytest.raises(CortexHTTPError) as err:
        CortexRestClient(config(fake, token=TOKEN + "-other")).fetch_execution_logs(str(client.job_id))
    assert err.value.status == 404
    client.shutdown()


def test_two_accounts_download_their_own_job_of_one_id(fake: FakeServer) -> None:
    """Job ids are per account: both accounts hold a job named X, each download holds that
    account's own lines under ``run-X``, with the sub-job ids the account uses."""
    mine, theirs = (CortexRestClient(config(fake, token=t)) for t in (TOKEN + "-other", TOKEN))
    name = str(uuid.uuid4())
    for rest in (theirs, mine):
        assert rest.create_job({**create_job_body(config(fake)), "job_id": name})["job_id"] == name
        rest.wait_running(name)
    theirs.wait(name, theirs.step(name)["request_id"])
    theirs.cancel_job(name)
    assert mine.get_experiment_run(name)["experiment_run_name"] == f"run-{name}"
    own, other = mine.fetch_execution_logs(name), theirs.fetch_execution_logs(name)
    for logs in (own, other):
        assert sorted(e["sub_job_id"] for e in logs) == [f"{name}:sampling:0", f"{name}:training:0"]
        assert all(f"/versions/run-{name}/_logs/" in e["s3_uri"] for e in logs)
    assert all("(step) done" not in e["content"] and "job cancelled" not in e["content"] for e in own)
    assert all("(step) done" in e["content"] and "job cancelled" in e["content"] for e in other)
    assert {e["s3_uri"].split("/")[2] for e in own}.isdisjoint({e["s3_uri"].split("/")[2] for e in other})
