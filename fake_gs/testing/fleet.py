"""The fakes of one pytest session: one per distinct settings, started on first use.

Under pytest-xdist every worker is its own session, so every worker runs its own fakes;
tests inside one worker share them and are kept apart by a token minted per test.

Each fake is started with auth on (a random service token, so minted tokens isolate), a
traffic log, and its own admin credential: the admin API is reached with a secret only
the plugin knows (the fake's ``admin_token``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, fields
from typing import Any

from fake_gs.server import FakeServer, start_in_background
from fake_gs.settings import FakeSettings
from fake_gs.testing.admin_api import AdminApi
from fake_gs.testing.handle import FakeGs

#: Exchanges each test's account keeps in the fake's traffic log (``--fake-gs-traffic``).
DEFAULT_TRAFFIC = 2000


def setting_names() -> set[str]:
    return {f.name for f in fields(FakeSettings)}


def marker_settings(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``@pytest.mark.fake_gs(...)`` keywords as fake settings (refused when the fake has
    no such setting, or when the plugin chooses it)."""
    out = dict(kwargs)
    names = setting_names()
    unknown = set(out) - names
    if unknown:
        raise TypeError(f"@pytest.mark.fake_gs: unknown fake settings {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(sorted(names))}")
    for fixed in ("host", "port", "tokens", "admin_token"):
        if fixed in out:
            raise TypeError(f"@pytest.mark.fake_gs: {fixed} is chosen by the plugin")
    return out


@dataclass
class Running:
    server: FakeServer
    admin: AdminApi

    def account(self) -> tuple[str, str]:
        minted = self.admin.call("POST", "tokens")
        return str(minted["token"]), str(minted["account"])

    def stop(self) -> None:
        self.admin.close()
        self.server.stop()


class Fleet:
    """Fakes keyed by their settings; :meth:`close` stops them all."""

    def __init__(self, traffic: int = DEFAULT_TRAFFIC, **defaults: Any) -> None:
        self._service_token = "svc-" + secrets.token_urlsafe(16)
        self._admin_secret = "admin-" + secrets.token_urlsafe(16)
        self._base: dict[str, Any] = {"log_level": "warning", **defaults, "traffic": traffic}
        self._running: dict[FakeSettings, Running] = {}

    def settings(self, overrides: dict[str, Any]) -> FakeSettings:
        fixed: dict[str, Any] = {"port": 0, "tokens": (self._service_token,), "admin_token": self._admin_secret}
        return FakeSettings().with_overrides(**{**self._base, **overrides, **fixed})

    def get(self, overrides: dict[str, Any]) -> Running:
        settings = self.settings(overrides)
        running = self._running.get(settings)
        if running is None:
            server = start_in_background(settings)
            running = self._running[settings] = Running(server, AdminApi(server.base_url, self._admin_secret))
        return running

    def handle(self, overrides: dict[str, Any]) -> FakeGs:
        """A fresh account on the fake with these settings."""
        running = self.get(overrides)
        token, account = running.account()
        return FakeGs(running.server.base_url, token, account, running.server.settings, running.admin)

    def close(self) -> None:
        for running in self._running.values():
            running.stop()
        self._running.clear()
