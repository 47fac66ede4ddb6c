"""The embedded fake's admin API (``/_fake/...``) for the suite: one ``AdminApi`` per target.

Only ever called when the target is the embedded fake; properties that need it skip
against a real server with the reason saying so. The API itself is the fake's
(``fake_gs.testing.admin_api``); the suite reads its answers under the client's bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import requests

from client.calls.bounded_read import mount_bounds
from conformance.target import Target
from fake_gs.testing.admin_api import AdminApi


def admin_of(target: Target) -> AdminApi:
    """The admin API of an embedded fake target, with its admin credential."""
    if not target.embedded:
        raise RuntimeError("the admin API exists only on the embedded fake")
    session = mount_bounds(requests.Session())
    session.headers.update(target.admin_headers())
    return AdminApi(target.base_url, session=session)


def faults_fake(make_variant: Callable[..., Target], name: str, seed: int) -> Iterator[tuple[Target, AdminApi]]:
    """For a fixture: a fake without mutant reserved for fault rules (``gs_variant`` makes
    it), and its admin; the rules are cleared when the test is done."""
    target = make_variant(name, seed=seed, variation=None)
    admin = admin_of(target)
    yield target, admin
    admin.clear_faults()
