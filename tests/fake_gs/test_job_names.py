"""Job ids are names in the caller's account (no existence oracle).

A create body's ``job_id`` (JOB-ID-1) names the job within the caller's account: another
account holding a job of that id changes nothing the caller sees (the create answers as
for a free id, byte for byte, in every dialect), and the two jobs of one id stay apart on
every route. The caller reusing its own id still answers 409.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import requests
from fake_gs_api import OCTET, Api, batch, sampling_config, training_config

from contract import wire
from contract.errors import REQUEST_ID_HEADER
from contract.states import normalize_job_state
from fake_gs.answers.forms import forms_for
from fake_gs.clock import ManualClock
from fake_gs.server import FakeServer
from fake_gs.testing.admin_api import AdminApi
from fake_gs.testing.handle import FakeGs

TOKENS = ("tok-a", "tok-b")
ADMIN = "tok-admin"
#: Headers whose value is per exchange whatever the fake holds.
PER_EXCHANGE = {"date", REQUEST_ID_HEADER.lower()}

Answer = tuple[int, bytes, list[tuple[str, str]]]


def _answer(r: requests.Response) -> Answer:
    headers = sorted((k.lower(), "" if k.lower() in PER_EXCHANGE else v) for k, v in r.headers.items())
    return r.status_code, r.content, headers


def _bobs_answers(make_server: Callable[..., FakeServer], dialect: str, alices_id: str, bobs_id: str) -> list[Answer]:
    """Alice creates ``alices_id``, then Bob creates ``bobs_id`` and uses it; Bob's answers.

    Each world starts from the same seed, clock and (for ``--dialect any``) a fresh form
    chooser, so two worlds that differ only in Alice's id give Bob the same bytes unless
    Alice's job shows through."""
    forms_for.cache_clear()  # a fresh counter for the answers the any dialect draws per call
    clock = ManualClock(wall=1_750_000_000.0, monotonic=1_000.0)
    srv = make_server(tokens=TOKENS, dialect=dialect, seed=7, clock=clock)
    alice, bob = Api(srv.base_url, TOKENS[0]), Api(srv.base_url, TOKENS[1])
    body = {"sub_job_configs": [training_config()], "job_id": bobs_id}
    assert alice.call("POST", "/", json={**body, "job_id": alices_id}, check_id=False).status_code == 200
    calls = [("POST", "/", body), ("GET", f"/{bobs_id}", None), ("GET", "/", None), ("POST", "/", body),
             ("GET", f"/{bobs_id}/checkpoints", None), ("POST", f"/{bobs_id}:cancel", None),
             ("GET", f"/{bobs_id}", None)]
    answers = [_answer(bob.call(method, path, json=sent, check_id=False)) for method, path, sent in calls]
    srv.stop()
    return answers


@pytest.mark.parametrize("dialect", ["kit", "spec", "any"])
def test_another_accounts_id_answers_as_a_free_id(make_server, dialect: str) -> None:
    """Bob creating (and using) Alice's job id gets what he gets for a free id: status,
    body and headers, create, get, list, the 409 of his own reuse, checkpoints, cancel."""
    bobs_id = str(uuid.uuid4())
    taken = _bobs_answers(make_server, dialect, alices_id=bobs_id, bobs_id=bobs_id)
    free = _bobs_answers(make_server, dialect, alices_id=str(uuid.uuid4()), bobs_id=bobs_id)
    assert taken == free
    statuses = [status for status, _, _ in taken][:4]
    # Create succeeds with any 2xx (the any dialect answers 201 too, spec §3.6); then 200, 200, 409.
    assert 200 <= statuses[0] < 300 and statuses[1:] == [200, 200, 409], statuses


def test_another_accounts_id_is_404_as_a_free_id(make_server) -> None:
    """Before Bob holds it, Alice's id answers Bob on every route exactly as a free id."""
    for dialect in ("kit", "spec"):
        srv = make_server(tokens=TOKENS, dialect=dialect)
        alice, bob = Api(srv.base_url, TOKENS[0]), Api(srv.base_url, TOKENS[1])
        theirs, free = alice.create_job(training_config(), job_id=str(uuid.uuid4())), str(uuid.uuid4())
        for path in ("", "/checkpoints", "/experiment-run", f"/requests/{uuid.uuid4()}"):
            seen, unseen = bob.get(f"/{theirs}{path}"), bob.get(f"/{free}{path}")
            assert seen.status_code == unseen.status_code == 404, (dialect, path)
            assert seen.text.replace(theirs, free) == unseen.text
        seen, unseen = bob.post(f"/{theirs}/step", json={}), bob.post(f"/{free}/step", json={})
        assert seen.status_code == unseen.status_code == 404
        assert seen.text.replace(theirs, free) == unseen.text


