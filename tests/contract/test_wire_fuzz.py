"""Garbage in: only WireError comes out (``{}`` from read_metadata), fast and bounded."""

from __future__ import annotations

import json
import struct
import tracemalloc
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract import wire
from contract.wire import WireError, WireLimits

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEED_FRAME = wire.dumps(
    {
        "kwargs": {
            "ids": torch.arange(6).reshape(2, 3),
            "mask": torch.ones(2, 3, dtype=torch.bool),
        },
        "s": torch.tensor(0.5, dtype=torch.bfloat16),
        "t": (1, "x", None),
        "j": {"a": [1.5, -2]},
    },
    {"k": "v"},
)


def frame(header: dict[str, Any], data: bytes = b"") -> bytes:
    """A hand-made safetensors blob: no validation on the way in."""
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def dss(tree: Any) -> dict[str, str]:
    return {"dss": json.dumps({"v": "DSSST1", "tree": tree})}


def only_wire_errors(data: Any) -> None:
    """Every entry point refuses garbage the same way (or peeks {}), never crashes."""
    try:
        wire.loads(data)
    except WireError:
        pass
    assert isinstance(wire.read_metadata(data), dict)
    for call in (wire.chunk_descriptor, lambda d: wire.decode_byte_chunks([d])):
        try:
            call(data)
        except WireError:
            pass
    wire.sniff_refused_payload(data)


