"""The fake Cortex Training server: a complete, shape-aware reference implementation.

Its rooms, top to bottom (``.importlinter`` checks the order): ``cli``, ``testing/`` (the
pytest plugin and gate fixture) and ``server`` start it; ``http/`` is the wire side, from
the ASGI app down to one route's handler; ``state/`` is what it keeps; ``chunking/`` the
request chunk-group protocol; ``engines/`` compute results (``shape``, ``tiny/``);
``answers/`` say what an answer looks like (forms per dialect, refusals, delivery);
``controls/`` are what an operator turns on (faults, variations and their seams, traffic).
``settings``/``options`` hold every knob, ``clock`` the one source of time.

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
