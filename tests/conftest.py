"""Shared test settings: hypothesis profiles (small in CI, larger locally), the fake's
answer check on for every fake a test builds, in this process or a child
(``fake_gs.answers.check``: an answer that does not validate is a 500; building a fake without
the check fails here), the tests marked ``heavy`` collected first, and ``-n auto`` as one
worker more than the cores."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from conformance.planner import MARKERS as PROPERTY_MARKERS
from fake_gs.answers.check import ENV as VALIDATE_ANSWERS_ENV

os.environ[VALIDATE_ANSWERS_ENV] = "1"

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("dev", max_examples=100, deadline=None, print_blob=True)
settings.register_profile("deep", max_examples=1000, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_configure(config: pytest.Config) -> None:
    """The markers properties declare their needs with: tests import property modules
    without the conformance plugin that registers them."""
    for name, what in PROPERTY_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {what}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Heavy tests first (a stable sort): pytest-xdist hands work out in collection order
    (after its multi-test groups), so the two workers start the long tests early and do not
    end with one of them running a long test alone."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the cores this process may use. Many tests wait on
    something other than this machine's CPU (a fake's deadline, a child interpreter starting,
    a socket), and on 2 cores a third worker computes through those waits."""
    return len(os.sched_getaffinity(0)) + 1
