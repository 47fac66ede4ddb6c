"""Fault injection hook: rules from a file or the admin API, nth call, drop, delay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from fake_gs_api import Api

from fake_gs.controls.faults import FaultInjector, FaultRule, parse_rules


def test_no_rules_is_a_no_op() -> None:
    assert FaultInjector().decide("step", "POST") is None


def test_rules_from_file_fire_on_the_nth_call(make_api, tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"rules": [{"route": "get_capacity", "nth": 2, "status": 503}]}))
    api = make_api(faults=str(path))
    codes = [api.get("/capacity").status_code for _ in range(3)]
    assert codes == [200, 503, 200]


def test_yaml_rules_and_put(make_api, tmp_path: Path) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text("- route: list_jobs\n  status: 429\n  times: 1\n")
    api = make_api(faults=str(path))
    r = api.get("/")
    assert r.status_code == 429 and r.json()["code"] == "rate_limited" and r.headers["retry-after"]
    assert api.get("/").status_code == 200
    r = api.call("PUT", "/_fake/faults", json=[{"route": "*", "method": "GET", "status": 500, "times": 1, "code": "internal"}])
    assert r.status_code == 200 and r.json()["rules"][0]["status"] == 500
    assert api.get("/capacity").status_code == 500
    assert api.get("/capacity").status_code == 200
    assert api.call("PUT", "/_fake/faults", json=[{"route": "*"}]).status_code == 400


def test_dropped_connection(make_api) -> None:
    api = make_api()
    api.call("PUT", "/_fake/faults", json=[{"route": "get_capacity", "drop": True, "times": 1}])
    with pytest.raises(requests.RequestException):
        Api(api.base_url).get("/capacity", check_id=False)
    assert Api(api.base_url).get("/capacity").status_code == 200


def test_rule_validation() -> None:
    with pytest.raises(ValueError):
        parse_rules([{"route": "x", "colour": 1, "status": 500}])
    with pytest.raises(ValueError):
        parse_rules("nope")
    assert parse_rules(None) == []
    rule = FaultRule.model_validate({"route": "step", "probability": 0.0, "status": 500})
    assert FaultInjector([rule]).decide("step", "POST") is None


@pytest.mark.parametrize(("rule", "field"), [
    ({"route": "step", "nth": True, "status": 500}, "nth"),          # no bool for a count
    ({"route": "step", "drop": "yes"}, "drop"),                      # no coercion
    ({"route": "step", "delay_s": 4000}, "delay_s"),
    ({"route": "step", "chunk": "middle", "drop": True}, "chunk"),
    ({"route": "step", "status": 200}, "status"),
    ({"route": "step", "colour": "red", "drop": True}, "colour"),
])
def test_admin_refuses_a_bad_rule_naming_its_field(make_api, rule: dict, field: str) -> None:
    api = make_api()
    ok = {"route": "get_capacity", "drop": True}
    r = api.call("PUT", "/_fake/faults", json={"rules": [ok, rule]})
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["code"] == "validation_failed"
    assert ["rules", 1, field] in [d["loc"] for d in body["detail"]]
    assert f"rules.1.{field}" in body["message"]
    assert api.call("GET", "/_fake/faults").json()["rules"] == []  # nothing half-installed


def test_bad_rules_file_names_the_rule_and_field(tmp_path: Path) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text("rules:\n  - {route: step, status: 503}\n  - {route: step, every: 0, drop: true}\n")
    with pytest.raises(ValueError, match=r"faults.yaml: rule 1: every: .*greater than or equal to 1"):
        FaultInjector.from_file(path)
