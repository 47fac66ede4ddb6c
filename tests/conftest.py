"""Shared test settings: hypothesis profiles (small in CI, larger locally), and the fake's
answer check on for every fake a test builds, in this process or a child
(``fake_gs.answers``: an answer that does not validate is a 500; building a fake without
the check fails here)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from fake_gs.answers import ENV as VALIDATE_ANSWERS_ENV

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
