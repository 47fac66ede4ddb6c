"""contract.idempotency: every route and operation has a kind; fingerprints tell bodies apart."""

from __future__ import annotations

from contract.idempotency import (
    DATA_PLANE_ROUTES,
    OPERATION_IDEMPOTENCY,
    RESEND_ONLY_IF_UNSENT,
    ROUTE_IDEMPOTENCY,
    call_idempotency,
    fingerprint,
    may_resend,
)
from contract.logs import STATEMENTS_ROUTE
from contract.models import OPERATION_PAYLOADS
from contract.routes import ROUTES, ROUTES_BY_NAME


def test_every_route_and_operation_has_a_kind() -> None:
    assert set(ROUTE_IDEMPOTENCY) == {r.name for r in (*ROUTES, STATEMENTS_ROUTE)}
    assert set(OPERATION_IDEMPOTENCY) == set(OPERATION_PAYLOADS)
    assert set(ROUTES_BY_NAME) >= DATA_PLANE_ROUTES
    assert all(ROUTES_BY_NAME[name].method == "POST" for name in DATA_PLANE_ROUTES)
    # Only-if-unsent routes are unsafe routes; a name that is no route would guard nothing.
    assert {"create_job"} == RESEND_ONLY_IF_UNSENT
    assert all(ROUTE_IDEMPOTENCY[name] == "unsafe" for name in RESEND_ONLY_IF_UNSENT)


def test_reads_are_gets_and_state_changing_calls_are_unsafe() -> None:
    for r in ROUTES:
        if r.method == "GET":
            assert ROUTE_IDEMPOTENCY[r.name] == "read", r.name
    for name in ("step", "save", "load", "generate", "create_job"):
        assert not may_resend(call_idempotency(name))
    assert not may_resend(call_idempotency("operation", operation_type="weight-sync"))
    assert may_resend(call_idempotency("operation", operation_type="tail-logs"))
    assert call_idempotency("generate", chunked=True) == "group"
    assert call_idempotency("operation", operation_type="future-op") == "unsafe"


def test_fingerprint_covers_method_path_and_body() -> None:
    base = fingerprint("POST", "/a/step", b"{}")
    assert base == fingerprint("post", "/a/step", bytearray(b"{}"))
    assert len({base, fingerprint("POST", "/a/save", b"{}"), fingerprint("POST", "/a/step", b"{ }"),
                fingerprint("PUT", "/a/step", b"{}")}) == 4
