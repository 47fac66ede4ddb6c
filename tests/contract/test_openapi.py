"""The OpenAPI document is valid, covers every route, and matches the committed snapshot."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

from contract import wire
from contract.clauses import CLAUSES
from contract.example_resources import (
    EXAMPLE_CANCEL_JOB_ID,
    EXAMPLE_CHECKPOINT_ID,
    EXAMPLE_DELETE_CHECKPOINT_ID,
    EXAMPLE_JOB_ID,
    EXAMPLE_REQUEST_ID,
    FIRST_SAVE_IDS,
)
from contract.limits import MAX_BODY_BYTES
from contract.openapi import SNAPSHOTS, build_openapi, render
from contract.openapi.answer_fields import REQUIRED
from contract.openapi.bodies import dumps_sample
from contract.openapi.document_rules import schemathesis_config
from contract.routes import PREFIX_TEMPLATE, ROUTES, route, routes_for

SNAPSHOT = Path(__file__).resolve().parents[2] / "contract" / "openapi.json"
ST_CONFIG = SNAPSHOT.parent / "schemathesis.toml"


@pytest.mark.parametrize("profile", ["current", "proposed"])
def test_document_is_valid_openapi_31(profile: str) -> None:
    doc = build_openapi(profile)  # type: ignore[arg-type]
    assert doc["openapi"] == "3.1.0"
    validate(doc)


@pytest.mark.parametrize("profile", sorted(SNAPSHOTS))
def test_snapshot_matches_generated_document(profile: str) -> None:
    """Both documents are committed: the current profile's and the proposed one's."""
    path = SNAPSHOT.parent / SNAPSHOTS[profile]  # type: ignore[index]
    flag = "" if profile == "proposed" else " --profile current"
    assert path.read_text(encoding="utf-8") == render(profile), (  # type: ignore[arg-type]
        f"contract/{path.name} drifted from the models: regenerate with "
        f"`python -m contract openapi{flag} -o contract/{path.name}` and review the diff"
    )


def test_answers_require_what_their_clauses_require_and_stay_open() -> None:
    """The current document's answer schemas require exactly the fields of their clause
    (each a term of the spec the clause rests on) and allow more (spec §11)."""
    schemas = build_openapi("current")["components"]["schemas"]
    for name, (cid, fields) in REQUIRED.items():
        schema = schemas[name]
        assert schema.get("required", []) == list(fields), name
        assert schema.get("additionalProperties") is True, name
        missing = [f for f in fields if f not in CLAUSES[cid].terms]
        assert not missing, f"{name} requires {missing}, which {cid} does not name"
    assert "format" not in schemas["CreateJobResponse"]["properties"]["job_id"]


def test_current_document_allows_every_status_the_spec_does() -> None:
    """422 validation lists everywhere, 200/204 deletes without a body, 2xx cancels."""
    paths = build_openapi("current")["paths"]
    for item in paths.values():
        for op in item.values():
            assert "422" in op["responses"], op["operationId"]
    ops = {op["operationId"]: op for item in paths.values() for op in item.values()}
    delete = ops["delete_checkpoint"]["responses"]
    assert {"200", "204"} <= set(delete) and "content" not in delete["200"]
    assert {"200", "202", "204", "412"} <= set(ops["cancel_job"]["responses"])


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


def test_octet_bodies_are_binary_with_the_body_limit() -> None:
    doc = build_openapi()
    for r in ROUTES:
        if r.body == "octet":
            op = doc["paths"][PREFIX_TEMPLATE + r.path][r.method.lower()]
            content = op["requestBody"]["content"]
            assert list(content) == ["application/octet-stream"]
            schema = content["application/octet-stream"]["schema"]
            binary = schema["anyOf"][0] if "anyOf" in schema else schema
            assert binary["type"] == "string" and binary["format"] == "binary"
            assert binary["maxLength"] == MAX_BODY_BYTES


def test_sample_bodies_are_frames_the_codec_reads() -> None:
    """The sample bodies the document names decode: forward batches as one-chunk groups of
    the route they are for, generate as a plain frame; all ASCII, so JSON carries them."""
    for name in ("forward_backward", "forward_no_grad"):
        chunk = dumps_sample(name)
        frame = wire.decode_byte_chunks([chunk], kind="request")
        found = wire.chunk_descriptor(chunk)
        assert found is not None and found[1]["operation"] == route(name).path.rsplit("/", 1)[1]
        assert wire.loads(frame)["kwargs"]["input_ids"][0][:3] == [1, 2, 3]
    assert wire.loads(dumps_sample("generate"))["prompts"][0].startswith("Hello")
    doc = build_openapi()
    body = doc["paths"][PREFIX_TEMPLATE + "/{job_id}/generate"]["post"]["requestBody"]
    assert body["content"]["application/octet-stream"]["schema"]["anyOf"][1]["const"] == \
        dumps_sample("generate").decode("ascii")


def test_generate_stream_body_is_the_generate_request_as_bytes() -> None:
    op = build_openapi()["paths"][PREFIX_TEMPLATE + "/{job_id}/generate-stream"]["post"]
    schema = op["requestBody"]["content"]["application/octet-stream"]["schema"]
    assert schema == {"$ref": "#/components/schemas/GenerateRequest"}


def test_error_responses_accept_every_dialect() -> None:
    doc = build_openapi()
    schemas = doc["components"]["schemas"]
    assert {"required": ["detail"]} in schemas["ErrorEnvelope"]["anyOf"]
    op = doc["paths"][PREFIX_TEMPLATE + "/{job_id}/step"]["post"]
    assert op["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorBody")
    validator = Draft202012Validator({"$ref": "#/components/schemas/ErrorBody", "components": doc["components"]})
    for body in ({"code": "job_not_found", "message": "no job"},
                 {"message": "conflict", "code": 409},
                 {"detail": [{"loc": ["body", "checkpoint_id"], "msg": "required", "type": "missing"}]}):
        assert validator.is_valid(body), body
    for bad in ({"message": "no code"}, {"code": 409}, {"detail": "not a list"}):
        assert not validator.is_valid(bad), bad


def test_sub_job_configs_are_a_discriminated_one_of() -> None:
    doc = build_openapi()
    schemas = doc["components"]["schemas"]
    assert schemas["SubJobConfig"]["discriminator"]["propertyName"] == "job_type"
    validator = Draft202012Validator({"$ref": "#/components/schemas/SubJobConfig", "components": doc["components"]})
    train = {"optimizer": {"name": "AdamW"}, "max_seq_len": 8, "train_batch_size": 1, "n_gpus": 1}
    infer = {"max_seq_len": 8, "n_gpus": 1}
    model = "Qwen/Qwen3-0.6B"
    assert validator.is_valid({"job_type": "training", "model_name": model, "training_config": train})
    assert validator.is_valid({"job_type": "sampling", "model_name": model, "inference_config": infer})
    assert not validator.is_valid({"job_type": "sampling", "model_name": model})
    assert not validator.is_valid({"job_type": "training", "model_name": model, "training_config": train,
                                   "inference_config": infer})
    assert not validator.is_valid({"job_type": "training", "model_name": "openai/gpt-oss-120b",
                                   "training_config": train})
    assert not validator.is_valid({"job_type": "training", "model_name": model,
                                   "training_config": {**train, "optimizer": {}}})


def test_links_walk_a_job_life() -> None:
    doc = build_openapi()
    by_id = {op["operationId"]: op for item in doc["paths"].values() for op in item.values()}
    create = by_id["create_job"]["responses"]["200"]["links"]
    job_scoped = {r.name for r in ROUTES if "{job_id}" in r.path}
    # The rest get their job together with the checkpoint/request id they also need;
    # cancel follows a deleted checkpoint, so a walk does not end the job at once.
    second_id = {"load", "operation", "get_request", "export_checkpoint", "delete_checkpoint"}
    assert {link["operationId"] for link in create.values()} == job_scoped - second_id - {"cancel_job"}
    deleted = by_id["delete_checkpoint"]["responses"]["200"]["links"]["cancel_job"]
    assert deleted["parameters"]["job_id"] == "$request.path.job_id"
    for r in ROUTES:
        if r.kind != "sync":
            poll = by_id[r.name]["responses"]["200"]["links"]["poll"]
            assert poll["operationId"] == "get_request"
            assert poll["parameters"]["request_id"] == "$response.body#/request_id"
    # Two JSON submits also link to cancelling the request they made.
    cancels = {r.name for r in ROUTES if "cancel" in by_id[r.name]["responses"]["200"].get("links", {})}
    assert cancels == {"step", "log_probs"}
    for name in cancels:
        cancel = by_id[name]["responses"]["200"]["links"]["cancel"]
        assert cancel["requestBody"]["payload"]["request_id"] == "$response.body#/request_id"
    # save -> list (the request's checkpoint_id may be absent or empty), a poll -> list too;
    # the list's first checkpoint and a polled save's result go to load, export and delete.
    for source in ("save", "get_request"):
        targets = {link["operationId"] for link in by_id[source]["responses"]["200"]["links"].values()}
        assert "list_checkpoints" in targets
    checkpoint_users = {"load", "export_checkpoint", "delete_checkpoint"}
    listed = by_id["list_checkpoints"]["responses"]["200"]["links"]
    assert {link["operationId"] for link in listed.values()} == checkpoint_users
    polled = by_id["get_request"]["responses"]["200"]["links"]
    saved = {n: link for n, link in polled.items() if link["operationId"] in checkpoint_users}
    assert {link["operationId"] for link in saved.values()} == checkpoint_users
    for link in saved.values():
        expression = link.get("requestBody", link["parameters"]).get("checkpoint_id")
        assert expression == "$response.body#/result/checkpoint_id", link
    # A look at the account links to create-job with a job that has every sub-job kind.
    for source in ("get_capacity", "list_jobs"):
        sample = by_id[source]["responses"]["200"]["links"]["create_sample_job"]
        kinds = {c["job_type"] for c in sample["requestBody"]["sub_job_configs"]}
        assert kinds == {"training", "sampling"} and sample["x-schemathesis"] == {"merge_body": False}


def test_links_give_each_data_plane_call_its_own_key_and_a_body_it_executes() -> None:
    """A link to a data-plane POST names an Idempotency-Key built from the source answer and
    the target (a generated key would repeat one another route used: a 409), and create-job's
    links to JSON submits send a body the service runs, whole."""
    from contract.idempotency import IDEMPOTENCY_KEY_HEADER
    from contract.openapi.document_rules import LINK_BODIES

    keyed_routes = {r.name for r in ROUTES if r.keyed}

    doc = build_openapi()
    by_id = {op["operationId"]: op for item in doc["paths"].values() for op in item.values()}
    keyed = 0
    for op in by_id.values():
        for link in op["responses"]["200"].get("links", {}).values():
            key = link["parameters"].get(f"header.{IDEMPOTENCY_KEY_HEADER}")
            target = link["operationId"]
            assert (key is not None) == (target in keyed_routes), (op["operationId"], target)
            if key is not None:
                keyed += 1
                assert key.endswith(f"}}-{target}") and "{$" in key, key
    assert keyed >= len(keyed_routes)
    current = build_openapi("current")
    for item in current["paths"].values():
        for op in item.values():
            for link in op["responses"]["200"].get("links", {}).values():
                assert f"header.{IDEMPOTENCY_KEY_HEADER}" not in link["parameters"]
    created = by_id["create_job"]["responses"]["200"]["links"]
    for target, body in LINK_BODIES.items():
        assert created[f"job_{target}"]["requestBody"] == body
        assert created[f"job_{target}"]["x-schemathesis"] == {"merge_body": False}
        model = route(target).request_model
        assert model is not None
        model.model_validate(body)


def test_bodies_without_a_required_field_are_optional_and_examples_validate() -> None:
    """The service reads an absent JSON body as {} (step, save); each request example is an
    instance of its body's schema, and checkpoint ids have the ids a first save names."""
    doc = build_openapi()
    components = doc["components"]
    for r in ROUTES:
        op = doc["paths"][PREFIX_TEMPLATE + r.path][r.method.lower()]
        if r.body == "json":
            assert r.request_model is not None
            required = bool(r.request_model.model_json_schema().get("required"))
            assert op["requestBody"]["required"] is required, r.name
        for media in op.get("requestBody", {}).get("content", {}).values():
            schema = {**media["schema"], "components": components}
            for example in media.get("examples", {}).values():
                assert Draft202012Validator(schema).is_valid(example["value"]), (r.name, example)
    assert route("step").request_model is not None


