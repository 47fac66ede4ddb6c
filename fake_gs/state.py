"""What one running fake holds: settings, the store (with its engine), faults."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from fake_gs.answers import require_in_tests
from fake_gs.body import InflightBudget
from fake_gs.clock import SYSTEM_CLOCK, Clock
from fake_gs.connections import ConnectionGuard
from fake_gs.engines import load_engine
from fake_gs.faults import FaultInjector
from fake_gs.settings import FakeSettings
from fake_gs.store import Store
from fake_gs.traffic import Accounts, TrafficLog


@dataclass
class AppState:
    settings: FakeSettings
    store: Store
    faults: FaultInjector
    #: Jobs the ``refusal-wedges-job`` mutant stopped serving after a hostile frame.
    wedged: set[str] = field(default_factory=set)
    #: Service tokens minted at run time, and the per-account traffic log (``--traffic``).
    accounts: Accounts = field(default_factory=Accounts)
    traffic: TrafficLog = field(default_factory=lambda: TrafficLog(0))
    #: Bytes of the request bodies being received right now (``max_inflight_bytes``).
    inflight: InflightBudget = field(default_factory=lambda: InflightBudget(0))
    #: The admin API's credential when tokens are set: ``--admin-token`` or a random one.
    admin_token: str | None = field(default=None, repr=False)
    #: Open connections, their deadlines and the cap (``fake_gs.connections``).
    connections: ConnectionGuard = field(
        default_factory=lambda: ConnectionGuard(FakeSettings(), SYSTEM_CLOCK))
    #: Set once the engine and its imports are loaded (``fake_gs.app.warm_up``).
    warmed_up: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def build(cls, settings: FakeSettings, clock: Clock = SYSTEM_CLOCK) -> AppState:
        """``clock``: the time every timed rule reads (tests pass a ManualClock)."""
        require_in_tests(settings.validate_answers)
        store = Store(settings, lambda: load_engine(settings.engine, settings.seed, settings.seams.engine_quirks()), clock)
        if settings.faults:
            faults = FaultInjector.from_file(settings.faults, settings.seed)
        else:
            faults = FaultInjector(seed=settings.seed)
        admin_token = settings.admin_token
        if admin_token is None and settings.tokens:
            import secrets

            admin_token = secrets.token_urlsafe(24)
        return cls(settings, store, faults, traffic=TrafficLog(settings.traffic),
                   inflight=InflightBudget(settings.max_inflight_bytes), admin_token=admin_token,
                   connections=ConnectionGuard(settings, clock))
