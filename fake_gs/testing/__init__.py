"""The fake as a plumbing gate in a client team's CI: the pytest plugin
(:mod:`fake_gs.testing.plugin`, entry point ``fake_gs.testing.plugin``), the per-test
handle, the gate's rules and the contract coverage report."""

from __future__ import annotations

from fake_gs.testing.gate import Exchange
from fake_gs.testing.handle import FakeGs

__all__ = ["Exchange", "FakeGs"]
