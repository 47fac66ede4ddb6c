"""Hardening: one account cannot block another, the admin API is the admin's,
bodies and results are bounded, input over a decided bound is refused with the limit named.

Most of these are decided rules of the fake (a shared fake must stay fair and bounded);
they run on embedded-fake variants and skip against a real URL, which may bound otherwise.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest

from conformance.drivers.raw import RawDriver
from conformance.drivers.rawhttp import read_answer, request_head
from conformance.inputs import valid_bodies
from conformance.judging import frames
from conformance.judging.checks import refused
from conformance.judging.variants import forward_body, forward_request, variant_job
from conformance.properties.data.test_limits import _open_group
from conformance.reporting.violations import Soft, expect
from conformance.runtime import RUNTIME
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.models.catalog import TRAINING_MODELS
from contract.routes import route

KiB = 1024


def _job_of(driver: RawDriver) -> str:
    body = valid_bodies.job(valid_bodies.training(TRAINING_MODELS[0]), valid_bodies.sampling(TRAINING_MODELS[0]))
    job_id = driver.create_job(body).field("job_id")
    driver.wait_job(job_id, timeout_s=30)
    return str(job_id)


@checks("LIMIT-ACCOUNT-1")
def test_one_account_at_its_caps_does_not_block_another(gs_variant: Any) -> None:
    """Account A fills its own share of the chunk buffer; account B's upload still goes in."""
    target = gs_variant("account-caps", max_buffered_bytes_per_account=256 * KiB,
                        max_buffered_bytes_total=384 * KiB)
    driver_a, ops_a = variant_job(target)
    driver_b = RawDriver(target, token=target.token2)
    job_b = _job_of(driver_b)
    opened_a: list[bytes] = []
    opened_b: list[bytes] = []
    soft = Soft()
    try:
        refusal = None
        for _ in range(6):
            ans = _open_group(driver_a, ops_a.job_id, size=100 * KiB, opened=opened_a)
            if not ans.ok:
                refusal = ans
                break
        expect("LIMIT-ACCOUNT-1", refusal is not None, "account A was never capped")
        assert refusal is not None
        refused(refusal, soft, "LIMIT-ACCOUNT-1", statuses=[413, 429])
        mine = _open_group(driver_b, job_b, size=100 * KiB, opened=opened_b)
        soft.expect("LIMIT-ACCOUNT-1", mine.ok,
                    f"account B's chunk 0 was refused while only account A is at its caps: {mine}")
    finally:
        for chunk in opened_a:
            driver_a.finish_group("forward_backward", ops_a.job_id, [chunk])
        for chunk in opened_b:
            driver_b.finish_group("forward_backward", job_b, [chunk])
        driver_b.close()
    soft.check()


# --- raw sockets: a body that arrives late, or never ------------------------------------------


def _open_body(target: Any, path: str, length: int, ctype: str = "application/json") -> socket.socket:
    """A connection that has sent a call's headers (and auth) but none of its body."""
    parts = urlsplit(target.base_url)
    if parts.scheme != "http":
        pytest.skip("raw-socket properties speak plain HTTP only (the embedded fake)")
    sock = socket.create_connection((parts.hostname, parts.port or 80), timeout=30)
    sock.sendall(request_head(parts.netloc, target.prefix + path, length, ctype, target.auth_headers()))
    return sock


@checks("LIMIT-IDLE-1")
def test_a_stalled_body_is_answered_and_freed(gs_variant: Any) -> None:
    """Headers declaring 1 MiB, then one byte and silence: a 408 (or a close) within the
    server's idle time plus margin, not a connection held forever."""
    target = gs_variant("body-idle", body_idle_s=0.5)
    _, ops = variant_job(target)
    sock = _open_body(target, route("step").render(job_id=ops.job_id), 1024 * 1024)
    sock.sendall(b"{")
    started = time.monotonic()
    status, _ = read_answer(sock, 30.0)
    took = time.monotonic() - started
    sock.close()
    soft = Soft()
    soft.expect("LIMIT-IDLE-1", status in (0, 408), f"a stalled body was answered {status}")
    soft.expect("LIMIT-IDLE-1", took < 15.0, f"the stalled body was held {took:.1f}s")
    soft.check()


