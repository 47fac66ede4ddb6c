"""What a test holds: ``fake_gs``, one account on a running fake.

Everything goes through the fake's HTTP admin API (never its Python objects), so the
handle works the same whether the fake runs in this process or elsewhere.

Why no ``client`` import here: ``fake_gs`` and ``client`` never import each other (the
kit's layering). :meth:`FakeGs.client_config` hands the plain kwargs of
:meth:`FakeGs.client_kwargs` to the builder the pytest plugin gives the handle (the
``pytest_fake_gs_client_config`` hook, ``fake_gs.testing.hookspecs``, which the kit implements
where the client may be imported); a team with its own client uses those kwargs (or
``base_url``, ``token`` and ``headers``) directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from contract.auth import auth_headers
from contract.errors import ErrorCode
from contract.routes import DEFAULT_ENDPOINT, prefix
from fake_gs.chunking import groups as chunks
from fake_gs.settings import FakeSettings
from fake_gs.testing.admin_api import AdminApi
from fake_gs.testing.gate import Exchange, Expectations


@dataclass
class FakeRules:
    """The fault rules a ``faults(...)`` block installed; after the block, their final
    ``seen``/``fired`` counters (as ``GET /_fake/faults`` shows them)."""

    rules: list[dict[str, Any]]

    @property
    def fired(self) -> int:
        return sum(int(r.get("fired", 0)) for r in self.rules)


@dataclass
class FakeGs:
    """One test's account on a running fake: addressing, faults, traffic, the gate's
    declarations."""

    base_url: str
    token: str = field(repr=False)
    account: str
    settings: FakeSettings = field(repr=False)
    admin: AdminApi = field(repr=False)
    expected: Expectations = field(default_factory=Expectations, repr=False)
    database: str = "CORTEX"
    schema: str = "PUBLIC"
    endpoint: str = DEFAULT_ENDPOINT
    #: Builds a client config from :meth:`client_kwargs` (None: no builder; the plugin's
    #: ``fake_gs`` fixture sets its hook here).
    config_builder: Callable[[dict[str, Any]], Any] | None = field(default=None, repr=False)

    # --- addressing -------------------------------------------------------------------------

    @property
    def headers(self) -> dict[str, str]:
        """The two auth headers of this test's token (for raw HTTP calls)."""
        return auth_headers(self.token)

    @property
    def service_url(self) -> str:
        """``base_url`` + the service prefix: route paths of ``contract.routes`` go after it."""
        return self.base_url + prefix(self.database, self.schema, self.endpoint)

    def client_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments of a ``client.ClientConfig`` that talks to this fake as this
        test's account (a base URL plus an explicit PAT: env-only addressing by
        ``base_url`` sends no PAT, so the token has to be passed)."""
        kwargs: dict[str, Any] = {"backend": "cortex", "base_url": self.base_url, "pat": self.token,
                                  "database": self.database, "schema_name": self.schema,
                                  "endpoint": self.endpoint}
        kwargs.update(overrides)
        return kwargs

    def client_config(self, **overrides: Any) -> Any:
        """A ready ``client.ClientConfig`` (built by the ``pytest_fake_gs_client_config`` hook,
        which the kit's suite plugin implements)."""
        built = self.config_builder(self.client_kwargs(**overrides)) if self.config_builder else None
        if built is None:
            raise RuntimeError("no pytest_fake_gs_client_config hook built a client config: load the kit's "
                               "gs_conformance plugin, implement the hook, or pass client_kwargs() "
                               "to your client")
        return built

    # --- the gate ---------------------------------------------------------------------------

    def expect_error(self, *codes_or_statuses: str | int) -> None:
        """Declare refusals this test provokes on purpose (``"chunk_group_conflict"``,
        ``409``, ...): the gate lets exchanges answered with them pass."""
        if not codes_or_statuses:
            raise TypeError("expect_error() needs at least one error code or HTTP status")
        for item in codes_or_statuses:
            if not isinstance(item, (str, int)) or isinstance(item, bool):
                raise TypeError(f"an error code (str) or an HTTP status (int), got {item!r}")
            self.expected.errors.add(str(item) if isinstance(item, str) else item)  # StrEnum -> value

    # --- what the fake saw --------------------------------------------------------------------

    def traffic_view(self) -> dict[str, Any]:
        return self.admin.traffic(self.account)

    def traffic(self) -> list[Exchange]:
        """Every exchange of this test's account so far (route, status, code, timing, ...)."""
        return [Exchange.from_json(raw) for raw in self.traffic_view()["exchanges"]]

    def state(self) -> dict[str, Any]:
        """``GET /_fake/state`` narrowed to this account: its jobs and their chunk groups,
        named by the job ids this account uses (the dump's keys may differ, fake_gs.state.records)."""
        dump = self.admin.state()
        names = {key: job.get("job_id", key) for key, job in dump.get("jobs", {}).items()
                 if job.get("owner") == self.account}
        groups = [{**g, "job_id": names[g["job_id"]]} for g in dump.get("chunk_groups", [])
                  if g.get("job_id") in names]
        dump["jobs"] = {names[key]: job for key, job in dump.get("jobs", {}).items() if key in names}
        dump["chunk_groups"] = groups
        dump["open_chunk_groups"] = sum(1 for g in groups if g.get("status") != chunks.DONE)
        dump["buffered_bytes"] = sum(int(g.get("buffered_bytes", 0)) for g in groups)
        return dump

    @contextlib.contextmanager
    def faults(self, *rules: Mapping[str, Any]) -> Iterator[FakeRules]:
        """Install fault rules (see the fake's fault injection) for the ``with`` block, then
        restore the rules in force before. Answers a rule injects do not trip the gate;
        a ``lose_group`` rule declares the ``chunk_group_restart_required`` it causes."""
        if not rules:
            raise TypeError("faults() needs at least one rule")
        before = [_rule_fields(r) for r in self.admin.faults()]
        self.admin.add_faults([dict(r) for r in rules])
        if any(r.get("lose_group") for r in rules):
            self.expected.errors.add(ErrorCode.CHUNK_GROUP_RESTART_REQUIRED)
        installed = FakeRules([dict(r) for r in rules])
        try:
            yield installed
        finally:
            now = self.admin.faults()
            installed.rules = now[len(before):len(before) + len(rules)]
            self.admin.set_faults(before)


def _rule_fields(rule: Mapping[str, Any]) -> dict[str, Any]:
    """A rule as ``GET /_fake/faults`` shows it, minus its counters (a PUT refuses them)."""
    return {k: v for k, v in rule.items() if k not in ("seen", "fired")}