def test_reusing_ones_own_id_is_409_for_each_account(make_server) -> None:
    srv = make_server(tokens=TOKENS)
    alice, bob = Api(srv.base_url, TOKENS[0]), Api(srv.base_url, TOKENS[1])
    name = str(uuid.uuid4())
    body = {"sub_job_configs": [training_config()], "job_id": name}
    assert alice.post("/", json=body).status_code == 200
    assert bob.post("/", json=body).json() == {"job_id": name}
    assert alice.post(f"/{name}:cancel").status_code == 200
    for api in (alice, bob):  # an ended job keeps its name
        again = api.post("/", json=body)
        assert again.status_code == 409 and again.json()["code"] == "job_conflict", again.text
    assert {j["job_id"] for j in alice.get("/").json()["jobs"]} == {name}
    assert {j["job_id"] for j in bob.get("/").json()["jobs"]} == {name}


def _submitted(api: Api, job: str, answer: requests.Response) -> Any:
    """The result of a submission whose answer must name ``job``."""
    assert answer.status_code == 200 and answer.json()["job_id"] == job, answer.text
    return api.result(job, answer.json()["request_id"])


def _failed(api: Api, job: str, answer: requests.Response) -> dict[str, Any]:
    """The error of a submission that is accepted and then fails (an async load, spec §6.4)."""
    assert answer.status_code == 200 and answer.json()["job_id"] == job, answer.text
    settled = api.wait(job, answer.json()["request_id"])
    assert settled["error"] is not None, settled
    error: dict[str, Any] = settled["error"]
    return error


def _train(api: Api, job: str, steps: int, checkpoint: str) -> dict[str, Any]:
    """``steps`` times fwd-bwd (chunked) + step, then a save; the job object afterwards."""
    api.wait_running(job)
    for _ in range(steps):
        trained = _submitted(api, job, api.send_frame(job, "forward-backward", batch(), max_bytes=512))
        assert trained["job_id"] == job
        _submitted(api, job, api.post(f"/{job}/step", json={}))
    saved = _submitted(api, job, api.post(f"/{job}/save", json={"checkpoint_id": checkpoint}))
    assert saved["checkpoint_id"] == checkpoint and saved["global_steps"] == steps, saved
    assert saved["checkpoint_path"] == f"fake-gs://{job}/checkpoints/{checkpoint}"
    return api.job(job)


def _checkpoints(api: Api, job: str) -> list[tuple[str, int]]:
    listed = api.get(f"/{job}/checkpoints").json()["checkpoints"]
    return [(c["checkpoint_id"], c["global_steps"]) for c in listed]


def _use_the_rest(api: Api, x: str, mine: str, theirs: str, other_request: str) -> None:
    """Every other route on the caller's X: nothing of the other account's X shows."""
    assert api.post(f"/{x}/checkpoints/{theirs}:export").status_code == 404
    export = api.post(f"/{x}/checkpoints/{mine}:export")
    assert export.status_code == 200 and export.json()["checkpoint_id"] == mine
    assert requests.get(export.json()["files"][0]["url"], timeout=30).content[:8]  # a real file
    failed = _failed(api, x, api.post(f"/{x}/load", json={"checkpoint_id": theirs, "source_job_id": x}))
    assert failed["code"] == "checkpoint_not_found"
    _submitted(api, x, api.post(f"/{x}/load", json={"checkpoint_id": mine, "source_job_id": x}))
    assert api.get(f"/{x}/requests/{other_request}").status_code == 404
    generated = _submitted(api, x, api.send_frame(x, "generate", {"prompts": [[1, 2]]}))
    assert generated["job_id"] == x
    stream = api.post(f"/{x}/generate-stream", data=b'{"prompts": ["a"]}', headers={"Content-Type": "application/octet-stream"})
    assert stream.json()["job_id"] == x and api.wait(x, stream.json()["request_id"])["status"] == "done"
    sync = api.post(f"/{x}/operation", json={"operation_type": "weight-sync", "sub_job_type": "training",
                                             "payload": {"target_sub_job_ids": [f"{x}:sampling:0"]}})
    assert api.result(x, sync.json()["request_id"])["source_sub_job_id"] == f"{x}:training:0"
    cancel = api.post(f"/{x}/operation", json={"operation_type": "cancel-request", "sub_job_type": "training",
                                               "payload": {"request_id": other_request}})
    assert cancel.status_code == 404, cancel.text
    stray = api.post(f"/{x}/operation", json={"operation_type": "tail-logs", "sub_job_id": f"{x}:training:7",
                                              "payload": {}})
    assert stray.status_code in (400, 404) and stray.json()["code"] == "sub_job_not_found", stray.text
    logs = api.post(f"/{x}/operation", json={"operation_type": "tail-logs", "sub_job_type": "training",
                                             "payload": {}})
    assert logs.status_code == 200 and mine in logs.text and theirs not in logs.text
    assert api.get(f"/{x}/experiment-run").json()["experiment_run_name"] == f"run-{x}"
    assert [j["job_id"] for j in api.get("/").json()["jobs"]] == [x]


