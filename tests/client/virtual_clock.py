"""Virtual time for the client's injected clock and sleep: sleeping advances it, so back-off
and deadlines are tested exactly and without waiting."""

from __future__ import annotations


class Clock:
    """``clock()`` reads the virtual now; ``clock.sleep(s)`` records ``s`` and advances it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