def _path_examples(doc: dict[str, Any], name: str, parameter: str) -> list[str]:
    r = route(name)
    op = doc["paths"][PREFIX_TEMPLATE + r.path][r.method.lower()]
    return next(p for p in op["parameters"] if p["name"] == parameter)["schema"]["examples"]


def test_every_operation_has_examples_naming_the_example_resources() -> None:
    """Each path parameter has examples, the first naming an example resource; cancel and
    delete name resources no other example uses, so the examples phase's order does not
    matter; checkpoint ids also list the ids a first save names. Every JSON body with a
    required field, and every DSSST1 body, has an example."""
    doc = build_openapi()
    for r in ROUTES:
        op = doc["paths"][PREFIX_TEMPLATE + r.path][r.method.lower()]
        assert all(p["schema"].get("examples") for p in op["parameters"] if p["in"] == "path"), r.name
        if op.get("requestBody", {}).get("required"):
            assert all(media.get("examples") for media in op["requestBody"]["content"].values()), r.name
        if r.name != "cancel_job" and "{job_id}" in r.path:
            assert _path_examples(doc, r.name, "job_id") == [EXAMPLE_JOB_ID]
    assert _path_examples(doc, "cancel_job", "job_id") == [EXAMPLE_CANCEL_JOB_ID]
    assert _path_examples(doc, "export_checkpoint", "checkpoint_id") == [EXAMPLE_CHECKPOINT_ID, *FIRST_SAVE_IDS]
    assert _path_examples(doc, "delete_checkpoint", "checkpoint_id")[0] == EXAMPLE_DELETE_CHECKPOINT_ID
    assert _path_examples(doc, "get_request", "request_id") == [EXAMPLE_REQUEST_ID]
    config = tomllib.loads(ST_CONFIG.read_text(encoding="utf-8"))
    # The examples phase sends exactly the document's examples: no id captured from an answer.
    assert config["phases"]["examples"]["extra-data-sources"]["responses"] is False


