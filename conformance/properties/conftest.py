"""The properties' own hooks: order, plan, and the URL run's one large result.

The end-of-life property cancels the session job (conformance.judging.lifecycle), so in one process
it must come last; under pytest-xdist it judges a job of its own and the order does not
matter. The plan (conformance.planner) is read off the collected properties. ``gs_large``
is the one chunked result a URL run asks for (conformance.judging.large).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from conformance.options import GsOptions
from conformance.target import Target

if TYPE_CHECKING:  # imported where first used (a run that never asks for it loads none)
    from conformance.judging.large import LargeResult

LAST = "gs_last"


def pytest_configure(config: pytest.Config) -> None:
    """The markers a property declares its needs with (conformance.planner reads them)."""
    from conformance.planner import MARKERS

    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move ``gs_last`` properties to the end, keeping every other item's order; plan the
    run (conformance.planner), and with ``--gs-plan PATH`` only write the plan."""
    from conformance import planner
    from conformance.plugin import gs_options

    last = [item for item in items if item.get_closest_marker(LAST) is not None]
    if last:
        items[:] = [item for item in items if item.get_closest_marker(LAST) is None] + last
    props = [item for item in items if item.get_closest_marker("gs_property") is not None]
    rows = planner.record(config, gs_options(config), props)
    path = config.getoption("--gs-plan", None)
    if path:
        planner.write_plan(rows, path)
        config.hook.pytest_deselected(items=list(items))
        items[:] = []


@pytest.fixture(scope="session")
def gs_large(
    gs_target: Target, gs_opts: GsOptions, request: pytest.FixtureRequest
) -> LargeResult | None:
    """The run's one large (chunked) result against a URL; None on the embedded fake, whose
    variants force chunked delivery at any size (conformance.judging.large)."""
    from conformance.judging.large import LargeResult

    if gs_target.embedded:
        return None
    ops = request.getfixturevalue("gs_ops")
    sub = ops.job.sub_job("training") or {}
    cfg = sub.get("training_config") or {}
    seq = cfg.get("max_seq_len") if isinstance(cfg, dict) else None
    return LargeResult(ops, gs_opts.max_result_mib, seq if isinstance(seq, int) else 512)
