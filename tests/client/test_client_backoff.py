"""The one back-off: retry and poll schedules, jitter bounds, the hint cap, the deadline."""

from __future__ import annotations

import random

from virtual_clock import Clock

from client.calls.backoff import Backoff
from contract.limits import PollPolicy, RetryPolicy


def test_poll_schedule_is_the_policy_capped_without_jitter() -> None:
    clock = Clock()
    backoff = Backoff.for_polls(PollPolicy(first_s=0.5, factor=2.0, cap_s=3.0), sleep=clock.sleep,
                                clock=clock)
    assert [backoff.delay(n) for n in range(4)] == [0.5, 1.0, 2.0, 3.0]


def test_retry_jitter_stays_within_its_spread_and_the_cap() -> None:
    policy = RetryPolicy(backoff_first_s=1.0, backoff_factor=2.0, backoff_cap_s=3.0, jitter=0.25)
    clock = Clock()
    backoff = Backoff.for_retries(policy, sleep=clock.sleep, clock=clock, rng=random.Random(7))
    firsts = [backoff.delay(0) for _ in range(200)]
    assert min(firsts) >= 0.75 and max(firsts) <= 1.25 and len(set(firsts)) > 100
    assert all(backoff.delay(5) <= 3.0 for _ in range(50))


def test_a_server_hint_wins_but_is_capped() -> None:
    clock = Clock()
    backoff = Backoff.for_retries(RetryPolicy(backoff_cap_s=6.0), sleep=clock.sleep, clock=clock,
                                  rng=random.Random(0))
    assert backoff.delay(0, hint=2.5) == 2.5
    assert backoff.delay(0, hint=3600.0) == 6.0


def test_pause_never_sleeps_into_the_deadline() -> None:
    clock = Clock()
    backoff = Backoff.for_polls(PollPolicy(first_s=1.0, factor=1.0, cap_s=1.0), sleep=clock.sleep,
                                clock=clock)
    assert backoff.pause(0, deadline=2.5) and backoff.pause(1, deadline=2.5)
    assert not backoff.pause(2, deadline=2.5)  # waking at 3.0 would be past 2.5: no sleep
    assert not backoff.pause(0, deadline=3.0)  # waking exactly at the deadline leaves no time
    assert clock.sleeps == [1.0, 1.0] and clock.now == 2.0