def test_two_accounts_train_their_own_job_of_one_id(make_server) -> None:
    """Alice and Bob each own a job named X: counters, requests, checkpoints, exports,
    logs and cancel stay per job, and no answer to Bob shows his job's key."""
    srv = make_server(tokens=TOKENS, admin_token=ADMIN)
    alice, bob, admin = (Api(srv.base_url, token) for token in (*TOKENS, ADMIN))
    bobs_bytes: list[bytes] = []
    bob.session.hooks["response"].append(lambda r, *args, **kwargs: bobs_bytes.append(r.content))
    x = str(uuid.uuid4())
    configs = (training_config(), sampling_config())
    assert alice.create_job(*configs, job_id=x) == bob.create_job(*configs, job_id=x) == x
    seen_a, seen_b = _train(alice, x, 1, "a-ckpt"), _train(bob, x, 2, "b-ckpt")
    for seen in (seen_a, seen_b):
        assert seen["job_id"] == x and [s["sub_job_id"] for s in seen["sub_jobs"]] == [f"{x}:training:0",
                                                                                       f"{x}:sampling:0"]
    assert _checkpoints(alice, x) == [("a-ckpt", 1)] and _checkpoints(bob, x) == [("b-ckpt", 2)]
    alices = alice.submit_json(x, "step", {})
    _use_the_rest(bob, x, "b-ckpt", "a-ckpt", alices)
    alice.wait(x, alices)
    bobs = bob.submit_json(x, "step", {})
    _use_the_rest(alice, x, "a-ckpt", "b-ckpt", bobs)
    bob.wait(x, bobs)

    dump = admin.state()
    by_owner = {job["owner"]: (key, job) for key, job in dump["jobs"].items()}
    (key_a, job_a), (key_b, job_b) = by_owner["token#0"], by_owner["token#1"]
    assert key_a == x and key_b == f"{x}.1" and "job_id" not in job_a and job_b["job_id"] == x
    assert (job_a["global_steps"], job_a["forward_backward_executions"]) == (1, 1)
    assert (job_b["global_steps"], job_b["forward_backward_executions"]) == (3, 2)
    assert job_a["checkpoints"] == ["a-ckpt"] and job_b["checkpoints"] == ["b-ckpt"]
    assert job_a["weight_versions"] == job_b["weight_versions"] == {f"{x}:sampling:0": 1}
    assert bobs_bytes and not any(key_b.encode() in answer for answer in bobs_bytes)

    # The admin API names a job by its key, or by its id within an account.
    forced = admin.post(f"/_fake/jobs/{x}/state?account=token%231", json={"status": "failed", "reason": "x"})
    assert forced.status_code == 200 and forced.json()["job_id"] == key_b
    assert normalize_job_state(bob.job(x)["status"]) == "failed"
    assert normalize_job_state(alice.job(x)["status"]) == "running"
    assert admin.post(f"/_fake/jobs/{x}/state?account=minted%2399", json={"status": "failed"}).status_code == 404
    assert alice.post(f"/{x}:cancel").status_code == 200
    assert normalize_job_state(admin.state()["jobs"][key_a]["status"]) in ("cancelled", "cancelling")
    assert admin.state()["jobs"][key_b]["status"] == "failed"