@checks("LIMIT-LATE-1")
def test_a_body_arriving_after_the_job_ended_leaves_nothing(gs_variant: Any) -> None:
    """A step whose headers reached the server before a cancel and whose body after it:
    409, and the job's request count does not move."""
    from conformance.fake_admin import admin_of

    target = gs_variant("late-body")
    driver, ops = variant_job(target)
    admin = admin_of(target)
    before = admin.job_state(ops.job_id).get("requests")
    sock = _open_body(target, route("step").render(job_id=ops.job_id), 2)
    time.sleep(0.3)  # the handler has checked the job and waits for the body
    driver.call("cancel_job", job_id=ops.job_id)
    sock.sendall(b"{}")
    status, body = read_answer(sock, 30.0)
    sock.close()
    soft = Soft()
    # 409 (the kit's), or 412 where the target may refuse a job not running so (row
    # precondition-status of contract.forms, spec §3.6).
    wanted = {409, 412} if "precondition-status" in RUNTIME.forms else {409}
    soft.expect("LIMIT-LATE-1", status in wanted, f"a step whose body came after the cancel: {status} {body[:200]!r}")
    after = admin.job_state(ops.job_id).get("requests")
    soft.expect("LIMIT-LATE-1", after == before, f"the ended job's requests went {before} -> {after}")
    soft.check()


# --- results, frames, ids, bounds ------------------------------------------------------------


@checks("POLL-EXPIRE-1")
def test_a_freed_result_answers_410(gs_variant: Any) -> None:
    """With no grace and one read result kept, a result read to the end is freed once a
    newer one is read: its poll answers 410 result_expired."""
    target = gs_variant("results-freed", result_grace_s=0.0, results_read_kept=1)
    driver, ops = variant_job(target)
    first = forward_request(ops, forward_body(2, 8))
    forward_request(ops, forward_body(2, 8))
    again = driver.poll(ops.job_id, first.request_id)
    soft = Soft()
    refused(again, soft, "POLL-EXPIRE-1", codes=[ErrorCode.RESULT_EXPIRED], statuses=[410])
    soft.check()


@checks("WIRE-DUPKEY-1")
def test_a_header_naming_a_key_twice_is_refused(gs_raw: Any, gs_job: Any) -> None:
    """The same frame with its input_ids entry written twice: 400, never executed."""
    ids = struct.pack("<4q", 1, 2, 3, 4)
    good = frames.build_frame(["d", [["args", ["j", []]], ["kwargs", ["d", [["input_ids", ["t", "x"]]]]]]],
                              [frames.RawTensor("x", "I64", (1, 4), ids)])
    (n,) = struct.unpack_from("<Q", good, 0)
    header = good[8 : 8 + n].rstrip(b" ")
    entry = b'"x":{"dtype":"I64","shape":[1,4],"data_offsets":[0,32]}'
    assert entry in header
    doubled = header[:-1] + b"," + entry + b"}"
    doubled += b" " * (-(8 + len(doubled)) % 8)
    frame = struct.pack("<Q", len(doubled)) + doubled + ids
    chunk = frames.build_chunk("request", frames.descriptor(frame, 0, 1, str(uuid.uuid4())), frame)
    ans = gs_raw.call("forward_backward", data=chunk, job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "WIRE-DUPKEY-1", statuses=[400])
    soft.check()


@checks("CKPT-ID-1")
@pytest.mark.parametrize("cid", ["..", "a/b", "a\nb"])
def test_ids_a_path_cannot_carry_are_refused_at_save(gs_variant: Any, cid: str) -> None:
    driver, ops = variant_job(gs_variant("ids"))
    ans = driver.call("save", json_body={"checkpoint_id": cid}, job_id=ops.job_id)
    soft = Soft()
    refused(ans, soft, "CKPT-ID-1", statuses=[400])
    soft.check()


@checks("LIMIT-BOUNDS-1")
def test_top_k_over_the_bound_is_refused_naming_it(gs_variant: Any) -> None:
    """A 60-byte log-probs body asking for a million top-k entries: 400 naming the limit."""
    driver, ops = variant_job(gs_variant("bounds"))
    started = time.monotonic()
    ans = driver.call("log_probs", json_body={"prompts": ["a"], "top_k": 1_000_000}, job_id=ops.job_id)
    took = time.monotonic() - started
    soft = Soft()
    refused(ans, soft, "LIMIT-BOUNDS-1", statuses=[400])
    message = str(ans.body.get("message", "")) if isinstance(ans.body, dict) else ""
    soft.expect("LIMIT-BOUNDS-1", "top_k" in message, f"the refusal does not name top_k: {message!r}")
    soft.expect("LIMIT-BOUNDS-1", took < 15.0, f"took {took:.1f}s to refuse")
    soft.check()