def test_the_statement_route_is_named_as_left_out_with_its_reason() -> None:
    from contract.logs import STATEMENTS_PATH

    doc = build_openapi()
    assert not any(path == STATEMENTS_PATH for path in doc["paths"])
    omitted = doc["x-gs-omitted-operations"][f"POST {STATEMENTS_PATH}"]
    assert "$" in omitted["accepted-statement"] and "runtime expression" in omitted["why-omitted"]
    assert set(omitted["x-gs-clauses"]) <= set(CLAUSES)


def test_idempotency_key_is_an_optional_header_of_proposed_data_plane_posts() -> None:
    from contract.idempotency import IDEMPOTENCY_KEY_HEADER

    for profile in ("current", "proposed"):
        for item in build_openapi(profile)["paths"].values():
            for op in item.values():
                keyed = [p for p in op["parameters"] if p["name"] == IDEMPOTENCY_KEY_HEADER]
                expected = profile == "proposed" and route(op["operationId"]).keyed
                assert len(keyed) == int(expected), (profile, op["operationId"])
                if keyed:
                    assert keyed[0]["in"] == "header" and keyed[0]["required"] is False

def test_every_operation_names_its_clauses() -> None:
    for item in build_openapi()["paths"].values():
        for op in item.values():
            assert set(op["x-gs-clauses"]) <= set(CLAUSES), op["operationId"]
            for status in op.get("x-gs-refusals", {}):
                assert status in op["responses"], (op["operationId"], status)