def test_cross_job_references_resolve_in_the_callers_account(make_server) -> None:
    """source_checkpoint_info names a job of the caller's: Bob's X, not Alice's."""
    srv = make_server(tokens=TOKENS)
    alice, bob = Api(srv.base_url, TOKENS[0]), Api(srv.base_url, TOKENS[1])
    x = str(uuid.uuid4())
    alice.create_job(training_config(), job_id=x)
    bob.create_job(training_config(), job_id=x)
    _train(alice, x, 1, "shared-name")
    _train(bob, x, 3, "bobs-only")

    def start_from(api: Api, checkpoint: str) -> requests.Response:
        cfg = {**training_config(), "source_checkpoint_info": {"source_job_id": x, "checkpoint_id": checkpoint}}
        return api.post("/", json={"sub_job_configs": [cfg]})

    assert start_from(alice, "bobs-only").status_code == 400
    started = start_from(bob, "bobs-only")
    assert started.status_code == 200, started.text
    other = started.json()["job_id"]
    bob.wait_running(other)
    assert bob.job(other)["job_id"] == other  # his own new job
    loaded = _submitted(bob, other, bob.post(f"/{other}/load", json={"checkpoint_id": "bobs-only", "source_job_id": x}))
    assert (loaded["source_job_id"], loaded["global_steps"]) == (x, 3)
    failed = _failed(bob, other, bob.post(f"/{other}/load", json={"checkpoint_id": "shared-name", "source_job_id": x}))
    text = json.dumps(failed)
    assert failed["code"] == "checkpoint_not_found" and x in text and f"{x}." not in text


def test_tiny_engine_serves_a_job_whose_key_is_not_its_id(make_server) -> None:
    """The engine knows the job by its key and the sub-jobs by the ids the caller uses:
    weight sync with named targets and a generate on Bob's X (Alice's X came first)."""
    srv = make_server(tokens=TOKENS, admin_token=ADMIN, engine="tiny")
    alice, bob, admin = (Api(srv.base_url, token) for token in (*TOKENS, ADMIN))
    x = str(uuid.uuid4())
    alice.create_job(training_config(), sampling_config(), job_id=x)
    bob.create_job(training_config(), sampling_config(), job_id=x)
    bob.wait_running(x)
    bob.result(x, bob.submit_frame(x, "forward-backward", batch()))
    bob.result(x, bob.submit_json(x, "step", {}))
    sync = bob.post(f"/{x}/operation", json={
        "operation_type": "weight-sync", "sub_job_id": f"{x}:training:0",
        "payload": {"source_sub_job_id": f"{x}:training:0", "target_sub_job_ids": [f"{x}:sampling:0"]}})
    assert sync.status_code == 200, sync.text
    synced = bob.result(x, sync.json()["request_id"])
    assert synced["target_sub_job_ids"] == [f"{x}:sampling:0"] and synced["weight_version"] == 1
    generated = bob.result(x, bob.submit_frame(x, "generate", {"prompts": [[1, 2]]}))
    assert generated["job_id"] == x and len(generated["results"]) == 1
    dump = admin.state()["jobs"]
    versions = {job["owner"]: job["weight_versions"] for job in dump.values()}
    assert versions == {"token#0": {f"{x}:sampling:0": 0}, "token#1": {f"{x}:sampling:0": 1}}


def test_an_accounts_view_names_its_jobs_by_their_ids(make_server) -> None:
    """The pytest handle's state() shows each account its jobs and chunk groups under the
    ids it uses, though the dump keys Bob's X by another key."""
    srv = make_server(tokens=TOKENS, admin_token=ADMIN)
    alice, bob = Api(srv.base_url, TOKENS[0]), Api(srv.base_url, TOKENS[1])
    x = str(uuid.uuid4())
    alice.create_job(training_config(), job_id=x)
    bob.create_job(training_config(), job_id=x)
    bob.wait_running(x)
    frame = wire.dumps(batch(), metadata=wire.standard_request_metadata())
    first = wire.encode_byte_chunks(frame, "request", operation="forward-backward", max_bytes=512,
                                    chunk_group_id="g1", force_chunk=True)[0]
    assert bob.post(f"/{x}/forward-backward", data=first, headers=OCTET).status_code in (200, 202)

    def view(token: str, account: str) -> dict[str, Any]:
        return FakeGs(srv.base_url, token, account, srv.settings, AdminApi(srv.base_url, ADMIN)).state()

    bobs, alices = view(TOKENS[1], "token#1"), view(TOKENS[0], "token#0")
    assert list(bobs["jobs"]) == list(alices["jobs"]) == [x]
    assert [(g["job_id"], g["chunk_group_id"]) for g in bobs["chunk_groups"]] == [(x, "g1")]
    assert bobs["open_chunk_groups"] == 1 and alices["chunk_groups"] == []
