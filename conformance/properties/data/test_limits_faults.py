"""LIMIT/AUTH-ADMIN/CLIENT under stress: frame limits through chunk groups, released and
expiring group bytes, a server-wide buffer cap with Retry-After, recovery after hostile
input, the admin API behind the tokens, and the client surviving lost chunk groups, lost
final answers and an exhausted retry budget (the fake's fault rules drive those)."""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from conformance.drivers.kit_client import ClientDriver
from conformance.drivers.ops import RawOps
from conformance.drivers.raw import Answer, RawDriver
from conformance.fake_admin import admin_of, faults_fake
from conformance.fixtures import Variant
from conformance.jobs import SharedJob
from conformance.judging import frames
from conformance.judging.checks import kit_form, refused
from conformance.judging.variants import variant_job
from conformance.options import GsOptions
from conformance.reporting.violations import Soft, expect
from conformance.target import Target
from contract.auth import auth_headers
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.states import RequestState
from contract.wire import CHUNK_HEADER_ALLOWANCE
from fake_gs.testing.admin_api import AdminApi

#: Client-subject properties run on a fake without the mutant under test.
#: How long a background sweep may take to expire an idle group (polled, not slept).
SWEEP_WITHIN_S = 5.0


def _ids_tensor() -> frames.RawTensor:
    return frames.RawTensor("kwargs.input_ids", "I64", (1, 4), struct.pack("<4q", 1, 2, 3, 4))


def _valid_with(extra_node: list, extra_tensors: list[frames.RawTensor]) -> bytes:
    """A valid forward-backward frame ({args, kwargs: {input_ids}}) plus one extra subtree:
    only a limit can refuse it, so a server skipping the limit would execute it."""
    tree = [
        "d",
        [
            ["args", ["j", []]],
            ["kwargs", ["d", [["input_ids", ["t", "kwargs.input_ids"]]]]],
            ["extra", extra_node],
        ],
    ]
    return frames.build_frame(tree, [_ids_tensor(), *extra_tensors])


def deep_frame(depth: int = 200) -> bytes:
    key = "extra" + ".0" * depth
    node: list = ["t", key]
    for _ in range(depth):
        node = ["l", [node]]
    return _valid_with(node, [frames.RawTensor(key, "U8", (1,), b"\x01")])


def many_tensor_frame(n: int = 150_000) -> bytes:
    node = ["l", [["t", f"extra.{i}"] for i in range(n)]]
    return _valid_with(
        node, [frames.RawTensor(f"extra.{i}", "U8", (1,), b"\x01") for i in range(n)]
    )


def _chunks(frame: bytes, n: int) -> list[bytes]:
    return frames.split(frame, n, str(uuid.uuid4()))


@checks("LIMIT-FRAME-2")
@pytest.mark.parametrize("kind", ["depth", "tensors"])
def test_frame_limits_apply_to_chunked_frames(
    gs_raw: RawDriver, gs_job: SharedJob, gs_target: Target, kind: str
) -> None:
    """A frame over the depth or tensor-count limit, valid otherwise, sent as request
    chunks, is refused with a 4xx and a code; forward-backward never runs it."""
    frame = deep_frame() if kind == "depth" else many_tensor_frame()
    admin = admin_of(gs_target) if gs_target.embedded else None
    before = admin.fb_executions(gs_job.job_id) if admin else None
    started = time.monotonic()
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, _chunks(frame, 3))
    elapsed = time.monotonic() - started
    last = answers[-1]
    soft = Soft()
    refused(last, soft, "LIMIT-FRAME-2", statuses=[400, 413, 422])
    soft.expect("LIMIT-FRAME-2", bool(last.any_code), "the refusal carries no code")
    soft.expect("LIMIT-FRAME-2", elapsed < 30.0, f"took {elapsed:.1f}s to refuse")
    if admin is not None:
        after = admin.fb_executions(gs_job.job_id)
        soft.expect("LIMIT-FRAME-2", after == before, f"executions went {before} -> {after}")
    soft.check()


def _fb_frame(size: int = 64 * 1024) -> bytes:
    return _valid_with(
        ["t", "extra.blob"], [frames.RawTensor("extra.blob", "U8", (size,), b"\x02" * size)]
    )


