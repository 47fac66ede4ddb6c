"""``auto`` route choices learn in one try that today's service has no proposed route.

Spec §3.5 has clients resend a 404; a server without the proposed ``/forward-no-grad``
answers its framework's bare 404 (no code), so under that policy a probe would upload the
whole frame eleven times before falling back to the ``forward`` operation of spec §7.1.
Over real loopback HTTP: the server sees one try of the probed route, then the operation.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from client_loopback import FAST, Reply, Seen, loopback

from client.config import ClientConfig
from client.errors import CortexHTTPError
from client.transports.base import JobIds, Request
from client.transports.cortex import CortexTransport
from contract.errors import error_body

JOB = "11111111-2222-3333-4444-555555555555"
BARE_404 = Reply(404, {"detail": "Not Found"})  # a web framework's own 404: no code
REFUSED = Reply(400, error_body("invalid_argument", "the operation refused on purpose"))


def _transport(url: str, route: str) -> CortexTransport:
    cfg = ClientConfig(base_url=url, database="DB", schema="SC", forward_no_grad_route=route,
                       **{**FAST, "retries": 10})
    transport = CortexTransport(cfg)
    transport.ids = JobIds(JOB, f"{JOB}:training:0", f"{JOB}:sampling:0", None, True, 64)
    return transport


def _script(seen_paths: list[str]) -> Any:
    def script(request: Seen) -> Reply:
        seen_paths.append(request.path.rsplit("/", 1)[-1])
        return BARE_404 if request.path.endswith("/forward-no-grad") else REFUSED
    return script


def _fwd_no_grad(transport: CortexTransport) -> None:
    batch = {"input_ids": torch.ones(2, 4, dtype=torch.long)}
    transport.call(Request("fwd-no-grad", None, {"batch": batch}))


def test_auto_probe_is_one_try_then_the_forward_operation() -> None:
    paths: list[str] = []
    with loopback(_script(paths)) as srv:
        transport = _transport(srv.url, "auto")
        with pytest.raises(CortexHTTPError) as info:
            _fwd_no_grad(transport)
        assert info.value.status == 400  # the operation's own answer reached the caller
        assert paths == ["forward-no-grad", "operation"]
        assert transport.absent_routes == {"forward_no_grad"}
        assert transport.rest.http.probed_routes == {}  # the probe ends with the call
        paths.clear()
        with pytest.raises(CortexHTTPError):
            _fwd_no_grad(transport)
        assert paths == ["operation"]  # learnt once, for good


def test_a_configured_proposed_route_keeps_the_spec_retry_policy() -> None:
    paths: list[str] = []
    with loopback(_script(paths)) as srv, pytest.raises(CortexHTTPError) as info:
        _fwd_no_grad(_transport(srv.url, "proposed"))
    assert info.value.status == 404
    assert paths == ["forward-no-grad"] * 11  # spec §3.5: a 404 is resent, 10 retries
