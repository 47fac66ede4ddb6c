"""``route_of`` names the route a concrete URL reached, so a test judges sent calls by route
name instead of spelling path fragments."""

from __future__ import annotations

import pytest

from contract.routes import ROUTES, prefix, route, route_of, route_of_rest, split_path
from contract.tape import match_route

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


def test_a_route_matches_its_own_urls_and_names_their_parameters() -> None:
    """One matcher (``Route.match``) serves route_of, the tape's recorder and the passive
    judge: parameters are one encoded segment each, the prefix's names any segment."""
    poll = route("get_request")
    assert poll.match(BASE + "/j%3A1/requests/r1?cursor=2") == {"job_id": "j%3A1", "request_id": "r1"}
    assert poll.match(BASE + "/j1/requests/r1/more") is None
    assert route("cancel_job").match(BASE + "/j1:cancel") == {"job_id": "j1"}
    assert route("get_job").match(BASE + "/j1:cancel") is None  # ':' is not part of an id
    assert route("list_jobs").match("http://h" + prefix("d:b", "s") + "/") == {}
    assert route("list_jobs").match("http://h/elsewhere/") is None


def test_the_part_after_the_prefix_matches_in_table_order() -> None:
    assert split_path(prefix("db", "sch")) == (prefix("db", "sch"), "/")
    assert split_path("/gateway" + prefix("db", "sch") + "/x") is None  # the recorder's paths start there
    assert route_of_rest("GET", "/capacity") is route("get_capacity")  # not get_job of job "capacity"
    assert route_of_rest("GET", "/j1") is route("get_job")
    assert match_route("POST", "/j1:cancel") is route("cancel_job")
