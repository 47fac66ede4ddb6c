"""Liveness checks for the hardening mutants, merged into test_fake_mutants.CHECKS."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import requests
from fake_gs_api import OCTET, Api, batch, eventually, training_config
from limit_mutant_checks import _chunks


def service_token_admin(api: Api) -> None:
    r = requests.get(api.base_url + "/_fake/state", headers={"Authorization": "Bearer a"}, timeout=10)
    assert r.status_code == 200  # a service token, where only the admin token should do


def account_caps_ignored(api: Api) -> None:
    """Account 'a' fills the server's buffer (its own cap ignored): account 'b' is blocked."""
    job = api.running_job()
    for _ in range(3):
        assert api.post(f"/{job}/forward-backward", data=_chunks(batch(2, 600))[0], headers=OCTET).status_code == 202
    other = Api(api.base_url, token="b")
    job_b = other.running_job()
    r = other.post(f"/{job_b}/forward-backward", data=_chunks(batch(2, 600))[0], headers=OCTET)
    assert r.status_code == 429


def results_never_freed(api: Api) -> None:
    job = api.running_job()
    rids = [api.submit_frame(job, "forward-no-grad", batch(2, 8)) for _ in range(3)]
    for rid in rids:
        api.wait(job, rid)
    assert api.get(f"/{job}/requests/{rids[0]}").status_code == 200  # read, grace 0, one kept: freed


def late_body_accepted(api: Api) -> None:
    from test_fake_hardening import _answer, _send_head

    job = api.running_job()
    path = api.prefix.split(api.base_url, 1)[1] + f"/{job}/step"
    sock = _send_head(api.base_url, path, 2, "application/json")
    server = api.server
    assert server is not None and eventually(lambda: path in server.exchanges_in_progress())
    assert api.post(f"/{job}:cancel").status_code == 200
    sock.sendall(b"{}")
    status, _ = _answer(sock)
    sock.close()
    assert status == 200  # submitted on a cancelled job


def job_ids_global(api: Api) -> None:
    """Account 'b' creating with account 'a''s job id: 409, as if the id were b's."""
    theirs = api.create_job(training_config(), job_id=str(uuid.uuid4()))
    body = {"sub_job_configs": [training_config()], "job_id": theirs}
    assert Api(api.base_url, "b").post("/", json=body).status_code == 409


HARDENING_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "service-token-admin": (service_token_admin, {"token": "a", "tokens": ("a", "b"), "admin_token": "z"}),
    # A frame of batch(2, 600) is 19,552 bytes: the account's cap holds 2, the server's 3.
    "account-caps-ignored": (account_caps_ignored, {"token": "a", "tokens": ("a", "b"), "admin_token": "z",
                                                    "max_buffered_bytes_per_account": 50 * 1024,
                                                    "max_buffered_bytes_total": 64 * 1024}),
    "results-never-freed": (results_never_freed, {"result_grace_s": 0.0, "results_read_kept": 1}),
    "late-body-accepted": (late_body_accepted, {}),
    "job-ids-global": (job_ids_global, {"token": "a", "tokens": ("a", "b")}),
}