@checks("LIMIT-RELEASE-1")
def test_finished_groups_release_their_bytes(
    gs_raw: RawDriver, gs_job: SharedJob, gs_admin: AdminApi
) -> None:
    """Once a group's frame is whole and submitted, its chunk bytes are gone (the fake's
    state dump shows 0 buffered bytes for it) and the request still resolves."""
    frame = _fb_frame()
    chunks = _chunks(frame, 4)
    gid = frames.chunk_parts(chunks[0])[0]["request_chunk"]["chunk_group_id"]
    answers = gs_raw.send_chunks("forward_backward", gs_job.job_id, chunks)
    rid = answers[-1].field("request_id")
    expect("LIMIT-RELEASE-1", answers[-1].ok and rid, f"the group was not accepted: {answers[-1]}")
    settled = gs_raw.settle(gs_job.job_id, rid)
    expect("LIMIT-RELEASE-1", settled.status == RequestState.DONE, f"ended {settled.raw_status}")
    group = gs_admin.group(gid) or {}
    expect(
        "LIMIT-RELEASE-1",
        group.get("buffered_bytes") == 0,
        f"a finished group still buffers {group.get('buffered_bytes')} bytes: {group}",
    )


def _open_group(driver: RawDriver, job_id: str, size: int = 64 * 1024) -> Answer:
    return driver.call("forward_backward", data=_chunks(_fb_frame(size), 2)[0], job_id=job_id)


@checks("LIMIT-EXPIRE-1")
def test_idle_groups_expire_without_further_calls(gs_variant: Variant) -> None:
    """An abandoned group expires after the idle time even when no later chunk arrives for
    its job: its bytes are released by the server on its own."""
    target = gs_variant("sweep", chunk_group_idle_s=0.2)
    driver, ops = variant_job(target)
    ans = _open_group(driver, ops.job_id)
    expect("LIMIT-EXPIRE-1", ans.status == 202 or ans.ok, f"could not open a group: {ans}")
    admin = admin_of(target)
    deadline = time.monotonic() + SWEEP_WITHIN_S
    while True:
        state = admin.state()
        mine = [g for g in state.get("chunk_groups", []) if g.get("job_id") == ops.job_id]
        if not mine:
            break
        expect(
            "LIMIT-EXPIRE-1",
            time.monotonic() < deadline,
            f"an idle group is still held after {SWEEP_WITHIN_S}s: {mine}",
        )
        time.sleep(0.05)
    expect("LIMIT-EXPIRE-1", state.get("buffered_bytes") == 0, f"bytes still buffered: {state}")


@checks("LIMIT-EXPIRE-2")
def test_expired_groups_free_their_cap_slot(gs_variant: Variant) -> None:
    """With one open group allowed per job, an abandoned group blocks a second one only
    until the idle time has passed; then a new group is accepted."""
    target = gs_variant("slot", max_open_groups_per_job=1, chunk_group_idle_s=0.2)
    driver, ops = variant_job(target)
    first = _open_group(driver, ops.job_id)
    expect("LIMIT-EXPIRE-2", first.status == 202, f"could not open a group: {first}")
    deadline = time.monotonic() + SWEEP_WITHIN_S
    while True:
        ans = _open_group(driver, ops.job_id)
        if ans.status == 202:
            return
        expect(
            "LIMIT-EXPIRE-2",
            ans.status == 429 and time.monotonic() < deadline,
            f"a new group is still refused {SWEEP_WITHIN_S}s after the old one went idle: {ans}",
        )
        time.sleep(0.05)


@checks("LIMIT-RETRYAFTER-2")
def test_group_cap_refusal_carries_retry_after(gs_variant: Variant) -> None:
    """The open-group cap answers 429 chunk_group_limit with a Retry-After header."""
    target = gs_variant("slot-ra", max_open_groups_per_job=1)
    driver, ops = variant_job(target)
    first = _open_group(driver, ops.job_id)
    expect("LIMIT-RETRYAFTER-2", first.status == 202, f"could not open a group: {first}")
    ans = _open_group(driver, ops.job_id)
    soft = Soft()
    refused(ans, soft, "LIMIT-RETRYAFTER-2", codes=[ErrorCode.CHUNK_GROUP_LIMIT], statuses=[429])
    retry_after = ans.headers.get("retry-after")
    soft.expect("LIMIT-RETRYAFTER-2", retry_after, "429 chunk_group_limit without Retry-After")
    soft.check()


@checks("LIMIT-GROUPS-1", "LIMIT-RETRYAFTER-1", "LIMIT-RETRYAFTER-2")
def test_server_wide_buffer_cap(gs_variant: Variant) -> None:
    """Buffered chunk bytes are capped for all jobs together: a group from a second job
    that would pass the cap answers 429 with a code and Retry-After."""
    target = gs_variant("total-cap", max_buffered_bytes_total=200 * 1024)
    driver, first = variant_job(target, seed=1)
    _, second = variant_job(target, seed=2)
    ok = _open_group(driver, first.job_id, size=120 * 1024)
    expect("LIMIT-GROUPS-1", ok.status == 202, f"first group refused: {ok}")
    ans = _open_group(driver, second.job_id, size=120 * 1024)
    soft = Soft()
    refused(ans, soft, "LIMIT-GROUPS-1", statuses=[413, 429])
    soft.expect("LIMIT-GROUPS-1", bool(ans.any_code), "the refusal carries no code")
    if ans.status in (429, 503):
        for cid in ("LIMIT-RETRYAFTER-1", "LIMIT-RETRYAFTER-2"):
            soft.expect(cid, ans.headers.get("retry-after"), f"{ans.status} without Retry-After")
    soft.check()


