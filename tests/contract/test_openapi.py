"""The OpenAPI document is valid, covers every route, and matches the committed snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openapi_spec_validator import validate

from contract.openapi import build_openapi, render
from contract.routes import PREFIX_TEMPLATE, ROUTES, routes_for

SNAPSHOT = Path(__file__).resolve().parents[2] / "contract" / "openapi.json"


@pytest.mark.parametrize("profile", ["current", "proposed"])
def test_document_is_valid_openapi_31(profile: str) -> None:
    doc = build_openapi(profile)  # type: ignore[arg-type]
    assert doc["openapi"] == "3.1.0"
    validate(doc)


def test_snapshot_matches_generated_document() -> None:
    assert SNAPSHOT.read_text(encoding="utf-8") == render(), (
        "contract/openapi.json drifted from the models: regenerate with "
        "`python -m contract openapi -o contract/openapi.json` and review the diff"
    )


def test_every_route_is_an_operation() -> None:
    doc = build_openapi()
    ops = {
        (method.upper(), path): op["operationId"]
        for path, item in doc["paths"].items()
        for method, op in item.items()
    }
    for r in ROUTES:
        assert ops[(r.method, PREFIX_TEMPLATE + r.path)] == r.name


def test_current_profile_omits_proposed_routes() -> None:
    ids = {op["operationId"] for item in build_openapi("current")["paths"].values() for op in item.values()}
    assert ids == {r.name for r in routes_for("current")}
    assert "forward_no_grad" not in ids and "log_probs" not in ids


def test_octet_bodies_are_binary() -> None:
    doc = build_openapi()
    for r in ROUTES:
        if r.body in ("octet", "octet-json"):
            op = doc["paths"][PREFIX_TEMPLATE + r.path][r.method.lower()]
            content = op["requestBody"]["content"]
            assert list(content) == ["application/octet-stream"]
            assert content["application/octet-stream"]["schema"] == {"type": "string", "format": "binary"}


def test_error_responses_use_the_envelope() -> None:
    doc = build_openapi()
    envelope = doc["components"]["schemas"]["ErrorEnvelope"]
    assert envelope["anyOf"] == [{"required": ["code", "message"]}, {"required": ["detail"]}]
    assert set(envelope["properties"]["code"]["anyOf"][0]) == {"type"}
    op = doc["paths"][PREFIX_TEMPLATE + "/{job_id}/step"]["post"]
    assert op["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorEnvelope")


def test_cli_prints_the_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    from contract.__main__ import main

    assert main(["openapi"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(SNAPSHOT.read_text(encoding="utf-8"))
