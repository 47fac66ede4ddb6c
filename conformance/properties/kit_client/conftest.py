"""The client properties' own fixture: a clean fake reserved for fault rules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conformance.fake_admin import faults_fake
from conformance.fixtures import Variant
from conformance.target import Target
from fake_gs.testing.admin_api import AdminApi


@pytest.fixture
def faulty(gs_variant: Variant) -> Iterator[tuple[Target, AdminApi]]:
    """A clean fake reserved for fault rules, faults cleared after each test."""
    yield from faults_fake(gs_variant, "client-faults", 4242)
