"""CLIENT-RETRY: which failures the kit's client sends again and how it waits: transient
statuses and lost connections retried, a create that may have landed never resent, one
that never left resent, Retry-After honoured (at most once under faults:
``test_client_once.py``)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import requests

from client.errors import CortexError
from conformance.options import GsOptions
from conformance.properties.kit_client import Sleeps, client_for
from conformance.reporting.violations import expect
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from fake_gs.testing.admin_api import AdminApi

STATUSES = [404, 409, 429, 500, 502, 503, 504]


def _fired(admin: AdminApi) -> list[dict]:
    return admin.faults()

@checks("CLIENT-RETRY-1")
@pytest.mark.parametrize("fault", [*map(str, STATUSES), "drop", "timeout"])
def test_client_retries_transient_failures(
    faulty: tuple[Target, AdminApi], gs_opts: GsOptions, fault: str
) -> None:
    """Transient statuses, dropped connections and time-outs are retried until success."""
    target, admin = faulty
    sleeps = Sleeps()
    client = client_for(target, gs_opts, open_job=False, sleep=sleeps, read_timeout_s=0.5)
    rule: dict[str, Any]  # a fault rule of the fake's admin API (JSON)
    if fault == "drop":
        rule = {"route": "get_capacity", "drop": True, "times": 2}
    elif fault == "timeout":
        rule = {"route": "get_capacity", "delay_s": 1.0, "times": 1}
    else:
        status = int(fault)
        rule = {
            "route": "get_capacity",
            "status": status,
            "times": 2,
            "code": {404: ErrorCode.JOB_NOT_FOUND, 409: "busy"}.get(status),
        }
    admin.set_faults([{k: v for k, v in rule.items() if v is not None}])
    try:
        cap = client.rest.get_capacity()
    except Exception as exc:
        expect("CLIENT-RETRY-1", False, f"client gave up on a transient {fault}: {exc!r}")
    rules = _fired(admin)
    expect(
        "CLIENT-RETRY-1",
        isinstance(cap, dict) and rules[0].get("fired") == rule["times"],
        f"fault fired {rules[0].get('fired')} times, capacity {cap!r}",
    )
    expect(
        "CLIENT-RETRY-1",
        len(sleeps.calls) >= rule["times"] if fault != "timeout" else True,
        f"no back-off between retries: {sleeps.calls}",
    )
    client.close()


@checks("CLIENT-RETRY-2")
@pytest.mark.parametrize("fault", ["503", "drop"])
def test_create_not_retried_when_it_may_have_landed(
    faulty: tuple[Target, AdminApi], gs_opts: GsOptions, fault: str
) -> None:
    """A create-job that reached the server (an answer, or a cut after sending) is not retried."""
    target, admin = faulty
    rule = {
        "route": "create_job",
        "times": 1,
        **({"status": 503} if fault == "503" else {"drop": True}),
    }
    admin.set_faults([rule])
    client = client_for(target, gs_opts, open_job=False, sleep=Sleeps())
    from conformance.inputs import valid_bodies as bodies

    with pytest.raises(CortexError) as info:
        client.rest.create_job(bodies.small_job(gs_opts.model))
    fired = _fired(admin)[0]
    expect(
        "CLIENT-RETRY-2",
        fired.get("seen") == 1,
        f"create-job reached the server {fired.get('seen')} times ({info.value!r})",
    )
    client.close()


@checks("CLIENT-RETRY-2")
def test_create_retried_when_never_sent(gs_opts: GsOptions, gs_target: Target) -> None:
    """A create-job whose connection was never established is retried."""
    from dataclasses import replace

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    dead = replace(gs_target, base_url=f"http://127.0.0.1:{port}")
    client = client_for(dead, gs_opts, open_job=False, sleep=Sleeps(), retries=3)
    attempts = []
    original = client.session.request

    def counting(*args: Any, **kwargs: Any) -> requests.Response:
        attempts.append(1)
        return original(*args, **kwargs)

    client.session.request = counting  # type: ignore[method-assign]
    from conformance.inputs import valid_bodies as bodies

    with pytest.raises(CortexError):
        client.rest.create_job(bodies.small_job(gs_opts.model))
    expect(
        "CLIENT-RETRY-2",
        len(attempts) == 4,
        f"{len(attempts)} attempts to a closed port, want 1 + 3 retries",
    )


@checks("CLIENT-RETRY-3")
@pytest.mark.parametrize("cap", [6.0, 0.2])
def test_retry_after_honoured(
    faulty: tuple[Target, AdminApi], gs_opts: GsOptions, cap: float
) -> None:
    """Retry-After (1 s here) is waited for, bounded by the back-off cap."""
    target, admin = faulty
    admin.set_faults([{"route": "get_capacity", "status": 429, "times": 1}])
    sleeps = Sleeps()
    client = client_for(
        target, gs_opts, open_job=False, sleep=sleeps, backoff_cap_s=cap, backoff_first_s=0.01
    )
    client.rest.get_capacity()
    expect(
        "CLIENT-RETRY-3",
        sleeps.calls and abs(sleeps.calls[0] - min(1.0, cap)) < 1e-6,
        f"slept {sleeps.calls} after a 429 with Retry-After: 1 (cap {cap})",
    )
    client.close()
