"""Hostile input: a corpus of malformed frames and chunk sequences against a fake subprocess.

Every entry (truncated frames, oversize header lengths, deep trees, 100k tiny tensors,
non-UTF-8 headers, pickle and zip magic, conflicting descriptors, path-traversal ids, caps)
must be answered with a 4xx and an error code, within bounded time, without a 5xx and
without changing the fake's state (its admin dump is identical before and after, apart from
the HTTP request counter; for a sequence, chunks accepted as set-up may stay open until they
expire). The fake's RSS is sampled throughout (bounded memory), and afterwards it still
serves normal traffic. The corpus size and the worst time and memory are printed (use -s).
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import struct
import time
import uuid
import zipfile
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from stress_helpers import Admin, PeakSampler, fake_process, job_body, rest_client, service_prefix

from conformance.judging.frames import RawTensor, build_chunk, build_frame, descriptor, split
from contract import wire
from contract.errors import is_error_envelope

MiB = 1024 * 1024
#: Limits of the corpus fake (small caps so breaching them is cheap).
FAKE_ARGS = ["--max-open-groups", "4", "--max-buffered-mib", "64", "--max-total-gpus", "4096"]
HEADER_CAP = 16 * MiB
ANSWER_WITHIN_S = 15.0
#: Peak RSS the fake may add over idle while refusing the whole corpus.
MEMORY_BOUND = 512 * MiB
OCTET = {"Content-Type": "application/octet-stream"}


@dataclass
class Call:
    route: str  # path after /{job_id}, e.g. "forward-backward"
    body: bytes = b""
    method: str = "POST"
    content_type: str = "application/octet-stream"


@dataclass
class Entry:
    name: str
    calls: list[Call]  # the last one is judged; the ones before it are set-up and must succeed
    codes: tuple[str, ...] = ()  # expected codes (empty: any code)


# --- frame builders --------------------------------------------------------------------------


def ids_tensor() -> RawTensor:
    return RawTensor("kwargs.input_ids", "I64", (1, 4), struct.pack("<4q", 1, 2, 3, 4))


def fb_tree(extra: list | None = None) -> list:
    items = [["args", ["j", []]], ["kwargs", ["d", [["input_ids", ["t", "kwargs.input_ids"]]]]]]
    if extra is not None:
        items.append(["extra", extra])
    return ["d", items]


def good_frame(blob: int = 4096) -> bytes:
    return build_frame(fb_tree(["t", "extra.blob"]),
                       [ids_tensor(), RawTensor("extra.blob", "U8", (blob,), b"\x03" * blob)])


def raw_header(header: Any, data: bytes = b"", *, text: bytes | None = None) -> bytes:
    body = text if text is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(body)) + body + data


def dss(tree: Any, version: str = "DSSST1") -> str:
    return json.dumps({"v": version, "tree": tree})


def one_tensor_header(dtype: str = "U8", shape: list[Any] | None = None, offsets: list[Any] | None = None,
                      tree: Any = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"__metadata__": {"dss": dss(tree if tree is not None else ["t", "x"])},
            "x": {"dtype": dtype, "shape": shape if shape is not None else [1],
                  "data_offsets": offsets if offsets is not None else [0, 1]}, **(extra or {})}


def deep_frame(depth: int) -> bytes:
    key = "extra" + ".0" * depth
    node: list = ["t", key]
    for _ in range(depth):
        node = ["l", [node]]
    return build_frame(fb_tree(node), [ids_tensor(), RawTensor(key, "U8", (1,), b"\x01")])


def many_tensors(n: int) -> bytes:
    node = ["l", [["t", f"extra.{i}"] for i in range(n)]]
    return build_frame(fb_tree(node), [ids_tensor(), *(RawTensor(f"extra.{i}", "U8", (1,), b"\x01") for i in range(n))])


def deep_json(depth: int) -> bytes:
    return build_frame(None, raw_dss='{"v":"DSSST1","tree":["j",' + "[" * depth + "]" * depth + "]}")


def json_bomb(size: int) -> bytes:
    """A header of ``size`` bytes that is mostly ``[[],[],...]`` inside a ``j`` node."""
    n = (size - 64) // 3
    return build_frame(None, raw_dss='{"v":"DSSST1","tree":["j",[' + ",".join(["[]"] * n) + "]]}")


def zipped() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"a": 1}))
    return buf.getvalue()


def torch_saved() -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save({"input_ids": torch.ones(2, 2)}, buf)
    return buf.getvalue()


def chunk(frame: bytes, idx: int, total: int, gid: str, **desc_changes: Any) -> bytes:
    desc = descriptor(frame, idx, total, gid)
    size = -(-len(frame) // total)
    part = frame[idx * size:(idx + 1) * size]
    for k, v in desc_changes.items():
        if v is None:
            desc.pop(k, None)
        else:
            desc[k] = v
    return build_chunk("request", desc, part)


def gid() -> str:
    return str(uuid.uuid4())


# --- the corpus --------------------------------------------------------------------------------


def corpus() -> list[Entry]:
    F = "forward-backward"
    frame = good_frame()
    out: list[Entry] = []

    def plain(name: str, body: bytes, *codes: str, route: str = F) -> None:
        out.append(Entry(name, [Call(route, body)], codes))

    malformed = ("malformed_frame",)
    # Framing.
    plain("empty", b"", *malformed)
    plain("one-byte", b"\x01", *malformed)
    plain("seven-bytes", b"\x01" * 7, *malformed)
    plain("zero-header", b"\x00" * 8, *malformed)
    plain("header-len-max-u64", struct.pack("<Q", 2**64 - 1) + b"{}", *malformed)
    plain("header-len-past-body", struct.pack("<Q", 2**40) + b"{}", *malformed)
    plain("header-len-over-64MiB", struct.pack("<Q", 64 * MiB + 1) + b"{}" + b" " * 64, *malformed)
    plain("header-over-fake-cap", struct.pack("<Q", HEADER_CAP + 8) + b"{" + b" " * (HEADER_CAP + 6) + b"}", *malformed)
    plain("truncated-half", frame[: len(frame) // 2], *malformed)
    plain("truncated-last-byte", frame[:-1], *malformed)
    plain("trailing-garbage", frame + b"\x00" * 8, *malformed)
    # Header JSON.
    plain("header-not-json", raw_header(None, text=b"{not json at all}"), *malformed)
    plain("header-array", raw_header([1, 2, 3]), *malformed)
    plain("header-non-utf8", raw_header(None, text=b'{"\xff\xfe": 1}'), *malformed)
    plain("header-lone-surrogate", raw_header(None, text=b'{"__metadata__": {"dss": "\xed\xa0\x80"}}'), *malformed)
    plain("header-truncated-json", raw_header(None, text=b'{"__metadata__": {"dss": "'), *malformed)
    plain("header-nan", raw_header(None, text=b'{"__metadata__": {"dss": "x"}, "x": NaN}'), *malformed)
    plain("no-metadata", raw_header({"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\x00"), *malformed)
    plain("metadata-not-strings", raw_header({"__metadata__": {"dss": 5}}), *malformed)
    plain("dss-missing", raw_header({"__metadata__": {"op": "{}"}, "x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"\x00"), *malformed)
    plain("dss-not-json", raw_header({"__metadata__": {"dss": "{nope"}}), *malformed)
    plain("dss-version-2", raw_header(one_tensor_header(tree=None) | {"__metadata__": {"dss": dss(["t", "x"], "DSSST2")}}, b"\x00"), *malformed)
    plain("op-not-object", raw_header(one_tensor_header() | {"__metadata__": {"dss": dss(["t", "x"]), "op": "[1]"}}, b"\x00"), *malformed)
    # Tensor entries.
    plain("tree-names-missing-tensor", raw_header(one_tensor_header(tree=["t", "nope"]), b"\x00"), *malformed)
    plain("tensor-not-in-tree", raw_header(one_tensor_header(tree=["j", 1]), b"\x00"), *malformed)
    plain("offsets-overlap", raw_header({"__metadata__": {"dss": dss(["l", [["t", "a"], ["t", "b"]]])},
                                         "a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                                         "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}, b"\x00" * 3), *malformed)
    plain("offsets-past-data", raw_header(one_tensor_header(offsets=[0, 1000], shape=[1000]), b"\x00"), *malformed)
    plain("shape-size-mismatch", raw_header(one_tensor_header(dtype="F32", shape=[1000]), b"\x00"), *malformed)
    plain("dtype-unknown", raw_header(one_tensor_header(dtype="F8_E4M3"), b"\x00"), *malformed)
    plain("dtype-object", raw_header(one_tensor_header(dtype="object"), b"\x00"), *malformed)
    plain("negative-dim", raw_header(one_tensor_header(shape=[-1]), b"\x00"), *malformed)
    plain("65-dims", raw_header(one_tensor_header(shape=[1] * 65), b"\x00"), *malformed)
    plain("dims-overflow", raw_header(one_tensor_header(shape=[2**62, 2**62, 2**62], offsets=[0, 0]), b""), *malformed)
    plain("bool-byte-2", raw_header(one_tensor_header(dtype="BOOL"), b"\x02"), *malformed)
    plain("metadata-tensor-name", raw_header(None, text=b'{"__metadata__": {"dss": "{}"}, "__metadata__": 1}'), *malformed)
    # Limits inside frames.
    plain("deep-tree-200", deep_frame(200), *malformed)
    plain("deep-tree-65", deep_frame(65), *malformed)
    plain("deep-json-100k", deep_json(100_000), *malformed)
    plain("tensors-100k", many_tensors(100_000), *malformed)
    plain("tensors-10001", many_tensors(10_001), *malformed)
    plain("json-bomb-15MiB", json_bomb(15 * MiB), "malformed_frame", "invalid_argument")
    plain("json-bomb-under-header-cap", json_bomb(600_000), "malformed_frame", "invalid_argument")
    # JSON bodies.
    def js(name: str, route: str, body: bytes, *codes: str) -> None:
        out.append(Entry(name, [Call(route, body, content_type="application/json")], codes))

    # Small bodies asking for huge allocations; ids a path cannot carry.
    js("log-probs-top-k-1e6", "log-probs", b'{"prompts": ["a b c"], "top_k": 1000000}', "limit_exceeded")
    js("log-probs-5000-prompts", "log-probs", json.dumps({"prompts": ["a"] * 5000}).encode(), "limit_exceeded")
    for label, cid in (("dot", b"."), ("dotdot", b".."), ("slash", b"a/b"), ("nul", rb"a\u0000b"),
                       ("newline", rb"a\nb"), ("surrogate", rb"\ud800")):  # JSON escapes, sent as is
        js(f"save-id-{label}", "save", b'{"checkpoint_id": "' + cid + b'"}', "invalid_id")
    js("json-body-bomb-30MiB", "step", b"[" + b",".join([b"[]"] * (10 * MiB)) + b"]", "malformed_json")
    js("json-body-deep-100k", "save", b"[" * 100_000 + b"]" * 100_000, "malformed_json")
    js("json-body-non-utf8", "step", b'{"learning_rate": "\xff\xfe"}', "malformed_json")
    js("json-body-nan", "step", b'{"learning_rate": NaN}', "malformed_json")
    js("json-body-huge-number", "step", b'{"learning_rate": 1' + b"0" * 5000 + b"}", "malformed_json", "validation_failed")
    # Legacy payloads.
    for proto in (2, 3, 4, 5):
        plain(f"pickle-{proto}", pickle.dumps({"input_ids": [1, 2]}, protocol=proto), "legacy_payload_refused")
    plain("zip-magic", b"PK\x03\x04" + b"\x00" * 64, "legacy_payload_refused")
    plain("zip-archive", zipped(), "legacy_payload_refused")
    plain("torch-save", torch_saved(), "legacy_payload_refused")
    plain("pickle-generate", pickle.dumps([1]), "legacy_payload_refused", route="generate")
    plain("garbage-forward-no-grad", b"\xde\xad\xbe\xef" * 4, *malformed, route="forward-no-grad")
    plain("garbage-generate-stream", b"\xff\xfe\x00not json", "malformed_json", route="generate-stream")
    # Chunk descriptors.
    g = gid()
    plain("result-chunk-as-request", wire.encode_byte_chunks(frame, "result", max_bytes=8192 + 2048, force_chunk=True)[0], *malformed)
    both = build_frame(["d", [["payload", ["t", "payload"]]]], [RawTensor("payload", "U8", (4,), b"abcd")],
                       op={"request_chunk": descriptor(frame, 0, 2, g), "result_chunk": descriptor(frame, 0, 2, None)})
    plain("both-chunk-kinds", both, *malformed)
    plain("no-group-id", chunk(frame, 0, 2, g, chunk_group_id=None), *malformed)
    plain("empty-group-id", chunk(frame, 0, 2, ""), *malformed)
    plain("group-id-not-string", build_chunk("request", {**descriptor(frame, 0, 2, g), "chunk_group_id": 7}, b"x" * 10), *malformed)
    plain("idx-past-total", chunk(frame, 0, 2, g, chunk_idx=2), *malformed)
    plain("total-zero", chunk(frame, 0, 2, g, total_chunks=0), *malformed)
    plain("idx-negative", chunk(frame, 0, 2, g, chunk_idx=-1), *malformed)
    plain("sha-not-hex", chunk(frame, 0, 2, g, frame_sha256="zz" * 32), *malformed)
    plain("size-1TB-one-chunk", chunk(frame, 0, 1, g, frame_size_bytes=2**40), *malformed)
    plain("chunk-payload-f32", build_frame(["d", [["payload", ["t", "payload"]]]], [RawTensor("payload", "F32", (1,), b"\x00" * 4)],
                                           op={"request_chunk": descriptor(frame, 0, 1, g)}), *malformed)
    plain("chunk-tree-extra-key", build_frame(["d", [["payload", ["t", "payload"]], ["x", ["j", 1]]]],
                                              [RawTensor("payload", "U8", (len(frame),), frame)],
                                              op={"request_chunk": descriptor(frame, 0, 1, g)}), *malformed)
    plain("chunk-sizes-dont-add-up", chunk(frame, 0, 3, g, frame_size_bytes=10 * len(frame)), *malformed)
    plain("group-over-buffer-cap", chunk(frame, 0, 2, g, frame_size_bytes=100 * MiB, total_chunks=2 * 100 * MiB // len(frame)),
          "buffer_limit", "malformed_frame")
    # Chunk sequences (set-up calls first; the last call is judged).
    plain("restart-at-chunk-1", chunk(frame, 1, 3, gid()), "chunk_group_restart_required")
    plain("traversal-group-id", chunk(frame, 1, 3, "../../../etc/passwd"), "chunk_group_restart_required")
    plain("restart-at-final", chunk(frame, 2, 3, gid()), "chunk_group_restart_required")

    def seq(name: str, calls: list[bytes], *codes: str, route: str = F) -> None:
        out.append(Entry(name, [Call(route, c) for c in calls], codes))

    g = gid()
    seq("conflict-sha", [chunk(frame, 0, 3, g), chunk(frame, 1, 3, g, frame_sha256="0" * 64)], "chunk_group_conflict")
    g = gid()
    seq("conflict-total", [chunk(frame, 0, 3, g), chunk(frame, 1, 3, g, total_chunks=4)], "chunk_group_conflict")
    g = gid()
    seq("conflict-payload", [chunk(frame, 0, 3, g), chunk(frame[::-1], 0, 3, g, frame_sha256=hashlib.sha256(frame).hexdigest())],
        "chunk_group_conflict")
    g = gid()
    seq("conflict-operation", [chunk(frame, 0, 3, g), chunk(frame, 1, 3, g, operation="generate")], "chunk_group_conflict")
    g = gid()
    out.append(Entry("conflict-route", [Call(F, chunk(frame, 0, 3, g)), Call("forward-no-grad", chunk(frame, 1, 3, g))],
                     ("chunk_group_conflict",)))
    g = gid()
    seq("missing-chunks", [chunk(frame, 0, 3, g), chunk(frame, 2, 3, g)], "chunk_group_missing_chunks")
    g = gid()
    short = build_chunk("request", descriptor(frame, 1, 3, g), b"x" * 5)
    seq("short-middle-chunk", [chunk(frame, 0, 3, g), short], *malformed)
    g = gid()
    bad_sha = [chunk(frame, i, 3, g, frame_sha256="1" * 64) for i in range(3)]
    seq("reassembled-sha-mismatch", bad_sha, *malformed)
    seq("pickle-in-chunks", split(pickle.dumps(list(range(3000))), 3, gid()), "legacy_payload_refused")
    seq("deep-tree-in-chunks", split(deep_frame(200), 3, gid()), *malformed)
    seq("tensors-100k-in-chunks", split(many_tensors(100_000), 4, gid()), *malformed)
    seq("garbage-in-chunks", split(b"\x07" * 50_000, 3, gid()), *malformed)
    seq("over-open-group-cap", [chunk(frame, 0, 2, gid()) for _ in range(5)], "chunk_group_limit")
    # Parser differentials: a key named twice, which safetensors refuses.
    meta = json.dumps({"dss": dss(fb_tree())})
    ids_entry = '"kwargs.input_ids":{"dtype":"I64","shape":[1,4],"data_offsets":[0,32]}'
    ids = struct.pack("<4q", 1, 2, 3, 4)
    plain("duplicate-metadata-key", raw_header(None, ids, text=(
        '{"__metadata__":' + meta + ',"__metadata__":' + meta + "," + ids_entry + "}").encode()), *malformed)
    plain("duplicate-tensor-key", raw_header(None, ids, text=(
        '{"__metadata__":' + meta + "," + ids_entry + "," + ids_entry + "}").encode()), *malformed)
    # Path-traversal and odd ids on JSON routes.
    for ckpt in ("../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "%2e%2e"):
        out.append(Entry(f"export-traversal-{ckpt}", [Call(f"checkpoints/{ckpt}:export", method="POST", content_type="")],
                         ("checkpoint_not_found", "route_not_found")))
        out.append(Entry(f"delete-traversal-{ckpt}", [Call(f"checkpoints/{ckpt}", method="DELETE", content_type="")],
                         ("checkpoint_not_found", "route_not_found")))
    out.append(Entry("load-traversal", [Call("load", json.dumps({"checkpoint_id": "../../etc/passwd"}).encode(),
                                             content_type="application/json")], ("invalid_id",)))
    out.append(Entry("poll-traversal-request", [Call("requests/..%2F..%2F_fake%2Fstate", method="GET", content_type="")],
                     ("request_not_found", "route_not_found")))
    return out


# --- judging --------------------------------------------------------------------------------


def stable(state: dict[str, Any]) -> dict[str, Any]:
    state = json.loads(json.dumps(state))
    state.pop("http_requests")
    return state


def _groups(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["chunk_group_id"]: g for g in state["chunk_groups"]}


def assert_unchanged(name: str, before: dict[str, Any], prefix: dict[str, Any], after: dict[str, Any]) -> None:
    """Nothing but set-up groups may differ; the refused call added and changed nothing."""
    a, p, b = stable(after), stable(prefix), stable(before)
    for key in ("jobs", "requests", "exports", "internal_errors", "settings"):
        assert a[key] == b[key], f"{name}: refused call changed {key}: {b[key]} -> {a[key]}"
    groups_after, groups_prefix = _groups(a), _groups(p)
    for gid_, group in groups_after.items():
        assert groups_prefix.get(gid_) == group, f"{name}: refused call touched chunk group {group}"


def send(session: requests.Session, base: str, job_id: str, call: Call) -> tuple[requests.Response, float]:
    headers = {"Content-Type": call.content_type} if call.content_type else {}
    url = f"{base}/{job_id}/{call.route}"
    started = time.monotonic()
    r = session.request(call.method, url, data=call.body or None, headers=headers, timeout=60)
    return r, time.monotonic() - started


#: Both tests share the module's corpus (tens of seconds to build): one xdist worker builds it once.
pytestmark = pytest.mark.xdist_group("hostile_corpus")


@pytest.fixture(scope="module")
def entries() -> list[Entry]:
    return corpus()


def test_corpus_is_big_enough(entries: list[Entry]) -> None:
    assert len(entries) >= 50 and len({e.name for e in entries}) == len(entries)


def test_hostile_corpus(entries: list[Entry]) -> None:
    with fake_process(*FAKE_ARGS) as proc:
        admin = Admin(proc.base_url)
        client = rest_client(proc.base_url)
        job_id = client.create_job(job_body(3))["job_id"]
        client.wait_running(job_id)
        warm = client.forward_backward(job_id, {"args": [], "kwargs": {"input_ids": [[1, 2, 3]]}})
        client.wait(job_id, warm["request_id"])  # torch imported, code paths warm
        base = service_prefix(proc.base_url)
        session = requests.Session()
        idle = proc.rss()
        slowest: tuple[float, str] = (0.0, "")
        failures: list[str] = []
        with PeakSampler(proc.pid, every_s=0.002) as peak:
            for entry in entries:
                # A sequence gets a job of its own (caps are per job; its set-up groups stay
                # open); single calls all go to the main job.
                target = job_id
                if len(entry.calls) > 1:
                    target = client.create_job(job_body(4))["job_id"]
                    client.wait_running(target)
                before = admin.state()
                for call in entry.calls[:-1]:
                    r, _ = send(session, base, target, call)
                    assert r.status_code in (200, 202), f"{entry.name}: set-up call answered {r.status_code} {r.text[:200]}"
                prefix = admin.state()
                r, took = send(session, base, target, entry.calls[-1])
                slowest = max(slowest, (took, entry.name))
                try:
                    body = r.json()
                except ValueError:
                    body = None
                problems = []
                if not 400 <= r.status_code < 500:
                    problems.append(f"status {r.status_code}")
                if not is_error_envelope(body):
                    problems.append(f"no error envelope: {r.text[:200]!r}")
                elif entry.codes and body["code"] not in entry.codes:
                    problems.append(f"code {body['code']!r}, want one of {entry.codes}")
                if took > ANSWER_WITHIN_S:
                    problems.append(f"took {took:.1f}s")
                if problems:
                    failures.append(f"{entry.name}: {'; '.join(problems)}")
                assert_unchanged(entry.name, before, prefix, admin.state())
                if target != job_id:
                    client.cancel_job(target)
        assert not failures, "\n".join(failures)
        final = admin.state()
        assert final["open_chunk_groups"] == 0 and final["buffered_bytes"] == 0
        assert final["internal_errors"] == 0
        # Still serving: a chunked forward-backward and a step on the same job.
        answer = client.forward_backward(job_id, {"args": [], "kwargs": {"input_ids": [[5, 6, 7, 8]]}},
                                         max_chunk_bytes=8192 + 512)
        assert client.wait(job_id, answer["request_id"])["job_id"] == job_id
        assert client.wait(job_id, client.step(job_id)["request_id"])["global_steps"] == 1
        grown = peak.peak - idle
    print(f"\nhostile corpus: {len(entries)} entries ({sum(len(e.calls) for e in entries)} calls), all 4xx with a code; "
          f"slowest {slowest[1]} {slowest[0] * 1000:.0f} ms; fake RSS idle {idle / MiB:.0f} MiB, "
          f"peak +{grown / MiB:.0f} MiB")
    assert grown < MEMORY_BOUND, f"refusing the corpus took {grown / MiB:.0f} MiB over idle"

