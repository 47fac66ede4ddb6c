"""The admin API for plumbing gates: tokens minted per test (admin only), the bounded
per-account traffic log, unknown fields reported instead of refused."""

from __future__ import annotations

from typing import Any

from fake_gs_api import OCTET, Api, sampling_config, training_config

ADMIN = "admin-secret"
#: A configured service token: auth is on, and it is not the admin credential.
SERVICE = "service-token"


def admin(make_api: Any, **overrides: Any) -> Api:
    overrides.setdefault("traffic", 50)
    return make_api(token=ADMIN, tokens=(SERVICE,), admin_token=ADMIN, **overrides)


def minted(adm: Api) -> tuple[Api, str]:
    answer = adm.post("/_fake/tokens")
    assert answer.status_code == 200, answer.text
    token, account = answer.json()["token"], answer.json()["account"]
    return Api(adm.base_url, token=token), account


def traffic(adm: Api, account: str) -> dict[str, Any]:
    answer = adm.get("/_fake/traffic", params={"account": account})
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def test_minted_tokens_are_separate_accounts(make_api):
    adm = admin(make_api)
    alice, a_account = minted(adm)
    bob, b_account = minted(adm)
    assert a_account != b_account
    job = alice.create_job(training_config())
    assert bob.get(f"/{job}").status_code == 404  # another account's job does not exist
    assert adm.state()["jobs"][job]["owner"] == a_account
    routes = [(ex["route"], ex["status"]) for ex in traffic(adm, a_account)["exchanges"]]
    assert routes == [("create_job", 200)]
    bob_log = traffic(adm, b_account)["exchanges"]
    assert [(ex["route"], ex["status"], ex["code"]) for ex in bob_log] == [("get_job", 404, "job_not_found")]


def test_minting_is_admin_only_and_needs_auth(make_api):
    adm = admin(make_api)
    user, _ = minted(adm)
    assert user.post("/_fake/tokens").status_code == 403  # a minted token never opens /_fake
    assert user.get("/_fake/traffic").status_code == 403
    assert Api(adm.base_url).post("/_fake/tokens").status_code == 401
    open_fake = make_api(traffic=5)  # no --token: one anonymous account, nothing to isolate
    refused = open_fake.post("/_fake/tokens")
    assert refused.status_code == 409 and "auth is off" in refused.json()["message"]


def test_exchange_records_route_code_op_delivery_and_timing(make_api):
    adm = admin(make_api)
    user, account = minted(adm)
    job = user.running_job(training_config(), sampling_config())
    request_id = user.submit_json(job, "step", {"learning_rate": 1e-4})
    user.wait(job, request_id)
    user.post(f"/{job}/operation", json={"operation_type": "tail-logs", "payload": {}})
    user.get(f"/{job}/no-such-route")
    log = traffic(adm, account)
    by_route = {ex["route"]: ex for ex in log["exchanges"]}
    assert by_route["step"]["template"] == "/{job_id}/step"
    assert by_route["operation"]["op"] == "tail-logs"
    assert by_route["get_request"]["delivery"] == "json"
    assert all(ex["duration_ms"] >= 0 and ex["request_id"] for ex in log["exchanges"])
    missing = log["exchanges"][-1]
    assert (missing["route"], missing["status"], missing["code"]) == (None, 404, "route_not_found")
    assert log["tally"]["operations"] == {"tail-logs": 1}
    assert log["tally"]["codes"] == {"route_not_found": 1}
    assert log["tally"]["routes"]["step 2xx"] == 1


def test_unknown_fields_reported_not_refused_unless_strict(make_api):
    body = {"sub_job_configs": [{**training_config(), "colour": "red"}], "mood": 1}
    adm = admin(make_api)
    user, account = minted(adm)
    assert user.post("/", json=body).status_code == 200
    (ex,) = traffic(adm, account)["exchanges"]
    assert sorted(ex["unknown_fields"]) == ["mood", "sub_job_configs.0.colour"]
    strict = admin(make_api, strict=True)
    user, account = minted(strict)
    assert user.post("/", json=body).status_code == 400
    (ex,) = traffic(strict, account)["exchanges"]
    assert (ex["status"], ex["code"]) == (400, "unknown_field")