@SETTINGS
@given(data=st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    only_wire_errors(data)
    only_wire_errors(struct.pack("<Q", len(data)) + data)


@SETTINGS
@given(data=st.data())
def test_mutated_frames(data: st.DataObject) -> None:
    buf = bytearray(SEED_FRAME)
    for _ in range(data.draw(st.integers(1, 4))):
        what = data.draw(st.sampled_from(["flip", "byte", "cut", "insert", "length"]))
        if what == "flip" and buf:
            bit = data.draw(st.integers(0, len(buf) * 8 - 1))
            buf[bit // 8] ^= 1 << (bit % 8)
        elif what == "byte" and buf:
            buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
        elif what == "cut":
            del buf[data.draw(st.integers(0, len(buf))) :]
        elif what == "insert":
            at = data.draw(st.integers(0, len(buf)))
            buf[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        elif len(buf) >= 8:
            buf[:8] = struct.pack("<Q", data.draw(st.integers(0, 2**64 - 1)))
    only_wire_errors(bytes(buf))


ENTRY = {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}


@settings(max_examples=150, deadline=None)
@given(
    key=st.sampled_from(["dtype", "shape", "data_offsets", "extra"]),
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
        lambda k: st.lists(k, max_size=3) | st.dictionaries(st.text(max_size=3), k, max_size=2),
        max_leaves=5,
    ),
    tree=st.sampled_from([["t", "x"], ["t", "x", {"scalar": True}], ["d", [["x", ["t", "x"]]]]]),
)
def test_mutated_header_entries(key: str, value: Any, tree: Any) -> None:
    header = {"__metadata__": dss(tree), "x": {**ENTRY, key: value}}
    try:
        wire.loads(frame(header, b"\x01\x02"))
    except WireError:
        return
    assert key in ("dtype", "shape", "data_offsets")  # only a valid value can pass


@pytest.mark.parametrize(
    ("header", "data", "words"),
    [
        ({"x": ENTRY}, b"ab", "no dss"),
        ({"__metadata__": {"dss": '{"v": "DSSST2", "tree": ["j", 1]}'}}, b"", "version"),
        ({"__metadata__": {"dss": '{"v": "DSSST1"}'}}, b"", "version"),
        ({"__metadata__": {"dss": "[1"}}, b"", "not valid JSON"),
        ({"__metadata__": {"dss": 5}}, b"", "strings to strings"),
        ({"__metadata__": dss(["t", "x"]), "x": {**ENTRY, "dtype": "F8_E4M3"}}, b"ab", "dtype"),
        ({"__metadata__": dss(["t", "x"]), "x": {**ENTRY, "dtype": "C64"}}, b"ab", "dtype"),
        ({"__metadata__": dss(["t", "x"]), "x": {**ENTRY, "shape": [-2]}}, b"ab", "shape"),
        ({"__metadata__": dss(["t", "x"]), "x": {**ENTRY, "shape": [True, 2]}}, b"ab", "shape"),
        ({"__metadata__": dss(["t", "x"]), "x": {**ENTRY, "shape": [3]}}, b"ab", "match shape"),
        ({"__metadata__": dss(["t", "x"]), "x": {**ENTRY, "data_offsets": [0, 3]}}, b"ab", "range"),
        ({"__metadata__": dss(["t", "x"]), "x": {**ENTRY, "data_offsets": [1]}}, b"ab", "begin"),
        ({"__metadata__": dss(["t", "x"]), "x": {**ENTRY, "more": 1}}, b"ab", "exactly"),
        ({"__metadata__": dss(["t", "x"]), "x": ENTRY}, b"abc", "covers 2 of 3"),
        (
            {"__metadata__": dss(["l", [["t", "x"], ["t", "y"]]]), "x": ENTRY, "y": ENTRY},
            b"ab",
            "overlap",
        ),
        (
            {
                "__metadata__": dss(["l", [["t", "x"], ["t", "y"]]]),
                "x": ENTRY,
                "y": {**ENTRY, "data_offsets": [3, 5]},
            },
            b"abcde",
            "gaps",
        ),
        ({"__metadata__": dss(["t", "y"]), "x": ENTRY}, b"ab", "lacks"),
        ({"__metadata__": dss(["l", [["t", "x"], ["t", "x"]]]), "x": ENTRY}, b"ab", "twice"),
        ({"__metadata__": dss(["j", 1]), "x": ENTRY}, b"ab", "never names"),
        ({"__metadata__": dss(["t", "x", {"scalar": True}]), "x": ENTRY}, b"ab", "shape \\[1\\]"),
        ({"__metadata__": dss(["t", "x", {"scalar": 1}]), "x": ENTRY}, b"ab", "scalar"),
        ({"__metadata__": dss(["t", "x", 7]), "x": ENTRY}, b"ab", "scalar"),
        ({"__metadata__": dss(["q", 1])}, b"", "tag 'q'"),
        ({"__metadata__": dss([])}, b"", "non-empty"),
        ({"__metadata__": dss(["d", [["a", ["j", 1]], ["a", ["j", 2]]]])}, b"", "repeats"),
        ({"__metadata__": dss(["d", [[1, ["j", 1]]]])}, b"", "pairs"),
        ({"__metadata__": dss(["l", 5])}, b"", "tag 'l'"),
        ({"__metadata__": {**dss(["j", 1]), "op": "[1]"}}, b"", "op metadata"),
        ({"__metadata__": dss(["t", "x"]), "x": {**ENTRY, "dtype": "BOOL"}}, b"\x01\x02", "bool"),
        ([1, 2], b"", "JSON object"),
    ],
)
def test_refusals_name_the_problem(header: Any, data: bytes, words: str) -> None:
    with pytest.raises(WireError, match=words):
        wire.loads(frame(header, data))


def test_nonstandard_json_and_encodings_are_refused() -> None:
    raw = b'{"__metadata__": {"dss": "{\\"v\\": \\"DSSST1\\", \\"tree\\": [\\"j\\", NaN]}"}}'
    with pytest.raises(WireError, match="NaN"):
        wire.loads(struct.pack("<Q", len(raw)) + raw)
    bad_utf8 = b'{"\xff": 1}'
    with pytest.raises(WireError, match="UTF-8"):
        wire.loads(struct.pack("<Q", len(bad_utf8)) + bad_utf8)
    leading_space = b' {"__metadata__": {}}'
    with pytest.raises(WireError, match="starting with"):
        wire.loads(struct.pack("<Q", len(leading_space)) + leading_space)
    huge_int = (
        b'{"__metadata__": {"dss": "{\\"v\\": \\"DSSST1\\", \\"tree\\": [\\"j\\", '
        + b"9" * 5000
        + b']}"}}'
    )
    with pytest.raises(WireError):
        wire.loads(struct.pack("<Q", len(huge_int)) + huge_int)


def test_huge_header_length_does_not_allocate() -> None:
    for length in (2**60, 2**64 - 1, 64 * 1024 * 1024 + 1, 10**9):
        data = struct.pack("<Q", length) + b'{"__metadata__": {}}'
        tracemalloc.start()
        try:
            for call in (wire.loads, wire.chunk_descriptor):
                with pytest.raises(WireError, match="header length"):
                    call(data)
            assert wire.read_metadata(data) == {}
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 1024 * 1024


def test_huge_chunk_claims_do_not_allocate() -> None:
    desc = {
        "chunk_idx": 0,
        "total_chunks": 2**62,
        "frame_sha256": "0" * 64,
        "frame_size_bytes": 2**62,
        "chunk_group_id": "g",
    }
    chunk = wire.dumps({"payload": torch.zeros(4, dtype=torch.uint8)}, {"request_chunk": desc})
    tracemalloc.start()
    try:
        with pytest.raises(WireError, match=r"missing chunk_idx \[1, 2, 3"):
            wire.decode_byte_chunks([chunk])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024
    desc["total_chunks"] = 1
    with pytest.raises(WireError, match="frame_size_bytes"):
        wire.decode_byte_chunks(
            [wire.dumps({"payload": torch.zeros(4, dtype=torch.uint8)}, {"request_chunk": desc})]
        )


def test_deep_nesting_is_a_wire_error_not_a_recursion_error() -> None:
    deep_tree = '["l",[' * 10_000 + '["j",1]' + "]]" * 10_000
    header = {"__metadata__": {"dss": '{"v":"DSSST1","tree":' + deep_tree + "}"}}
    with pytest.raises(WireError):
        wire.loads(frame(header))
    deep_json = "[" * 10_000 + "]" * 10_000
    for h in (
        {"__metadata__": {"dss": '{"v":"DSSST1","tree":["j",' + deep_json + "]}"}},
        {"__metadata__": {**dss(["j", 1]), "op": deep_json}},
    ):
        with pytest.raises(WireError):
            wire.loads(frame(h))
        assert wire.read_metadata(frame(h)) == {}
    raw = ("[" * 10_000 + "]" * 10_000).encode()
    with pytest.raises(WireError):
        wire.loads(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(WireError):
        wire.loads(frame(header), limits=WireLimits(max_depth=100_000))
    deep: Any = 1
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(WireError):
        wire.dumps(deep)


@pytest.mark.heavy
def test_hundred_thousand_tiny_tensors_within_limits() -> None:
    count = 100_000
    tree = ["l", [["t", str(i)] for i in range(count)]]
    entries = {
        str(i): {"dtype": "I32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
        for i in range(count)
    }
    data = frame({"__metadata__": dss(tree), **entries}, struct.pack(f"<{count}i", *range(count)))
    out = wire.loads(data)
    assert len(out) == count and out[-1].item() == count - 1 and out[7].dtype == torch.int32
    with pytest.raises(WireError, match="100000 tensors, over the 99999 limit"):
        wire.loads(data, limits=WireLimits(max_tensors=99_999))
    zero = {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]}
    over = {"__metadata__": dss(["j", 1]), **{f"t{i}": zero for i in range(count + 1)}}
    with pytest.raises(WireError, match="over the 100000 limit"):
        wire.loads(frame(over))
    assert len(wire.loads(wire.dumps([torch.tensor([i]) for i in range(2000)]))) == 2000


def test_zero_size_tensors_with_absurd_dims_are_refused_or_built() -> None:
    for shape in ([0, 2**62, 2**62], [0] * 64, [0, 2**63 - 1], [1] * 65, [2**63]):
        header = {
            "__metadata__": dss(["t", "x"]),
            "x": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]},
        }
        try:
            out = wire.loads(frame(header))
        except WireError:
            continue
        assert out.numel() == 0


def test_pickle_lookalike_header_length_is_a_frame() -> None:
    """A frame whose header length is 0x0280 starts 0x80 0x02 and must still decode."""
    header = {
        "__metadata__": dss(["j", "p"]),
        "__dss_empty__": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
    }
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (0x280 - len(raw))
    data = struct.pack("<Q", 0x280) + raw + b"\x00"
    assert data[:2] == b"\x80\x02"
    assert wire.sniff_refused_payload(data) is None
    assert wire.loads(data) == "p"
    for n in range(0x200, 0x600, 8):  # and dumps never writes such a length itself
        out = wire.dumps("x" * n)
        assert struct.unpack_from("<Q", out)[0] & 0xFFFF not in (0x280, 0x380, 0x480, 0x580)
        assert wire.sniff_refused_payload(out) is None
