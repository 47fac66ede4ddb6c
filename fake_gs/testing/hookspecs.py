"""The hook the ``fake_gs`` pytest plugin declares: who builds a client config for a test.

``fake_gs.client_config(...)`` hands a client config to a client team's test, but
``fake_gs`` never imports ``client`` (the kit's layering). So the handle offers plain
keyword arguments (``FakeGs.client_kwargs``) and asks this hook to build the config; the
kit's implementation sits where the client may be imported (``conformance.gate_client``,
loaded with the suite's pytest plugin). A team with another client implements the hook in
its conftest, or uses the kwargs itself.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_fake_gs_client_config(kwargs: dict[str, Any]) -> Any:
    """A client config built from ``kwargs`` (``FakeGs.client_kwargs``), or None to let
    another implementation build it."""
