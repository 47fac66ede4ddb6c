"""Work on the fake bounded by a limit, against a fake in a subprocess
(its RSS its own): the JSON cost bound and parsing off the event loop, the tiny engine's
batch budget. Small sizes; the issue's (a 59 MiB float array, 1024x1024 ids) are
``benchmarks/bench_hardening.py``'s. Health is a liveness check: answered within its
client time-out while the attack runs.
"""

from __future__ import annotations

import pytest
from stress_helpers import fake_process
from work_attacks import float_array_on_step, tiny_batch

MiB = 1024 * 1024


def test_a_large_json_body_is_bounded_and_parsed_off_the_loop() -> None:
    """Over --max-json-values: 413 before parsing, the fake holds about the body once.
    Under it: parsed (off the event loop) at a few times the body, health answering."""
    with fake_process("--max-json-values", "1000000") as fake:
        over = float_array_on_step(fake, 16)  # ~1.4 M values
        under = float_array_on_step(fake, 8)  # ~0.7 M values
    assert over.statuses == [413] and over.extra["code"] == "payload_too_large", over.extra
    assert "max_json_values 1000000" in over.extra["message"]
    assert over.growth_mib * MiB < 2 * over.extra["bytes_sent"] + 16 * MiB, over
    assert under.statuses == [200], under.extra
    assert under.growth_mib * MiB < 8 * under.extra["bytes_sent"] + 16 * MiB, under
    for m in (over, under):
        assert m.latencies and not m.extra["probe_failures"], m.extra


@pytest.mark.slow
@pytest.mark.heavy
def test_a_tiny_batch_over_the_token_budget_costs_its_frame_not_its_compute() -> None:
    """1024x1024 ids (an 8 MiB frame) took the tiny engine from 341 MiB to 14 GB; now the
    batch is refused at submission and the fake holds about the frame."""
    with fake_process("--engine", "tiny") as fake:
        m = tiny_batch(fake, 1024, 1024)
    assert m.statuses == [400] and m.extra["code"] == "limit_exceeded", m.extra
    assert "tiny_max_batch_tokens" in m.extra["message"]
    assert m.growth_mib * MiB < 4 * m.extra["bytes_sent"] + 16 * MiB, m
    assert m.latencies and not m.extra["probe_failures"], m.extra