def test_schemathesis_config_snapshot() -> None:
    assert ST_CONFIG.read_text(encoding="utf-8") == schemathesis_config(), (
        "contract/schemathesis.toml drifted: regenerate with "
        "`python -m contract schemathesis-config -o contract/schemathesis.toml`"
    )
    parsed = tomllib.loads(ST_CONFIG.read_text(encoding="utf-8"))
    ids = {entry["include-operation-id"] for entry in parsed["operations"]}
    assert ids == {r.name for r in ROUTES if r.refusals or "{job_id}" in r.path}
    for entry in parsed["operations"]:  # a job in the wrong state may be refused 412 (spec §3.6)
        if "{job_id}" in route(entry["include-operation-id"]).path:
            checks = entry["checks"]
            assert "412" in checks["positive_data_acceptance"]["expected-statuses"], entry
            assert "412" in checks["negative_data_rejection"]["expected-statuses"], entry


def test_a_job_scoped_operation_documents_the_precondition_refusal() -> None:
    """The any dialect refuses a call on a job that is not running 412 (spec §3.6, the
    precondition-status form); each job-scoped operation documents it beside 409."""
    for profile in ("current", "proposed"):
        doc = build_openapi(profile=profile)
        for path, ops in doc["paths"].items():
            for method, op in ops.items():
                if "{job_id}" in path and isinstance(op, dict) and "responses" in op:
                    assert {"409", "412"} <= set(op["responses"]), (profile, method, path)


def test_cli_prints_the_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    from contract.__main__ import main

    assert main(["openapi"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def test_answers_of_both_dialects_match_the_document() -> None:
    """The spec dialect's forms are answers the document accepts, beside the kit's."""
    doc = build_openapi()

    def valid(name: str, body: object) -> bool:
        ref = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
        return Draft202012Validator(ref).is_valid(body)

    poll = {"request_id": "r", "status": "REQUEST_STATE_DONE", "created_at": "t", "updated_at": "t"}
    assert valid("RequestStatus", {**poll, "result": {}, "error": "", "events": [], "next_cursor": ""})
    assert valid("RequestStatus", {**poll, "result": None, "error": None, "events": [], "next_cursor": None})
    assert valid("Capacity", {}) and valid("Capacity", {"max_total_gpus": 8, "available_gpus": 8})
    assert valid("StepResult", {"global_steps": 1, "last_lr": [1e-4, 2e-4]})
    assert valid("StepResult", {"global_steps": 1, "last_lr": 1e-4})
    assert not valid("StepResult", {"global_steps": 1, "last_lr": "0.1"})
    delete = doc["paths"][PREFIX_TEMPLATE + "/{job_id}/checkpoints/{checkpoint_id}"]["delete"]
    assert "content" not in delete["responses"]["204"] and "200" in delete["responses"]
