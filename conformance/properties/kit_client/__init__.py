"""Properties of the kit's client against the server, one module per concept: what it sends
(``test_client_requests``), when it sends again (``test_client_retries``, and at most once
through a fault proxy, ``test_client_once``), how it reads answers (``test_client_answers``),
and its integrations' call patterns (``test_client_integration``). The helpers they share
are here; the ``faulty`` fixture is the package's conftest."""

from __future__ import annotations

import time
from typing import Any

from conformance.drivers.kit_client import ClientDriver
from conformance.options import GsOptions
from conformance.target import Target

#: Client-subject clauses judge the client, so the fakes they use never carry the mutant
#: under test (a broken server would make a correct client look wrong).
CLEAN = {"variation": None}


class Sleeps:
    """An injected sleep: records every wait instead of blocking (or blocks briefly)."""

    def __init__(self, real: bool = False) -> None:
        self.calls: list[float] = []
        self.real = real

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if self.real:
            time.sleep(min(seconds, 0.05))


def client_for(
    target: Target, gs_opts: GsOptions, job_id: str | None = None, **config: Any
) -> ClientDriver:
    """The kit's client driven against ``target`` (a job given, or one it creates)."""
    return ClientDriver(target, job_id, model=gs_opts.model, **config)
