"""Fixtures: fakes started on free ports (module-scoped by default, per-settings on demand)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_gs_api import Api

from fake_gs import FakeServer, start_in_background


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    srv = start_in_background()
    yield srv
    srv.stop()


@pytest.fixture
def api(server: FakeServer) -> Api:
    return Api(server.base_url)


@pytest.fixture
def running(api: Api) -> str:
    """A running job with one training and one sampling sub-job."""
    return api.running_job()


@pytest.fixture
def make_server() -> Iterator[Callable[..., FakeServer]]:
    """Start fakes with specific settings; all stopped at the end of the test."""
    started: list[FakeServer] = []

    def make(**overrides: Any) -> FakeServer:
        srv = start_in_background(**overrides)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture
def make_api(make_server: Callable[..., FakeServer]) -> Callable[..., Api]:
    def make(token: str | None = None, **overrides: Any) -> Api:
        server = make_server(**overrides)
        return Api(server.base_url, token=token, server=server)

    return make
