"""Connection deadlines and the connection cap, against a fake in a
subprocess (its RSS its own), at small sizes with short deadlines; the full sizes are
``benchmarks/bench_hardening.py``'s. Latency is only a liveness check: health answered
within its client time-out while the attack runs.
"""

from __future__ import annotations

from deadline_attacks import idle_sockets, stalled_connections
from stress_helpers import fake_process

#: RSS the fake may add while it holds the attack's connections.
GROWTH_BOUND_MIB = 64


def test_partial_heads_and_trickled_bodies_are_closed_at_their_deadlines() -> None:
    """40 half heads and 10 bodies trickling a byte every 0.5 s (never idle): each gets 408
    and is closed by the deadlines (1 s head, 2 s body), and health answers meanwhile."""
    with fake_process("--head-timeout-s", "1", "--body-timeout-s", "2") as fake:
        m = stalled_connections(fake, heads=40, tricklers=10, trickle_every_s=0.5, within_s=30.0)
    assert m.statuses == [408] * 50, m.statuses
    assert m.extra["closed"] == 50, m.extra
    assert not m.extra["probe_failures"], m.extra
    assert m.growth_mib < GROWTH_BOUND_MIB, m


def test_idle_sockets_over_the_cap_do_not_lock_health_out() -> None:
    """2,000 sockets that never send, against a cap of 100: the fake keeps at most 100 open
    (each newcomer closes the longest idle one) and health is answered throughout."""
    with fake_process("--max-connections", "100") as fake:
        m = idle_sockets(fake, sockets=2_000, per_process=1_000, hold_s=0.5)
    seen = m.extra["fake_connections"]
    assert seen["open"] <= 100 and seen["evicted"] >= 1_900, seen
    assert not m.extra["probe_failures"] and m.latencies, m.extra
    assert m.growth_mib < GROWTH_BOUND_MIB, m
