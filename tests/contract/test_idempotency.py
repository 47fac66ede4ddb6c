"""contract.idempotency: every operation has a kind, each route's row holds its own;
fingerprints tell bodies apart."""

from __future__ import annotations

from contract.idempotency import OPERATION_IDEMPOTENCY, fingerprint, may_resend
from contract.logs import STATEMENTS_ROUTE
from contract.models import OPERATION_PAYLOADS
from contract.routes import ROUTES, route


def test_every_operation_has_a_kind_and_keyed_routes_are_data_plane_posts() -> None:
    assert set(OPERATION_IDEMPOTENCY) == set(OPERATION_PAYLOADS)
    keyed = {r.name for r in ROUTES if r.keyed}
    assert keyed == {r.name for r in ROUTES if r.data_plane}
    assert all(route(name).method == "POST" for name in keyed)
    # Only-if-unsent routes are unsafe routes: create-job, the one that makes a resource.
    assert [r.name for r in ROUTES if r.resend_only_if_unsent] == ["create_job"]
    assert all(r.idempotency == "unsafe" for r in ROUTES if r.resend_only_if_unsent)
    assert STATEMENTS_ROUTE.idempotency == "read" and not STATEMENTS_ROUTE.keyed


def test_reads_are_gets_and_state_changing_calls_are_unsafe() -> None:
    for r in ROUTES:
        if r.method == "GET":
            assert r.idempotency == "read", r.name
    for name in ("step", "save", "load", "generate", "create_job"):
        assert not may_resend(route(name).call_idempotency())
    operation = route("operation")
    assert not may_resend(operation.call_idempotency(operation_type="weight-sync"))
    assert may_resend(operation.call_idempotency(operation_type="tail-logs"))
    assert route("generate").call_idempotency(chunked=True) == "group"
    assert operation.call_idempotency(operation_type="future-op") == "unsafe"


def test_fingerprint_covers_method_path_and_body() -> None:
    base = fingerprint("POST", "/a/step", b"{}")
    assert base == fingerprint("post", "/a/step", bytearray(b"{}"))
    assert len({base, fingerprint("POST", "/a/save", b"{}"), fingerprint("POST", "/a/step", b"{ }"),
                fingerprint("PUT", "/a/step", b"{}")}) == 4
