"""The client's one back-off: how long to wait before the next try, and waiting it.

Every wait the client makes goes through :class:`Backoff`: a resend after a transient
failure (``RetryPolicy``: jittered, ``Retry-After`` honoured up to the cap) and every poll
(``PollPolicy``: no jitter). The schedule itself is the contract policy's ``delay``; this
object adds the jitter, the cap on a server's hint, and the rule that a wait which would
reach the deadline is not slept at all (the caller raises its time-out at once instead).
Sleep, clock and randomness are injected so tests run on virtual time.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from contract.limits import PollPolicy, RetryPolicy


@dataclass
class Backoff:
    """Waits between tries of one call or one poll, bounded by an absolute deadline."""

    #: Attempt number (0-based) -> un-jittered wait, from the contract policy.
    schedule: Callable[[int], float]
    cap_s: float
    #: Relative spread, e.g. 0.25 draws each wait from [0.75x, 1.25x].
    jitter: float = 0.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)

    @classmethod
    def for_retries(cls, policy: RetryPolicy, *, sleep: Callable[[float], None],
                    clock: Callable[[], float], rng: random.Random) -> Backoff:
        """Resends: exponential with jitter, capped at ``backoff_cap_s``."""
        return cls(policy.delay, policy.backoff_cap_s, policy.jitter, sleep, clock, rng)

    @classmethod
    def for_polls(cls, policy: PollPolicy, *, sleep: Callable[[float], None],
                  clock: Callable[[], float]) -> Backoff:
        """Polls: the poll schedule as is (no jitter), capped at ``cap_s``."""
        return cls(policy.delay, policy.cap_s, sleep=sleep, clock=clock)

    def delay(self, attempt: int, hint: float | None = None) -> float:
        """The wait before try ``attempt + 1``; a server's ``hint`` (Retry-After) wins,
        bounded by the cap so a hostile or confused server cannot park the client."""
        if hint is not None:
            return min(hint, self.cap_s)
        wait = self.schedule(attempt)
        if self.jitter:
            wait *= 1 + self.rng.uniform(-self.jitter, self.jitter)
        return max(0.0, min(wait, self.cap_s))

    def pause(self, attempt: int, deadline: float, hint: float | None = None) -> bool:
        """Sleep before the next try; False (without sleeping) when waking would already
        be at or past ``deadline``, so a doomed wait is never slept."""
        wait = self.delay(attempt, hint)
        if self.clock() + wait >= deadline:
            return False
        self.sleep(wait)
        return True
