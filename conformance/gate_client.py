"""The kit's client config for the ``fake_gs`` gate fixture (``fake_gs.client_config``).

The fixture lives in ``fake_gs``, which never imports ``client``; it hands the plain
keyword arguments of a test's account to the ``pytest_fake_gs_client_config`` hook
(``fake_gs.testing.hookspecs``), and this implementation, here where both may be imported,
builds the ``client.ClientConfig`` from them. Registered with the suite's pytest plugin
(``conformance.plugin``), which every pytest session of an installed kit loads.
"""

from __future__ import annotations

from typing import Any

import pytest

from client.config import ClientConfig


@pytest.hookimpl(optionalhook=True)
def pytest_fake_gs_client_config(kwargs: dict[str, Any]) -> ClientConfig:
    """A ``client.ClientConfig`` talking to the test's fake as the test's account."""
    return ClientConfig(**kwargs)
