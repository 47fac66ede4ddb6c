"""The fake Cortex Training server: a complete, shape-aware reference implementation.

``create_app(settings)`` builds the ASGI app; ``serve_in_background()`` runs one on a free
port for tests (``clock=ManualClock()`` drives its timed rules); ``fake-gs`` /
``python -m fake_gs`` run one from the command line.
"""

from __future__ import annotations

from fake_gs.clock import Clock, ManualClock
from fake_gs.http.app import create_app
from fake_gs.server import FakeServer, serve_in_background, start_in_background
from fake_gs.settings import FakeSettings, Timing

__all__ = ["Clock", "FakeServer", "FakeSettings", "ManualClock", "Timing", "create_app", "serve_in_background",
           "start_in_background"]