def hostile_inputs(job_id: str) -> list[tuple[str, bytes]]:
    """A few refusals of each family: garbage, legacy, limits, bad chunk sequences."""
    good = _fb_frame(4096)
    restart = _chunks(good, 3)[1]  # a first-seen group starting at chunk 1
    conflicting = frames.with_descriptor(_chunks(good, 2)[0], total_chunks=0)
    return [
        ("garbage", b"\x00\x01garbage"),
        ("pickle", b"\x80\x04\x95" + b"\x00" * 32),
        ("zip", b"PK\x03\x04" + b"\x00" * 32),
        ("truncated", good[: len(good) // 2]),
        ("huge-header-length", struct.pack("<Q", 2**62) + b"{}"),
        ("deep", deep_frame(120)),
        ("restart", restart),
        ("bad-descriptor", conflicting),
    ]


@checks("LIMIT-RECOVER-1")
def test_serves_normally_after_hostile_input(
    gs_raw: RawDriver, gs_job: SharedJob, gs_ops: RawOps
) -> None:
    """After refusing a volley of hostile frames and chunk sequences on a job, the same job
    still runs a chunked forward-backward and a step."""
    soft = Soft()
    for name, body in hostile_inputs(gs_job.job_id):
        ans = gs_raw.call("forward_backward", data=body, job_id=gs_job.job_id)
        soft.expect(
            "LIMIT-RECOVER-1", 400 <= ans.status < 500, f"{name}: answered {ans.status}, want a 4xx"
        )
    answers, settled = gs_raw.run_frame(
        "forward_backward",
        gs_job.job_id,
        {"args": [], "kwargs": {"input_ids": [[1, 2, 3]]}},
        chunk_bytes=CHUNK_HEADER_ALLOWANCE + 64,
    )
    soft.expect(
        "LIMIT-RECOVER-1",
        settled is not None and settled.status == RequestState.DONE,
        f"forward-backward after hostile input: {answers[-1]}",
    )
    step, done = gs_raw.run_json("step", gs_job.job_id, {})
    soft.expect(
        "LIMIT-RECOVER-1",
        done is not None and done.status == RequestState.DONE,
        f"step after hostile input: {step}",
    )
    soft.check()


@checks("AUTH-ADMIN-1")
@pytest.mark.parametrize("path", ["state", "faults", "health", "variations"])
def test_admin_api_needs_a_token(gs_target: Target, gs_admin: AdminApi, path: str) -> None:
    """With tokens set, admin calls without a token or with a wrong one answer 401; the
    configured token is accepted."""
    url = gs_target.admin_url(path)
    soft = Soft()
    for label, headers in (
        ("no token", {}),
        ("wrong token", auth_headers("not-a-token")),
    ):
        resp = requests.get(url, headers=headers, timeout=30)
        soft.expect(
            "AUTH-ADMIN-1",
            resp.status_code == 401,
            f"{label}: GET /_fake/{path} answered {resp.status_code}",
        )
    resp = requests.put(
        gs_target.admin_url("faults"),
        json={"rules": [{"route": "step", "status": 500}]},
        timeout=30,
    )
    soft.expect(
        "AUTH-ADMIN-1",
        resp.status_code == 401,
        f"unauthenticated PUT /_fake/faults answered {resp.status_code}",
    )
    ok = requests.get(url, headers=gs_target.admin_headers(), timeout=30)
    soft.expect("AUTH-ADMIN-1", ok.status_code == 200, f"with the admin token: {ok.status_code}")
    soft.check()


@checks("AUTH-ADMIN-2")
@pytest.mark.parametrize("path", ["state", "faults", "health", "variations"])
def test_service_tokens_are_not_admin_tokens(
    gs_target: Target, gs_admin: AdminApi, path: str
) -> None:
    """With service tokens and an admin token set, a service token gets 403 on every admin
    route (it could read, fault or reset other accounts' jobs); the admin token gets 200.
    Only reads are tried: a write that got through would disturb the shared fake."""
    soft = Soft()
    for token in (gs_target.token, gs_target.token2):
        resp = requests.get(gs_target.admin_url(path), headers=gs_target.auth_headers(token), timeout=30)
        soft.expect("AUTH-ADMIN-2", resp.status_code == 403,
                    f"a service token on GET /_fake/{path} answered {resp.status_code}")
    ok = requests.get(gs_target.admin_url(path), headers=gs_target.admin_headers(), timeout=30)
    soft.expect("AUTH-ADMIN-2", ok.status_code == 200, f"the admin token: {ok.status_code}")
    soft.check()


# --- the client under the fake's fault rules ----------------------------------------------


@pytest.fixture
def faulty_fake(gs_variant: Variant) -> Iterator[tuple[Target, AdminApi]]:
    """A fake reserved for the fault rules of this file's client properties."""
    yield from faults_fake(gs_variant, "limits-faults", 77)


def _fb_body() -> dict[str, Any]:
    from conformance.inputs.strategies import tensor

    return {"args": [], "kwargs": {"input_ids": tensor((2, 300), "int64", 5)}, "meta": {}}


@checks("CLIENT-CHUNK-2", "CLIENT-RETRY-1")
@pytest.mark.parametrize(
    "fault",
    [
        {"route": "forward_backward", "chunk": 2, "lose_group": True, "times": 1},
        {"route": "forward_backward", "chunk": "final", "lose_group": True, "times": 1},
        {"route": "forward_backward", "chunk": "final", "lose_answer": True, "times": 1},
        {"route": "forward_backward", "nth": 2, "drop": True, "times": 1},
        {"route": "forward_backward", "every": 2, "status": 503, "times": 3},
        {"route": "get_request", "nth": 1, "drop": True, "times": 1},
    ],
    ids=[
        "lost-group",
        "lost-group-at-final",
        "lost-final-answer",
        "dropped",
        "503-every-2nd",
        "dropped-poll",
    ],
)
def test_client_forward_backward_survives_faults(
    faulty_fake: tuple[Target, AdminApi], gs_opts: GsOptions, fault: dict[str, Any]
) -> None:
    """The client finishes a chunked forward-backward through a lost chunk group (replayed
    whole from chunk 0), a lost final answer (retried, same execution), a dropped
    connection, repeated 503s or a dropped poll, and the frame executes exactly once."""
    target, admin = faulty_fake
    client = ClientDriver(target, None, model=gs_opts.model, max_chunk_bytes=CHUNK_HEADER_ALLOWANCE + 1024)
    try:
        admin.set_faults([fault])
        out = client.call("fwd-bwd", _fb_body())
        rule = admin.faults()[0]
        execs = admin.fb_executions(client.job_id)
    finally:
        admin.clear_faults()
        client.close(cancel=True)
    cid = "CLIENT-CHUNK-2" if fault.get("lose_group") else "CLIENT-RETRY-1"
    expect(cid, rule.get("fired", 0) >= 1, f"the fault never fired: {rule}")
    expect(cid, isinstance(out.get("loss", out.get("avg_loss")), float), f"no loss in {out!r}")
    expect(cid, execs == 1, f"forward-backward executed {execs} times under {fault}")


@checks("CLIENT-ERR-1")
def test_exhausted_budget_is_a_typed_error(
    faulty_fake: tuple[Target, AdminApi], gs_opts: GsOptions
) -> None:
    """When every try fails, the error names the route, the last status, its code and the
    x-snowflake-request-id, and the frame never executed."""
    from client.errors import CortexHTTPError

    target, admin = faulty_fake
    client = ClientDriver(target, None, model=gs_opts.model, retries=2)
    try:
        admin.set_faults([{"route": "forward_backward", "status": 503, "code": ErrorCode.UNAVAILABLE}])
        with pytest.raises(CortexHTTPError) as info:
            client.call("fwd-bwd", _fb_body())
        execs = admin.fb_executions(client.job_id)
    finally:
        admin.clear_faults()
        client.close(cancel=True)
    err = info.value
    soft = Soft()
    soft.expect("CLIENT-ERR-1", err.route == "forward_backward", f"route {err.route!r}")
    soft.expect(
        "CLIENT-ERR-1", err.status == 503 and err.code == ErrorCode.UNAVAILABLE, f"{err.status} {err.code}"
    )
    # The answer's x-snowflake-request-id, which the kit's fake always sends (spec §2.4: a
    # server may not; the any dialect leaves it off some answers).
    named = err.snowflake_request_id is not None or not kit_form("ADDR-REQID-1")
    soft.expect("CLIENT-ERR-1", named, "no x-snowflake-request-id")
    parts = ["forward_backward", "503", ErrorCode.UNAVAILABLE]
    for part in parts + ([str(err.snowflake_request_id)] if err.snowflake_request_id else []):
        soft.expect("CLIENT-ERR-1", part in str(err), f"{part!r} missing from {str(err)!r}")
    soft.expect("CLIENT-ERR-1", execs == 0, f"executed {execs} times although every call failed")
    soft.check()
