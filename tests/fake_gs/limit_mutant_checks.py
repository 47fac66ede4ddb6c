"""Liveness checks for the limits/faults mutants, merged into test_fake_mutants.CHECKS.

Each takes an Api on a fake running that mutant (with the extra settings next to it) and
asserts the violation shows, with the smallest observation of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from fake_gs_api import OCTET, Api, batch

from contract import wire


def _chunks(obj: Any, max_bytes: int = 16_384) -> list[bytes]:
    return wire.encode_byte_chunks(wire.dumps(obj), "request", max_bytes=max_bytes,
                                   chunk_group_id=str(uuid.uuid4()), force_chunk=True)


def _first_chunk(api: Api, job: str) -> Any:
    return api.post(f"/{job}/forward-backward", data=_chunks(batch(2, 600))[0], headers=OCTET)


def groups_uncapped(api: Api) -> None:
    job = api.running_job()
    assert all(_first_chunk(api, job).status_code == 202 for _ in range(3))


def retry_after_missing(api: Api) -> None:
    job = api.running_job()
    assert _first_chunk(api, job).status_code == 202
    r = _first_chunk(api, job)
    assert r.status_code == 429 and "retry-after" not in r.headers


def traversal_accepted(api: Api) -> None:
    job = api.running_job()
    # Ids with "/" are refused at save (CKPT-ID-1); a backslash traversal is still an id.
    api.result(job, api.submit_json(job, "save", {"checkpoint_id": "..\\..\\etc\\passwd"}))
    r = api.post(f"/{job}/checkpoints/..%5C..%5Cetc%5Cpasswd:export")
    assert r.status_code == 200 and r.json()["files"][0]["filename"].startswith("..\\")


def admin_open(api: Api) -> None:
    assert api.get("/_fake/state").status_code == 200  # no token, tokens configured


def group_never_expires(api: Api) -> None:
    job = api.running_job()
    chunks = _chunks(batch(2, 600))
    assert api.post(f"/{job}/forward-backward", data=chunks[0], headers=OCTET).status_code == 202
    assert api.post(f"/{job}/forward-backward", data=chunks[1], headers=OCTET).status_code == 202


def _deep_frame(depth: int) -> bytes:
    """A valid forward-backward frame carrying one tensor nested ``depth`` lists deep."""
    import struct

    from conformance.judging.frames import RawTensor, build_frame

    key = "deep" + ".0" * depth
    node: list[Any] = ["t", key]
    for _ in range(depth):
        node = ["l", [node]]
    tree = ["d", [["args", ["j", []]],
                  ["kwargs", ["d", [["input_ids", ["t", "kwargs.input_ids"]]]]],
                  ["deep", node]]]
    ids = RawTensor("kwargs.input_ids", "I64", (1, 4), struct.pack("<4q", 1, 2, 3, 4))
    return build_frame(tree, [ids, RawTensor(key, "U8", (1,), b"\x01")])


def deep_tree_500(api: Api) -> None:
    job = api.running_job()
    assert api.post(f"/{job}/generate", data=_deep_frame(80), headers=OCTET).status_code == 500


def chunked_limits_skipped(api: Api) -> None:
    job = api.running_job()
    chunks = wire.encode_byte_chunks(_deep_frame(80), "request", max_bytes=16_384, force_chunk=True)
    for chunk in chunks:
        r = api.post(f"/{job}/forward-backward", data=chunk, headers=OCTET)
    assert r.status_code == 200, r.text


def group_bytes_kept(api: Api) -> None:
    job = api.running_job()
    api.result(job, api.submit_frame(job, "forward-backward", batch(2, 600), max_bytes=16_384))
    assert api.state()["buffered_bytes"] > 0


def refusal_wedges_job(api: Api) -> None:
    job = api.running_job()
    assert api.post(f"/{job}/forward-backward", data=b"garbage!", headers=OCTET).status_code == 400
    assert api.post(f"/{job}/step", json={}).status_code == 503


LIMIT_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "groups-uncapped": (groups_uncapped, {"max_open_groups_per_job": 1}),
    "retry-after-missing": (retry_after_missing, {"max_open_groups_per_job": 1}),
    "traversal-accepted": (traversal_accepted, {}),
    "admin-open": (admin_open, {"tokens": ("secret",)}),
    "group-never-expires": (group_never_expires, {"chunk_group_idle_s": 0.0}),
    "deep-tree-500": (deep_tree_500, {}),
    "chunked-limits-skipped": (chunked_limits_skipped, {}),
    "group-bytes-kept": (group_bytes_kept, {}),
    "refusal-wedges-job": (refusal_wedges_job, {}),
}
