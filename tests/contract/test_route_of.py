"""``route_of`` names the route a concrete URL reached, so a test judges sent calls by route
name instead of spelling path fragments."""

from __future__ import annotations

import pytest

from contract.routes import ROUTES, prefix, route_of

BASE = "http://127.0.0.1:8080/gateway" + prefix("db", "sch")


@pytest.mark.parametrize("spec", ROUTES, ids=lambda r: r.name)
def test_every_route_is_found_from_its_rendered_url(spec) -> None:
    params = {name: "a:b/c" for name in ("job_id", "request_id", "checkpoint_id")}
    url = BASE + spec.render(**{k: v for k, v in params.items() if "{" + k + "}" in spec.path})
    assert route_of(spec.method, url + "?cursor=1") is spec


def test_a_path_no_route_has_is_none() -> None:
    assert route_of("GET", BASE + "/j1/forward-backward") is None
    assert route_of("POST", BASE + "/j1/nowhere") is None
    assert route_of("POST", "http://h/elsewhere/j1/step") is None