def test_log_is_bounded_but_keeps_refusals(make_api):
    adm = admin(make_api, traffic=3)
    user, account = minted(adm)
    user.get("/no-such-job")
    for _ in range(6):
        assert user.get("/capacity").status_code == 200
    log = traffic(adm, account)
    kept = [(ex["route"], ex["status"]) for ex in log["exchanges"]]
    assert kept == [("get_job", 404)] + [("get_capacity", 200)] * 3
    assert (log["total"], log["flagged_total"], log["dropped"]) == (7, 1, 3)
    assert log["tally"]["routes"]["get_capacity 2xx"] == 6  # the tally is exact


def test_open_chunk_groups_of_an_account(make_api):
    from contract import wire

    adm = admin(make_api)
    user, account = minted(adm)
    job = user.running_job(training_config())
    frame = wire.dumps({"note": "x" * 20000})
    first = wire.encode_byte_chunks(frame, "request", "forward_backward", max_bytes=16384)[0]
    assert user.post(f"/{job}/forward-backward", data=first, headers=OCTET).status_code == 202
    (group,) = traffic(adm, account)["open_chunk_groups"]
    assert (group["job_id"], group["received_chunks"], group["total_chunks"]) == (job, 1, 3)
    _, other_account = minted(adm)
    assert traffic(adm, other_account)["open_chunk_groups"] == []


def test_traffic_off_by_default_and_clearable(make_api):
    plain = make_api(token=ADMIN, tokens=(SERVICE,), admin_token=ADMIN)
    assert plain.get("/_fake/traffic").status_code == 409
    adm = admin(make_api)
    user, account = minted(adm)
    user.get("/capacity")
    assert adm.get("/_fake/traffic").json()["accounts"][account]["total"] == 1
    assert adm.call("DELETE", "/_fake/traffic", params={"account": account}).status_code == 200
    assert traffic(adm, account)["exchanges"] == []


def test_log_memory_is_bounded_across_accounts():
    from fake_gs.controls.traffic import TrafficLog

    log = TrafficLog(limit=2)
    log.budget = 5  # the real floor is 50,000 exchanges; the rule is the same
    for n, account in enumerate(["a", "b", "c", "a", "d"]):
        log.record(account, {"status": 404 if n % 2 else 200, "route": "get_job"})
    kept = log.view(None)["accounts"]
    assert list(kept) == ["c", "a", "d"]  # b, the least recently active, was forgotten
    assert sum(len(acc["exchanges"]) for acc in kept.values()) <= 5
    log.clear(None)
    assert log.view(None) == {"accounts": {}}


def test_unknown_field_names_per_exchange_are_capped(make_api):
    from fake_gs.controls.traffic import MAX_UNKNOWN_NAMES

    adm = admin(make_api)
    user, account = minted(adm)
    body = {"sub_job_configs": [training_config()], **{f"extra{i}": i for i in range(80)}}
    assert user.post("/", json=body).status_code == 200
    (ex,) = traffic(adm, account)["exchanges"]
    assert len(ex["unknown_fields"]) == MAX_UNKNOWN_NAMES


def test_every_text_a_caller_chose_is_kept_short(make_api):
    """Field names and an operation type of 200,000 characters each are kept cut to
    MAX_TEXT (10 names of 50 MiB each were once kept whole: +511 MiB)."""
    from fake_gs.controls.traffic import MAX_TEXT

    adm = admin(make_api)
    user, account = minted(adm)
    job = user.running_job()
    long = "n" * 200_000
    assert user.post(f"/{job}/step", json={f"{long}{i}": i for i in range(3)}).status_code == 200
    assert user.post(f"/{job}/operation", json={"operation_type": long, "payload": {}}).status_code == 400
    answer = adm.get("/_fake/traffic", params={"account": account})
    assert len(answer.content) < 64 * 1024, len(answer.content)
    step, op = [ex for ex in answer.json()["exchanges"] if ex["route"] in ("step", "operation")]
    assert len(step["unknown_fields"]) == 3
    assert all(len(name) <= MAX_TEXT + 40 for name in step["unknown_fields"]), step["unknown_fields"]
    assert step["unknown_fields"][0].endswith("(200001 characters)")
    assert op["op"] is None or len(op["op"]) <= MAX_TEXT + 40
