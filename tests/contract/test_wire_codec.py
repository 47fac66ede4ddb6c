"""DSSST1 codec: exact round trips of any object shape, and each documented decision."""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract import wire
from contract.wire import WireError, WireLimits, torch_io

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def header_of(frame: bytes) -> dict[str, Any]:
    (n,) = struct.unpack_from("<Q", frame)
    return json.loads(frame[8 : 8 + n])


def tree_of(frame: bytes) -> Any:
    return json.loads(header_of(frame)["__metadata__"]["dss"])["tree"]


def raw_bytes(t: torch.Tensor) -> bytes:
    flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.detach().reshape(-1))
    return flat.view(torch.uint8).numpy().tobytes()


def assert_same(a: Any, b: Any) -> None:
    """Exact equality: types (tuple vs list), key order, dtypes, shapes, bits."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        assert b.dtype == a.dtype and b.shape == a.shape
        assert raw_bytes(b) == raw_bytes(a)
        return
    assert type(b) is type(a), (a, b)
    if isinstance(a, dict):
        assert list(b) == list(a)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(b) == len(a)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    elif isinstance(a, float):
        assert a == b and math.copysign(1, a) == math.copysign(1, b)
    else:
        assert a == b


@st.composite
def tensors(draw: st.DrawFn) -> torch.Tensor:
    """Any supported dtype and shape (0-d, zero-size), plain or a non-contiguous view."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(0, 3), max_size=3))
    kind = draw(st.sampled_from(["plain", "strided", "transposed", "expanded", "grad"]))
    base_shape = [d * 2 for d in shape] if kind == "strided" and shape else shape
    numel = math.prod(base_shape)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if dtype is torch.bool:
        data = bytes(draw(st.lists(st.integers(0, 1), min_size=numel, max_size=numel)))
    else:
        data = draw(st.binary(min_size=numel * itemsize, max_size=numel * itemsize))
    t = torch.frombuffer(bytearray(data), dtype=dtype) if numel else torch.empty(0, dtype=dtype)
    t = t.reshape(base_shape)
    if kind == "strided" and shape:
        t = t[tuple(slice(None, None, 2) for _ in shape)]
    elif kind == "transposed" and t.dim() >= 2:
        t = t.transpose(0, 1)
    elif kind == "expanded":
        t = t.reshape([1, *base_shape]).expand([2, *base_shape])
    elif kind == "grad" and dtype.is_floating_point and numel:
        t = t.clone().requires_grad_(True) * 1
    return t


#: Characters a frame can carry: UTF-8 encodable (lone surrogates are refused, tested apart).
UTF8 = st.characters(codec="utf-8")
JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(UTF8, max_size=8)
)
KEYS = st.text(st.characters(codec="utf-8", blacklist_characters="."), max_size=6)


def shared_group(t: torch.Tensor) -> Any:
    """A tensor next to views sharing its storage (written as separate copies)."""
    flat = t.reshape(-1)
    return [t, flat[1:], flat[: max(0, flat.numel() - 1)]]


VALUES = st.recursive(
    JSON_LEAVES | tensors() | tensors().map(shared_group),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.lists(kids, max_size=3).map(tuple)
        | st.dictionaries(KEYS, kids, max_size=4)
    ),
    max_leaves=12,
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(UTF8, max_size=6), kids, max_size=4)
    ),
    max_leaves=10,
)


@SETTINGS
@given(
    obj=VALUES, metadata=st.none() | st.dictionaries(st.text(UTF8, max_size=6), JSON_VALUES, max_size=3)
)
def test_round_trip_is_exact(obj: Any, metadata: dict[str, Any] | None) -> None:
    frame = wire.dumps(obj, metadata)
    back, meta = wire.loads_with_metadata(frame)
    assert_same(obj, back)
    assert meta == (metadata or {})
    assert wire.read_metadata(frame) == (metadata or {})
    assert wire.dumps(obj, metadata) == frame  # deterministic
    assert len(frame) % 8 == 0 or header_of(frame)  # data starts 8-aligned after the header


@SETTINGS
@given(t=tensors())
def test_decoded_tensors_are_writable_copies(t: torch.Tensor) -> None:
    buf = bytearray(wire.dumps({"x": t, "y": t}))
    snapshot = bytes(buf)
    out = wire.loads(buf)
    for v in out.values():
        assert v.is_contiguous()
        if v.numel():
            v.reshape(-1).view(torch.uint8)[0] ^= 1  # writable, must not touch the input
    assert bytes(buf) == snapshot
    if t.numel():
        assert out["x"].untyped_storage().data_ptr() != out["y"].untyped_storage().data_ptr()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.bfloat16, torch.int64])
