"""Liveness check for the parity mutant, merged into test_fake_mutants.CHECKS:
a batch past 1 MiB answers its avg_loss negated, a small one as the plain fake does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_gs_api import Api, batch


def avg_loss_flipped_large(api: Api) -> None:
    job = api.running_job()
    small = api.wait(job, api.submit_frame(job, "forward-backward", batch(2, 5)))
    large = api.wait(job, api.submit_frame(job, "forward-backward", batch(4, 40_000)))  # 2.4 MiB of int64
    assert small["result"]["avg_loss"] > 0 > large["result"]["avg_loss"], (small["result"], large["result"])


PARITY_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "avg-loss-flipped-large": (avg_loss_flipped_large, {}),
}
