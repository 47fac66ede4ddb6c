"""Run-wide knobs properties read at import time (hypothesis settings need them then).

The plugin fills :data:`RUNTIME` in ``pytest_configure``, which runs before any property
module is imported; outside a conformance session the defaults apply and nothing global
(no hypothesis profile) is touched, so the plugin stays inert for other test sessions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, settings


@dataclass
class Runtime:
    examples: int = 25
    embedded: bool = True
    randomize: bool = False
    shrink: bool = True
    #: The run's credentials (its tokens, the embedded fake's admin token): scrubbed from
    #: every failing example, skip reason and failure text the reports show.
    secrets: tuple[str, ...] = ()
    #: The answer forms (contract.forms) the target may use: every form against a URL, the
    #: embedded fake's dialect's otherwise. Kit-form clauses are judged only outside them.
    forms: frozenset[str] = frozenset()


RUNTIME = Runtime()


def prop(scale: float = 1.0, minimum: int = 1, **overrides: Any) -> settings:
    """Hypothesis settings for a property: ``scale`` x ``--gs-examples`` examples.

    No deadline (a real server's latency is not a bug), no example database (a run must
    not depend on what a previous run found), derandomised unless ``--gs-randomize``, so
    a report is reproducible.
    """
    n = max(minimum, round(RUNTIME.examples * scale))
    if not RUNTIME.shrink:
        overrides.setdefault("phases", [Phase.explicit, Phase.reuse, Phase.generate])
    return settings(
        max_examples=n,
        deadline=None,
        database=None,
        derandomize=not RUNTIME.randomize,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        **overrides,
    )
