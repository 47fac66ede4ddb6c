"""What one running fake holds: settings, the store (with its engine), faults."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from fake_gs.answers.check import require_in_tests
from fake_gs.answers.forms import FormsOutward
from fake_gs.answers.way_out import WayOut
from fake_gs.clock import SYSTEM_CLOCK, Clock
from fake_gs.controls.faults import FaultInjector
from fake_gs.controls.traffic import Accounts, TrafficLog
from fake_gs.engines import load_engine
from fake_gs.http.body import InflightBudget
from fake_gs.http.connections import ConnectionGuard
from fake_gs.settings import FakeSettings
from fake_gs.state.rules import Rules
from fake_gs.state.store import Store


@dataclass
class AppState:
    settings: FakeSettings
    store: Store
    faults: FaultInjector
    #: Jobs stopped serving after a hostile frame (the bend ``refusal-wedges-job``).
    wedged: set[str] = field(default_factory=set)
    #: Service tokens minted at run time, and the per-account traffic log (``--traffic``).
    accounts: Accounts = field(default_factory=Accounts)
    traffic: TrafficLog = field(default_factory=lambda: TrafficLog(0))
    #: Bytes of the request bodies being received right now (``max_inflight_bytes``).
    inflight: InflightBudget = field(default_factory=lambda: InflightBudget(0))
    #: The admin API's credential when tokens are set: ``--admin-token`` or a random one.
    admin_token: str | None = field(default=None, repr=False)
    #: Open connections, their deadlines and the cap (``fake_gs.http.connections``).
    connections: ConnectionGuard = field(
        default_factory=lambda: ConnectionGuard(FakeSettings(), SYSTEM_CLOCK))
    #: Set once the engine and its imports are loaded (``fake_gs.http.app.warm_up``).
    warmed_up: threading.Event = field(default_factory=threading.Event)
    #: The one hook chain every answer leaves through (``fake_gs.answers.way_out``).
    way_out: WayOut = field(init=False)

    def __post_init__(self) -> None:
        s = self.settings
        self.way_out = WayOut.of(s.seams, forms=s.forms, dialect=s.dialect, status_style=s.status_style,
                                 validate_answers=s.validate_answers)

    @classmethod
    def build(cls, settings: FakeSettings, clock: Clock = SYSTEM_CLOCK,
              seed_resources: Callable[[Store], None] | None = None) -> AppState:
        """``clock``: the time every timed rule reads (tests pass a ManualClock);
        ``seed_resources``: what the store holds from the start and after each reset."""
        require_in_tests(settings.validate_answers)
        quirks = Rules.of(settings).engine_quirks
        store = Store(settings, lambda: load_engine(settings.engine, settings.seed, quirks), clock,
                      seed_resources=seed_resources, outward=FormsOutward(settings.forms))
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
