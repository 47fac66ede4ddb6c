"""Liveness checks for the OpenAPI mutants, merged into
test_fake_mutants.CHECKS: each asserts its violation shows, as small as it can."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_gs_api import Api


def allow_one_route(api: Api) -> None:
    """The collection serves GET and POST; its 405 names only one of them."""
    answer = api.call("PUT", "/", json={})
    assert answer.status_code == 405, answer.text
    allow = {m.strip() for m in answer.headers["allow"].split(",")} - {"HEAD"}
    assert allow != {"GET", "POST"} and len(allow) == 1, allow


OPENAPI_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "allow-one-route": (allow_one_route, {}),
}
