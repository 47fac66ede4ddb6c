"""Work bounded by a limit on the fake: the JSON cost bound, the tiny
engine's batch budget and non-finite refusal, per-account retention caps. Each refusal is
a 4xx with a code naming the bound and leaves no request, job or checkpoint behind.
(Memory and liveness under the large versions: ``tests/stress/test_work_bounds.py``.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_gs_api import Api, sampling_config

torch = pytest.importorskip("torch")

MODEL = "Qwen/Qwen3-0.6B"


def _training(train_batch_size: int = 8, max_seq_len: int = 4096) -> dict[str, Any]:
    return {"job_type": "training", "model_name": MODEL,
            "training_config": {"optimizer": {"name": "AdamW", "lr": 1e-3}, "max_seq_len": max_seq_len,
                                "train_batch_size": train_batch_size, "n_gpus": 1}}


def _submitted(api: Api) -> int:
    return int(api.state()["requests"]["total"])


def _refusal(r: Any, status: int, code: str, names: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["code"] == code and names in body["message"], body


# --- the JSON cost bound -----------------------------------------------------------------


def test_a_json_body_over_the_value_bound_is_refused_unparsed(make_api) -> None:
    api = make_api(max_json_values=1_000)
    job = api.running_job()
    before = _submitted(api)
    body = json.dumps({"learning_rate": 0.1, "x": [0.5] * 2_000}).encode()
    r = api.post(f"/{job}/step", data=body, headers={"Content-Type": "application/json"})
    _refusal(r, 413, "payload_too_large", "max_json_values 1000")
    assert _submitted(api) == before and api.state()["internal_errors"] == 0
    assert api.post(f"/{job}/step", json={"x": [0.5] * 500}).status_code == 200  # under it: taken


# --- the tiny engine's budget and finite inputs --------------------------------------------


@pytest.fixture
def tiny(make_api) -> tuple[Api, str]:
    api = make_api(engine="tiny", tiny_max_batch_tokens=4096)
    return api, api.running_job(_training(), sampling_config())


def _sft(rows: int, seq: int, **extra: Any) -> dict[str, Any]:
    ids = torch.randint(0, 256, (rows, seq))
    return {"args": [], "kwargs": {"input_ids": ids, "labels": ids.clone(), **extra}}


def test_a_batch_over_the_token_budget_is_refused(tiny) -> None:
    api, job = tiny
    before = _submitted(api)
    for route in ("forward-backward", "forward-no-grad"):
        r = api.send_frame(job, route, _sft(8, 1024))  # 8192 tokens: over 4096
        _refusal(r, 400, "limit_exceeded", "tiny_max_batch_tokens 4096")
    r = api.send_frame(job, "forward-backward", _sft(1, 3000))  # 3000 tokens, but 9 M attended
    _refusal(r, 400, "limit_exceeded", "attends over")
    assert _submitted(api) == before
    assert api.wait(job, api.submit_frame(job, "forward-backward", _sft(16, 256)))["status"] == "done"


def test_non_finite_inputs_are_refused_and_the_weights_stay_finite(tiny) -> None:
    api, job = tiny
    ids = torch.randint(0, 256, (4, 16))
    for name, bad in (("advantages", torch.tensor([1.0, float("nan"), 0.5, 1.0])),
                      ("old_log_probs", torch.full((4, 16), float("-inf")))):
        rl = {"args": [], "kwargs": {"input_ids": ids, "advantages": torch.ones(4), name: bad},
              "processing": {"loss_fn": "grpo"}}
        r = api.send_frame(job, "forward-backward", rl)
        _refusal(r, 400, "invalid_argument", f"{name} holds")
    ans = api.wait(job, api.submit_frame(job, "forward-backward", _sft(4, 16)))
    loss = api.result(job, api.submit_frame(job, "forward-backward", _sft(4, 16)))["avg_loss"]
    assert ans["status"] == "done" and loss == loss and abs(loss) < 100  # finite: nothing poisoned


# --- per-account retention caps ------------------------------------------------------------


def test_a_free_text_string_over_the_cap_is_refused(make_api) -> None:
    api = make_api(max_text_bytes=64, allow_any_model=True)
    for body in ({"experiment_name": "e" * 65},
                 {"sub_job_configs": [{**_training(), "training_config": {**_training()["training_config"],
                                                                          "note": "n" * 65}}]},
                 {"sub_job_configs": [{**_training(), "model_name": "m" * 65}]}):
        full = {"sub_job_configs": [_training()], **body}
        _refusal(api.post("/", json=full), 400, "limit_exceeded", "max_text_bytes 64")
    assert api.state()["jobs"] == {}
    api.create_job(_training(), experiment_name="e" * 64)  # at the cap: taken


def test_one_accounts_job_configs_are_capped_and_another_is_not_blocked(make_server) -> None:
    server = make_server(tokens=("A", "B"), admin_token="Z", max_account_config_bytes=1024 * 1024)
    a, b = Api(server.base_url, token="A"), Api(server.base_url, token="B")
    padded = {"sub_job_configs": [_training()], "experiment_name": "x" * 4000}
    big = {**padded, "sub_job_configs": [{**_training(), "training_config": {
        **_training()["training_config"], **{f"k{i}": "v" * 4000 for i in range(120)}}}]}
    assert a.post("/", json=big).status_code == 200  # ~480 KB
    assert a.post("/", json=big).status_code == 200
    _refusal(a.post("/", json=big), 400, "limit_exceeded", "max_account_config_bytes")
    assert b.post("/", json=big).status_code == 200


def test_checkpoints_are_capped_per_account_but_a_save_may_replace_one(make_api) -> None:
    api = make_api(max_checkpoints_per_account=2)
    job = api.running_job()
    for name in ("a", "b"):
        assert api.wait(job, api.submit_json(job, "save", {"checkpoint_id": name}))["status"] == "done"
    before = _submitted(api)
    _refusal(api.post(f"/{job}/save", json={"checkpoint_id": "c"}), 400, "limit_exceeded",
             "max_checkpoints_per_account is 2")
    assert _submitted(api) == before
    assert api.wait(job, api.submit_json(job, "save", {"checkpoint_id": "a"}))["status"] == "done"
    assert api.call("DELETE", f"/{job}/checkpoints/b").status_code == 200
    assert api.wait(job, api.submit_json(job, "save", {"checkpoint_id": "c"}))["status"] == "done"


def test_an_accounts_exports_are_capped_oldest_out(make_api) -> None:
    api = make_api(max_exports_per_account=2)
    job = api.running_job()
    api.wait(job, api.submit_json(job, "save", {"checkpoint_id": "a"}))
    urls = [api.post(f"/{job}/checkpoints/a:export").json()["files"][0]["url"] for _ in range(3)]
    assert [api.get(u, check_id=False).status_code for u in urls] == [404, 200, 200]
    assert api.state()["exports"] == 2
