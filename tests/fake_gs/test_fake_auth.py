"""Auth: bearer token + PAT type header, 401 envelopes, per-token isolation, admin auth."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from fake_gs_api import Api, batch

from contract.errors import REQUEST_ID_HEADER


def test_tokens_required_and_isolated(make_server) -> None:
    srv = make_server(tokens=("alice-pat", "bob-pat"))
    alice, bob, nobody = Api(srv.base_url, "alice-pat"), Api(srv.base_url, "bob-pat"), Api(srv.base_url)
    r = nobody.get("/")
    assert r.status_code == 401 and r.json()["code"] == "unauthenticated"
    wrong = Api(srv.base_url, "mallory")
    assert wrong.get("/capacity").status_code == 401
    no_type = requests.get(alice.prefix + "/", headers={"Authorization": "Bearer alice-pat"}, timeout=10)
    assert no_type.status_code == 401 and REQUEST_ID_HEADER in no_type.headers
    bad_type = requests.get(alice.prefix + "/", headers={"Authorization": "Bearer alice-pat",
                                                         "X-Snowflake-Authorization-Token-Type": "OAUTH"}, timeout=10)
    assert bad_type.status_code == 401
    job_id = alice.running_job()
    rid = alice.submit_json(job_id, "step")
    alice.wait(job_id, rid)
    for path in (f"/{job_id}", f"/{job_id}/requests/{rid}", f"/{job_id}/checkpoints", f"/{job_id}/experiment-run"):
        r = bob.get(path)
        assert r.status_code == 404 and r.json()["code"] == "job_not_found", path
    assert bob.post(f"/{job_id}/step", json={}).status_code == 404
    assert bob.send_frame(job_id, "forward-backward", batch()).status_code == 404
    assert bob.post(f"/{job_id}:cancel").status_code == 404
    assert bob.get("/").json() == {"jobs": []}
    assert [j["job_id"] for j in alice.get("/").json()["jobs"]] == [job_id]
    # Capacity is per account (spec §5.4): alice's job is not bob's.
    assert alice.get("/capacity").json()["in_use_gpus"] == 2
    assert bob.get("/capacity").json()["in_use_gpus"] == 0
    assert alice.job(job_id)["submitted_by"] == "user_0"


def test_load_from_another_tokens_job_fails_as_not_found(make_server) -> None:
    srv = make_server(tokens=("a", "b"))
    a, b = Api(srv.base_url, "a"), Api(srv.base_url, "b")
    src = a.running_job()
    a.result(src, a.submit_json(src, "save", {"checkpoint_id": "mine"}))
    dst = b.running_job()
    failed = b.wait(dst, b.submit_json(dst, "load", {"checkpoint_id": "mine", "source_job_id": src}))
    assert failed["error"]["code"] == "job_not_found" and failed["error"]["message"] == f"job {src!r} not found"


def test_admin_needs_a_token_exports_do_not(make_server) -> None:
    srv = make_server(tokens=("t",), admin_token="z")
    anon, ok = Api(srv.base_url), Api(srv.base_url, "t")
    admin = {"Authorization": "Bearer z"}
    for path in ("/_fake/health", "/_fake/state", "/_fake/variations", "/_fake/mutants"):
        r = anon.get(path)
        assert r.status_code == 401 and r.json()["code"] == "unauthenticated"
        assert requests.get(srv.base_url + path, headers=admin, timeout=10).status_code == 200
    assert anon.post("/_fake/reset").status_code == 401
    job_id = ok.running_job()
    ok.result(job_id, ok.submit_json(job_id, "save", {}))
    url = ok.post(f"/{job_id}/checkpoints/global_step0:export").json()["files"][0]["url"]
    assert requests.get(url, timeout=10).status_code == 200
    state = requests.get(srv.base_url + "/_fake/state", headers=admin, timeout=10).json()
    assert state["jobs"][job_id]["owner"] == "token#0"


def test_service_tokens_get_403_on_every_admin_route(make_server) -> None:
    """With --token A --token B --admin-token Z: A and B get 403 on every admin route (they
    could read, fault, force or reset each other's jobs); Z gets 200."""
    srv = make_server(tokens=("A", "B"), admin_token="Z")
    job_b = Api(srv.base_url, "B").running_job()
    routes: list[tuple[str, str, dict[str, Any] | None]] = [("GET", "/_fake/health", None), ("GET", "/_fake/state", None), ("GET", "/_fake/variations", None),
              ("GET", "/_fake/faults", None), ("PUT", "/_fake/faults", {"rules": []}),
              ("POST", "/_fake/faults", {"rules": []}), ("DELETE", "/_fake/faults", None),
              ("POST", f"/_fake/jobs/{job_b}/state", {"status": "failed", "reason": "x"}),
              ("POST", "/_fake/reset", None)]
    for method, path, body in routes:
        for token in ("A", "B"):
            r = requests.request(method, srv.base_url + path, json=body, timeout=10,
                                 headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 403 and r.json()["code"] == "forbidden", (method, path, token, r.text)
        r = requests.request(method, srv.base_url + path, json=body, timeout=10,
                             headers={"Authorization": "Bearer Z"})
        assert r.status_code == 200, (method, path, r.text)


def test_a_random_admin_token_without_one_given(make_server) -> None:
    srv = make_server(tokens=("t",))
    assert srv.admin_token and srv.admin_token != "t"
    r = requests.get(srv.base_url + "/_fake/state", headers={"Authorization": f"Bearer {srv.admin_token}"},
                     timeout=10)
    assert r.status_code == 200
    with pytest.raises(ValueError):
        make_server(tokens=("t",), admin_token="t")


def test_no_tokens_means_open_access(api: Api) -> None:
    assert api.get("/").status_code == 200
