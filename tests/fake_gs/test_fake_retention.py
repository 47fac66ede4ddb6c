"""What the fake keeps for good is bounded by the memory actually kept, across accounts
(``fake_gs.state.quotas``): a job config is counted as the objects kept, not its JSON
size; all accounts' configs share a server-wide cap; an account holds a bounded number of
jobs. Two accounts' configs once kept +1.3 GiB for 130 MiB sent; 5,000 jobs +219 MiB."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

import pytest
from fake_gs_api import MODEL, Api

from contract.limits import MiB
from contract.models import CreateJobRequest
from fake_gs import FakeSettings, ManualClock
from fake_gs.answers.refusals import ApiError
from fake_gs.state.quotas import check_job_room
from fake_gs.state.store import Store


def _config_body(strings: int, name: str = "e") -> bytes:
    """A create body whose training_config carries ``strings`` two-letter strings: ~5 JSON
    bytes each, ~60 bytes each as objects kept."""
    cfg = {"job_type": "training", "model_name": MODEL,
           "training_config": {"optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 128,
                               "train_batch_size": 2, "n_gpus": 1, "pad": ["ab"] * strings}}
    return json.dumps({"sub_job_configs": [cfg], "experiment_name": name}).encode()


def _create(api: Api, body: bytes) -> Any:
    return api.post("/", data=body, headers={"Content-Type": "application/json"})


def _refused(r: Any, names: str) -> None:
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "limit_exceeded" and names in r.json()["message"], r.text


def test_a_config_is_counted_as_the_memory_it_keeps_not_its_json(make_server) -> None:
    """~0.4 MiB of JSON costs ~5 MiB kept: over a 2 MiB cap, though its JSON is not."""
    server = make_server(max_account_config_bytes=2 * MiB)
    body = _config_body(80_000)
    assert len(body) < MiB
    _refused(_create(Api(server.base_url), body), "max_account_config_bytes")
    assert _create(Api(server.base_url), _config_body(100)).status_code == 200


def test_all_accounts_configs_share_a_server_wide_cap(make_server) -> None:
    server = make_server(tokens=("A", "B"), admin_token="Z", max_account_config_bytes=6 * MiB,
                         max_config_bytes_total=8 * MiB)
    a, b = Api(server.base_url, token="A"), Api(server.base_url, token="B")
    assert _create(a, _config_body(80_000)).status_code == 200  # ~5 MiB kept
    _refused(_create(b, _config_body(80_000)), "max_config_bytes_total")
    assert _create(b, _config_body(100)).status_code == 200  # room for small ones is left


def test_an_account_holds_a_bounded_number_of_jobs(make_server) -> None:
    server = make_server(tokens=("A", "B"), admin_token="Z", max_jobs_per_account=3)
    a, b = Api(server.base_url, token="A"), Api(server.base_url, token="B")
    for _ in range(3):
        assert _create(a, _config_body(1)).status_code == 200
    _refused(_create(a, _config_body(1)), "max_jobs_per_account 3")
    assert _create(b, _config_body(1)).status_code == 200  # another account is not blocked


def test_two_accounts_configs_keep_memory_within_4x_what_they_sent_plus_the_cap(make_server) -> None:
    """The issue's attack, scaled down: each account sends three ~0.4 MiB configs; what the
    fake still holds afterwards (Python allocations, traced) stays within 4x the bytes sent
    plus the server-wide cap (counting JSON bytes, it kept ~12x them)."""
    server = make_server(tokens=("A", "B"), admin_token="Z", max_account_config_bytes=6 * MiB,
                         max_config_bytes_total=8 * MiB)
    accounts = [Api(server.base_url, token=t) for t in ("A", "B")]
    for api in accounts:  # warm: the first calls build caches that are no config's cost
        assert _create(api, _config_body(1)).status_code == 200
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        sent = 0
        for i in range(3):
            for api in accounts:
                body = _config_body(80_000, f"e{i}")
                sent += len(body)
                assert _create(api, body).status_code in (200, 400)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 4 * sent + 8 * MiB, (kept / MiB, sent / MiB)


def test_a_job_being_created_counts_against_its_accounts_caps() -> None:
    """A create awaits the engine between its checks and the job's registration: the job
    it holds meanwhile counts, so two concurrent creates cannot both pass the caps."""
    def no_engine() -> Any:
        raise AssertionError("no engine work here")

    settings = FakeSettings().with_overrides(max_jobs_per_account=2, max_account_config_bytes=MiB)
    store = Store(settings, no_engine, clock=ManualClock())
    try:
        body = CreateJobRequest.model_validate(json.loads(_config_body(1)))
        creating = store.table.new_job("A", body)  # not registered yet
        creating.config_bytes = MiB // 2
        check_job_room(store, "A", MiB // 2)  # fits beside it
        with pytest.raises(ApiError, match="max_account_config_bytes"):
            check_job_room(store, "A", MiB // 2 + 1)
        store.table.register_job(store.table.new_job("A", body))
        with pytest.raises(ApiError, match="max_jobs_per_account 2"):
            check_job_room(store, "A", 1)
        store.table.release(creating)  # its create failed: its share is free again
        check_job_room(store, "A", 1)
        check_job_room(store, "B", MiB)
    finally:
        store.close()
