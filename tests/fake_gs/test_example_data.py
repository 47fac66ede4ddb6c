"""``--example-data``: the fake holds what the OpenAPI document's examples name, so sending
every documented example, in the document's order (what schemathesis' examples phase does
with the shipped config), gets a 2xx from every operation; without the option it holds none."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from contract.example_resources import EXAMPLE_JOB_ID
from contract.routes import ROUTES, prefix
from fake_gs import FakeServer

DOCUMENT = Path(__file__).resolve().parents[2] / "contract" / "openapi.json"


def _bodies(operation: dict[str, Any]) -> Iterator[tuple[str | None, bytes | None]]:
    """(content type, bytes) of each documented body example; one bodiless call without."""
    content = operation.get("requestBody", {}).get("content", {})
    sent = False
    for media_type, media in content.items():
        for example in media.get("examples", {}).values():
            value = example["value"]
            data = value.encode("ascii") if isinstance(value, str) else json.dumps(value).encode()
            sent = True
            yield media_type, data
    if not sent:
        yield None, None


def documented_calls() -> Iterator[tuple[str, str, str, str | None, bytes | None]]:
    """(operationId, method, path, content type, body) of every example combination, in the
    document's order: each path parameter's examples, each body example."""
    paths = json.loads(DOCUMENT.read_text(encoding="utf-8"))["paths"]
    for template, item in paths.items():
        for method, operation in item.items():
            params = [p for p in operation["parameters"] if p["in"] == "path"]
            choices = [[(p["name"], v) for v in p["schema"]["examples"]] for p in params]
            for combo in itertools.product(*choices):
                path = template.format(**dict(combo))
                for media_type, body in _bodies(operation):
                    yield operation["operationId"], method.upper(), path, media_type, body


@pytest.mark.parametrize("dialect", ["kit", "spec"])
def test_every_operation_answers_a_documented_example_2xx(make_server: Callable[..., FakeServer],
                                                           dialect: str) -> None:
    server = make_server(example_data=True, dialect=dialect)
    statuses: dict[str, set[int]] = {}
    with requests.Session() as session:
        for name, method, path, media_type, body in documented_calls():
            headers = {"Content-Type": media_type} if media_type else {}
            answer = session.request(method, server.base_url + path, data=body, headers=headers, timeout=30)
            statuses.setdefault(name, set()).add(answer.status_code)
    assert all(any(200 <= s < 300 for s in found) for found in statuses.values()), statuses
    # The only refusal: a first save's id on a job that has not saved under it.
    assert {s for found in statuses.values() for s in found if s >= 300} <= {404}, statuses
    assert server.state.store.internal_errors == 0
    assert set(statuses) == {r.name for r in ROUTES}


def test_without_the_option_the_fake_holds_nothing(make_server: Callable[..., FakeServer]) -> None:
    server = make_server()
    jobs = requests.get(server.base_url + prefix("DB", "PUBLIC") + "/", timeout=30).json()["jobs"]
    assert jobs == []
    job = requests.get(server.base_url + prefix("DB", "PUBLIC") + f"/{EXAMPLE_JOB_ID}", timeout=30)
    assert job.status_code == 404
