"""Golden bytes: frames rebuilt by hand from the written format (module docstring of
contract.wire) must equal what dumps/encode_byte_chunks write, and safetensors agrees."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from typing import Any

import pytest
import safetensors.torch
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from contract import wire


def blob(header_text: str, data: bytes) -> bytes:
    """u64 LE length + header padded with spaces so the data starts 8-aligned + data."""
    raw = header_text.encode("utf-8")
    raw += b" " * (-(8 + len(raw)) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


def test_golden_frame_with_tensors_json_and_metadata() -> None:
    obj = {
        "mask": torch.tensor([True, False]),
        "ids": torch.tensor([[1, 2]], dtype=torch.int64),
        "scale": torch.tensor(0.5),
        "cfg": {"lr": 0.001, "name": "pp\u00f6"},
        "pair": (1, None),
    }
    dss = (
        '{"v":"DSSST1","tree":["d",[["mask",["t","mask"]],["ids",["t","ids"]],'
        '["scale",["t","scale",{"scalar":true}]],["cfg",["j",{"lr":0.001,"name":"pp\u00f6"}]],'
        '["pair",["u",[["j",1],["j",null]]]]]]}'
    )
    op = '{"operation":"forward_backward","n":[1,2]}'
    header = (
        '{"__metadata__":{"dss":'
        + json.dumps(dss, ensure_ascii=False)
        + ',"op":'
        + json.dumps(op)
        + "},"
        '"ids":{"dtype":"I64","shape":[1,2],"data_offsets":[0,16]},'
        '"scale":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},'
        '"mask":{"dtype":"BOOL","shape":[2],"data_offsets":[20,22]}}'
    )
    expected = blob(header, struct.pack("<2qf", 1, 2, 0.5) + b"\x01\x00")
    frame = wire.dumps(obj, {"operation": "forward_backward", "n": [1, 2]})
    assert frame == expected
    back, meta = wire.loads_with_metadata(expected)
    assert meta == {"operation": "forward_backward", "n": [1, 2]}
    assert list(back) == ["mask", "ids", "scale", "cfg", "pair"]
    assert back["ids"].tolist() == [[1, 2]] and back["ids"].dtype == torch.int64
    assert back["scale"].shape == () and back["scale"].item() == 0.5
    assert back["mask"].tolist() == [True, False]
    assert back["cfg"] == {"lr": 0.001, "name": "pp\u00f6"} and back["pair"] == (1, None)


def test_golden_frame_without_tensors() -> None:
    header = (
        '{"__metadata__":{"dss":"{\\"v\\":\\"DSSST1\\",\\"tree\\":[\\"j\\",{\\"a\\":[1,2.5]}]}"},'
        '"__dss_empty__":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    )
    expected = blob(header, b"\x00")
    assert wire.dumps({"a": [1, 2.5]}) == expected
    assert wire.loads(expected) == {"a": [1, 2.5]}


def test_golden_root_tensor() -> None:
    header = (
        '{"__metadata__":{"dss":"{\\"v\\":\\"DSSST1\\",\\"tree\\":[\\"t\\",\\"__root__\\"]}"},'
        '"__root__":{"dtype":"I16","shape":[3],"data_offsets":[0,6]}}'
    )
    expected = blob(header, struct.pack("<3h", -1, 0, 7))
    assert wire.dumps(torch.tensor([-1, 0, 7], dtype=torch.int16)) == expected


def test_golden_request_chunk() -> None:
    frame = b"hello world"
    sha = hashlib.sha256(frame).hexdigest()
    op = (
        '{"request_chunk":{"chunk_idx":0,"total_chunks":1,"frame_sha256":"' + sha + '",'
        '"frame_size_bytes":11,"operation":"forward_backward","chunk_group_id":"g-1"}}'
    )
    header = (
        '{"__metadata__":{"dss":'
        + json.dumps('{"v":"DSSST1","tree":["d",[["payload",["t","payload"]]]]}')
        + ',"op":'
        + json.dumps(op)
        + '},"payload":{"dtype":"U8","shape":[11],"data_offsets":[0,11]}}'
    )
    chunks = wire.encode_byte_chunks(
        frame,
        "request",
        operation="forward_backward",
        max_bytes=0,
        chunk_group_id="g-1",
        force_chunk=True,
    )
    assert chunks == [blob(header, frame)]
    assert wire.decode_byte_chunks(chunks) == frame


def test_golden_result_chunk_of_two() -> None:
    frame = bytes(range(256)) * 40  # 10240 bytes, cut at 9000 - 8192 = 808
    chunks = wire.encode_byte_chunks(frame, "result", max_bytes=9000, force_chunk=True)
    assert len(chunks) == 13
    sha = hashlib.sha256(frame).hexdigest()
    op = (
        '{"result_chunk":{"chunk_idx":12,"total_chunks":13,"frame_sha256":"'
        + sha
        + '","frame_size_bytes":10240}}'
    )
    header = (
        '{"__metadata__":{"dss":'
        + json.dumps('{"v":"DSSST1","tree":["d",[["payload",["t","payload"]]]]}')
        + ',"op":'
        + json.dumps(op)
        + '},"payload":{"dtype":"U8","shape":[544],"data_offsets":[0,544]}}'
    )
    assert chunks[12] == blob(header, frame[12 * 808 :])


DTYPES = [
    torch.int64,
    torch.float64,
    torch.float32,
    torch.int32,
    torch.bfloat16,
    torch.float16,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
]


@settings(max_examples=60, deadline=None)
@given(
    specs=st.dictionaries(
        st.text("abcxyz._", min_size=1, max_size=4).filter(lambda k: "." not in k),
        st.tuples(st.sampled_from(DTYPES), st.lists(st.integers(0, 3), max_size=3)),
        min_size=1,
        max_size=6,
    )
)
def test_frames_equal_safetensors_output(specs: dict[str, tuple[torch.dtype, list[int]]]) -> None:
    """Same tensors + the same single dss entry -> the same bytes as safetensors writes."""
    tensors = {
        k: (torch.arange(math.prod(shape)) % 3 - 1).to(dtype).reshape(shape)
        for k, (dtype, shape) in specs.items()
    }
    frame = wire.dumps(tensors)
    (n,) = struct.unpack_from("<Q", frame)
    dss = json.loads(frame[8 : 8 + n])["__metadata__"]["dss"]
    stored = {k: t.reshape(1) if t.dim() == 0 else t for k, t in tensors.items()}  # 0-d -> [1]
    reference = safetensors.torch.save(stored, metadata={"dss": dss})
    (ref_n,) = struct.unpack_from("<Q", reference)
    if ref_n & 0xFFFF in (0x280, 0x380, 0x480, 0x580):  # our documented extra padding
        assert n == ref_n + 8 and frame[8 + n :] == reference[8 + ref_n :]
        assert frame[8 : 8 + n].rstrip(b" ") == reference[8 : 8 + ref_n].rstrip(b" ")
    else:
        assert frame == reference
    loaded = safetensors.torch.load(frame)
    for k, t in stored.items():
        assert torch.equal(loaded[k], t)
    back = wire.loads(reference)
    assert list(back) == list(tensors)
    for k, t in tensors.items():
        assert torch.equal(back[k], t) and back[k].dtype == t.dtype


def test_frames_written_by_safetensors_decode() -> None:
    """A frame a safetensors-based peer writes (any metadata key order) decodes."""
    tree = ["d", [["kwargs", ["d", [["input_ids", ["t", "kwargs.input_ids"]]]]], ["n", ["j", 3]]]]
    data = safetensors.torch.save(
        {"kwargs.input_ids": torch.arange(8).reshape(2, 4)},
        metadata={
            "op": json.dumps({"response_options": {"format": "dssst1"}}),
            "dss": json.dumps({"v": "DSSST1", "tree": tree}),
        },
    )
    out, meta = wire.loads_with_metadata(data)
    assert out["kwargs"]["input_ids"].tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]] and out["n"] == 3
    assert meta == {"response_options": {"format": "dssst1"}}


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_is_written_with_its_safetensors_code(dtype: torch.dtype) -> None:
    codes = {
        torch.int64: "I64",
        torch.float64: "F64",
        torch.float32: "F32",
        torch.int32: "I32",
        torch.bfloat16: "BF16",
        torch.float16: "F16",
        torch.int16: "I16",
        torch.int8: "I8",
        torch.uint8: "U8",
        torch.bool: "BOOL",
    }
    frame = wire.dumps(torch.ones(2, dtype=dtype))
    (n,) = struct.unpack_from("<Q", frame)
    entry: dict[str, Any] = json.loads(frame[8 : 8 + n])["__root__"]
    assert entry["dtype"] == codes[dtype]
