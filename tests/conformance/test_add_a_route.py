"""The add-a-route checklist of ``docs/architecture.md`` is complete: a route is one row.

Each numbered step of the checklist names one file; this module holds one check per step,
run for existing routes (each check finds that step's fact present for the route), and a
throwaway row that every reader of a row's fields picks up without a side table. The
checklist and the checks must name the same files: a step without a check, or a check
whose file the checklist forgot, fails here.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from client.calls.session import _Call
from client.rest import CortexRestClient
from contract import models as m
from contract.clauses import CLAUSES
from contract.example_resources import EXAMPLE_JOB_ID
from contract.openapi import SNAPSHOTS, build_openapi, param_examples, render, request_examples
from contract.openapi.document_rules import LINK_BODIES, extensions, schemathesis_config
from contract.routes import PREFIX_TEMPLATE, RequestExample, Route, route
from fake_gs import FakeSettings, serve_in_background
from fake_gs.http.handlers import HANDLERS

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: Routes the checklist is walked for: a JSON data-plane submit with refusals and an
#: executed body, and a current control-plane call with an example resource of its own.
WALKED = ("save", "cancel_job")


def checklist_files() -> list[str]:
    """The file each numbered step of the "A route." entry names first."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    entry = text[text.index("- **A route.**"):]
    entry = entry[:entry.index("\n- **", 1)]
    return re.findall(r"^ +\d+\. `([^`]+)`", entry, flags=re.MULTILINE)


def _operation(r: Route, profile: str = "proposed") -> dict:
    doc = build_openapi(profile)  # type: ignore[arg-type]
    return dict(doc["paths"][PREFIX_TEMPLATE + r.path][r.method.lower()])


def _row(r: Route) -> None:
    assert route(r.name) is r
    assert r.summary and r.clauses, r.name
    assert r.idempotency in ("read", "idempotent", "group", "unsafe")
    assert r.keyed == (r.data_plane and r.method == "POST")


def _models(r: Route) -> None:
    named = [x for x in (r.request_model, r.response_model, r.result_model) if x is not None]
    assert named, r.name
    assert all(getattr(m, model.__name__) is model for model in named), r.name


def _clauses(r: Route) -> None:
    assert set(r.clauses) <= set(CLAUSES), set(r.clauses) - set(CLAUSES)


def _handler(r: Route) -> None:
    assert r.name in HANDLERS
    assert HANDLERS[r.name].__module__.startswith("fake_gs.http.handlers."), HANDLERS[r.name]


def _rest_method(r: Route) -> None:
    method = getattr(CortexRestClient, r.name, None)
    assert callable(method), r.name


def _example_data(r: Route) -> None:
    """Every documented example of the route answers 2xx from a fake holding the example data."""
    op = _operation(r)
    ids = {p["name"]: p["schema"]["examples"][0] for p in op["parameters"] if p["in"] == "path"}
    bodies = [e["value"] for media in op.get("requestBody", {}).get("content", {}).values()
              for e in media.get("examples", {}).values()] or [None]
    with serve_in_background(FakeSettings(example_data=True)) as url, requests.Session() as http:
        for body in bodies:
            answer = http.request(r.method, url + PREFIX_TEMPLATE.format(**ids) + r.path.format(**ids),
                                  json=body, timeout=30)
            assert 200 <= answer.status_code < 300, (r.name, body, answer.status_code, answer.text)


def _document(r: Route) -> None:
    for profile, name in SNAPSHOTS.items():
        if profile == "current" and r.profile != "current":
            continue
        assert (ROOT / "contract" / name).read_text(encoding="utf-8") == render(profile), name
        assert _operation(r, profile)["x-gs-clauses"] == list(r.clauses)


def _schemathesis(r: Route) -> None:
    assert (ROOT / "contract" / "schemathesis.toml").read_text(encoding="utf-8") == schemathesis_config()
    listed = {o["include-operation-id"]: o for o in tomllib.loads(schemathesis_config())["operations"]}
    # Listed for its refusals, or as job-scoped (a job in the wrong state may answer 412).
    assert (r.name in listed) == bool(r.refusals or "{job_id}" in r.path), r.name
    if r.refusals:
        expected = listed[r.name]["checks"]["positive_data_acceptance"]["expected-statuses"]
        assert {str(status) for status, _ in r.refusals} <= set(expected)


STEPS: dict[str, Callable[[Route], None]] = {
    "contract/routes.py": _row,
    "contract/models/__init__.py": _models,
    "contract/clauses.py": _clauses,
    "fake_gs/http/handlers/__init__.py": _handler,
    "client/rest.py": _rest_method,
    "fake_gs/http/example_data.py": _example_data,
    "contract/openapi.json": _document,
    "contract/schemathesis.toml": _schemathesis,
}


def test_the_checklist_names_exactly_the_checked_files() -> None:
    files = checklist_files()
    assert files == list(STEPS), (files, list(STEPS))
    assert all((ROOT / f).exists() for f in files), [f for f in files if not (ROOT / f).exists()]


@pytest.mark.parametrize("name", WALKED)
@pytest.mark.parametrize("step", list(STEPS))
def test_each_step_holds_for_an_existing_route(step: str, name: str) -> None:
    STEPS[step](route(name))


def test_a_new_row_reaches_every_reader_of_its_fields() -> None:
    """A throwaway row (not in ``ROUTES``): the document, the client's retry decision and
    its key read its own fields, with no table to extend."""
    new = dataclasses.replace(
        route("save"), name="throwaway", idempotency="idempotent", resend_only_if_unsent=True,
        clauses=("SAVE-ID-1",), refusals=((409, "a refusal of its own"),),
        executed_body={"checkpoint_id": "x"}, examples=(RequestExample("other", "Another", {"a": 1}),),
        example_ids=(("job_id", "its-own-job"),))
    assert extensions(new) == {"x-gs-clauses": ["SAVE-ID-1"], "x-gs-refusals": {"409": "a refusal of its own"}}
    assert list(request_examples(new)) == ["executed", "other"]
    assert param_examples(new, "job_id") == ["its-own-job"]
    assert param_examples(route("save"), "job_id") == [EXAMPLE_JOB_ID]
    assert new.call_idempotency() == "idempotent" and new.call_idempotency(chunked=True) == "group"
    call = _Call(new, "http://fake/x", deadline=0.0, operation_type=None, idempotency=None)
    assert call.only_if_unsent and call.kind == "idempotent" and call.key is not None
    unkeyed = _Call(dataclasses.replace(new, data_plane=False), "http://fake/x", deadline=0.0,
                    operation_type=None, idempotency=None)
    assert unkeyed.key is None
    assert "throwaway" not in LINK_BODIES  # a row outside ROUTES is no route of the document