def test_large_tensors_round_trip_into_their_own_memory(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Large tensors take the page-offset-aware copy path; same guarantees."""
    monkeypatch.setattr(torch_io, "_LARGE_COPY", 1 << 18)
    t = (torch.arange(600_000) % 5).to(dtype).reshape(1000, 600)
    buf = bytearray(wire.dumps({"t": t, "u": t[:, :7]}))
    out = wire.loads(buf)
    assert torch.equal(out["t"], t) and out["t"].dtype == dtype
    assert torch.equal(out["u"], t[:, :7])
    before = bytes(buf)
    out["t"].view(torch.uint8 if dtype == torch.bool else dtype)[0, 0] = 1
    assert bytes(buf) == before
    storage = out["t"].untyped_storage()
    assert storage.nbytes() == t.numel() * t.element_size() + 4096  # the large-copy path ran
    assert not (storage.data_ptr() <= out["u"].data_ptr() < storage.data_ptr() + storage.nbytes())
    size = 2_000_000
    header = json.dumps(
        {
            "__metadata__": {"dss": '{"v":"DSSST1","tree":["t","x"]}'},
            "x": {"dtype": "BOOL", "shape": [size], "data_offsets": [0, size]},
        }
    ).encode()
    bad = struct.pack("<Q", len(header)) + header + b"\x01" * (size - 1) + b"\x02"
    with pytest.raises(WireError, match="bool tensor"):
        wire.loads(bad)


def test_tree_tags_follow_the_format() -> None:
    frame = wire.dumps(
        {"a": [1, {"b": 2}], "t": (1, 2), "l": [1, (2,)], "x": torch.tensor(1.5), "n": None}
    )
    assert tree_of(frame) == [
        "d",
        [
            ["a", ["j", [1, {"b": 2}]]],
            ["t", ["u", [["j", 1], ["j", 2]]]],
            ["l", ["l", [["j", 1], ["u", [["j", 2]]]]]],
            ["x", ["t", "x", {"scalar": True}]],
            ["n", ["j", None]],
        ],
    ]
    assert header_of(frame)["x"]["shape"] == [1]


def test_tensor_keys_are_paths_and_root_is_named() -> None:
    obj = {
        "kwargs": {"input_ids": torch.zeros(2, dtype=torch.int64)},
        "args": [0, [1, torch.ones(1)]],
    }
    names = set(header_of(wire.dumps(obj))) - {"__metadata__"}
    assert names == {"kwargs.input_ids", "args.1.1"}
    assert set(header_of(wire.dumps(torch.ones(2)))) == {"__metadata__", "__root__"}
    assert tree_of(wire.dumps(torch.ones(2))) == ["t", "__root__"]


def test_frame_without_tensors_carries_the_empty_marker() -> None:
    frame = wire.dumps({"a": 1})
    header = header_of(frame)
    assert header["__dss_empty__"] == {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}
    assert wire.loads(frame) == {"a": 1}
    assert "torch" in sys.modules  # (tests import torch; the lazy import is checked below)
    # a real tensor that happens to use the marker's name survives
    back = wire.loads(wire.dumps({"__dss_empty__": torch.arange(3)}))
    assert back["__dss_empty__"].tolist() == [0, 1, 2]


def test_storage_sharing_tensors_come_back_independent() -> None:
    base = torch.arange(6, dtype=torch.float32)
    out = wire.loads(wire.dumps({"a": base, "b": base[2:], "c": base.view(2, 3).t()}))
    assert out["b"].tolist() == [2, 3, 4, 5]
    assert out["c"].tolist() == [[0, 3], [1, 4], [2, 5]]
    out["a"][2] = 100
    assert out["b"][0] == 2


def test_metadata_is_stored_as_op_json_and_omitted_when_empty() -> None:
    meta = wire.standard_request_metadata()
    assert meta == {"response_options": {"format": "dssst1", "delivery": "chunked"}}
    assert wire.standard_request_metadata() is not meta
    frame = wire.dumps({"x": 1}, meta)
    assert json.loads(header_of(frame)["__metadata__"]["op"]) == meta
    assert "op" not in header_of(wire.dumps({"x": 1}, {}))["__metadata__"]
    assert "op" not in header_of(wire.dumps({"x": 1}))["__metadata__"]
    assert wire.loads_with_metadata(wire.dumps({"x": 1}))[1] == {}


@pytest.mark.parametrize(
    ("obj", "words"),
    [
        ({1: "a"}, "keys must be str"),
        ({"a": {2: torch.ones(1)}}, "keys must be str"),
        ([float("nan")], "non-finite"),
        ({"a": float("inf")}, "non-finite"),
        ({"a": {1, 2}}, "cannot encode a set"),
        (b"bytes", "cannot encode a bytes"),
        (torch.ones(2, dtype=torch.complex64), "unsupported dtype"),
        (torch.ones(2, dtype=torch.uint16), "unsupported dtype"),
        (torch.ones(2).to_sparse(), "layout"),
        ({"kwargs": {"mask": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)}},
         "'kwargs.mask' has layout torch.jagged; only dense tensors go on the wire: .*to_padded_tensor"),
        ({"a.b": torch.ones(1), "a": {"b": torch.ones(1)}}, "same key 'a.b'"),
        ({"__metadata__": torch.ones(1)}, "reserved key"),
    ],
)
def test_dumps_refuses_with_a_named_problem(obj: Any, words: str) -> None:
    with pytest.raises(WireError, match=words):
        wire.dumps(obj)


def test_dumps_refuses_bad_metadata() -> None:
    for bad in ({"a": float("nan")}, {"a": (1, 2)}, {1: 2}, {"t": torch.ones(1)}, ["x"]):
        with pytest.raises(WireError):
            wire.dumps({}, bad)  # type: ignore[arg-type]


def test_depth_limit_is_shared_by_dumps_and_loads() -> None:
    ok: Any = torch.ones(1)
    for _ in range(64):
        ok = [ok]
    back = wire.loads(wire.dumps(ok))
    for _ in range(64):
        back = back[0]
    assert back.tolist() == [1.0]
    with pytest.raises(WireError, match="deeper than 64"):
        wire.dumps([ok])
    with pytest.raises(WireError, match="deeper"):
        wire.loads(wire.dumps(ok), limits=WireLimits(max_depth=10))
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(WireError):
        wire.dumps(cyclic)


def test_subclasses_decode_as_base_types() -> None:
    from collections import OrderedDict
    from enum import IntEnum

    class Level(IntEnum):
        HIGH = 2

    out = wire.loads(wire.dumps(OrderedDict(a=Level.HIGH, b=[torch.ones(1)])))
    assert type(out) is dict and type(out["a"]) is int and out["a"] == 2


def test_legacy_payloads_are_refused_by_name() -> None:
    pickle_like = b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94."
    zip_like = b"PK\x03\x04" + b"\x00" * 40
    assert wire.sniff_refused_payload(pickle_like) == "pickle"
    assert wire.sniff_refused_payload(b"\x80\x02}q\x00.") == "pickle"
    assert wire.sniff_refused_payload(zip_like) == "zip (torch.save)"
    assert wire.sniff_refused_payload(wire.dumps({})) is None
    assert wire.sniff_refused_payload("text") is None
    for data in (pickle_like, zip_like):
        with pytest.raises(WireError, match="legacy pickle/torch.save payloads are refused"):
            wire.loads(data)


def test_inline_frames() -> None:
    frame = wire.dumps({"x": torch.arange(3)})
    inline = wire.inline_frame(frame)
    assert inline == {
        "content_type": "application/octet-stream",
        "encoding": "base64",
        "wire_format": "DSSST1",
        "payload_b64": inline["payload_b64"],
    }
    assert wire.is_inline_frame(inline) and wire.decode_inline(inline) == frame
    assert not wire.is_inline_frame({"payload_b64": "AA=="})
    assert not wire.is_inline_frame([inline])
    for key, value in (("encoding", "hex"), ("wire_format", "DSSST2"), ("payload_b64", 3)):
        bad = {**inline, key: value}
        assert not wire.is_inline_frame(bad)
        with pytest.raises(WireError, match=key):
            wire.decode_inline(bad)
    with pytest.raises(WireError, match="base64"):
        wire.decode_inline({**inline, "payload_b64": "not base64!"})
    with pytest.raises(WireError):
        wire.decode_inline("x")  # type: ignore[arg-type]


def test_loads_accepts_bytes_like_inputs_only() -> None:
    frame = wire.dumps({"a": torch.arange(4)})
    for data in (frame, bytearray(frame), memoryview(frame)):
        assert wire.loads(data)["a"].tolist() == [0, 1, 2, 3]
    for bad in ("text", 3, None, [frame]):
        with pytest.raises(WireError, match="must be bytes"):
            wire.loads(bad)  # type: ignore[arg-type]


def test_limits_are_enforced() -> None:
    frame = wire.dumps({"a": [torch.ones(1), torch.ones(1)], "j": "x" * 100})
    with pytest.raises(WireError, match="limit"):
        wire.loads(frame, limits=WireLimits(max_frame_bytes=len(frame) - 1))
    with pytest.raises(WireError, match="limit"):
        wire.loads(frame, limits=WireLimits(max_tensors=1))
    with pytest.raises(WireError, match="JSON limit"):
        wire.loads(frame, limits=WireLimits(max_json_bytes=50))
    with pytest.raises(WireError, match="cap"):
        wire.loads(frame, limits=WireLimits(max_header_bytes=64))
    assert wire.loads(frame, limits=WireLimits(max_frame_bytes=len(frame), max_tensors=2))


def test_import_does_not_load_torch() -> None:
    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys; import contract.wire as w; assert 'torch' not in sys.modules; "
        "f = w.dumps({'a': (1, [2])}, {'m': 1}); assert w.loads(f) == {'a': (1, [2])}; "
        "c = w.encode_byte_chunks(f, 'request', max_bytes=0, force_chunk=True); "
        "assert w.decode_byte_chunks(c) == f; assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


@pytest.mark.parametrize("obj", [{"a": "\ud800"}, {"\udfff": 1}, ["ok", ("\ud83d",)]])
def test_lone_surrogates_are_refused_on_dumps(obj: Any) -> None:
    with pytest.raises(WireError, match="UTF-8"):
        wire.dumps(obj)
