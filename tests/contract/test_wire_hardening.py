"""Parser differentials: a header naming a key twice is refused, as safetensors
refuses it, so no two parsers read different frames from the same bytes."""

from __future__ import annotations

import json
import struct

import pytest

from contract import wire


def _frame(header_text: str, data: bytes = b"") -> bytes:
    raw = header_text.encode()
    raw += b" " * (-(8 + len(raw)) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


DSS = json.dumps(json.dumps({"v": "DSSST1", "tree": ["t", "x"]}))
TENSOR = '"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}'


@pytest.mark.parametrize("header", [
    '{"__metadata__":{"dss":' + DSS + '},"__metadata__":{"dss":' + DSS + '},' + TENSOR + '}',
    '{"__metadata__":{"dss":' + DSS + '},' + TENSOR + ',' + TENSOR + '}',
    '{"__metadata__":{"dss":' + DSS + ',"dss":' + DSS + '},' + TENSOR + '}',
    '{"__metadata__":{"dss":' + DSS + '},"x":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}}',
])
def test_duplicate_keys_anywhere_in_a_header_are_refused(header: str) -> None:
    with pytest.raises(wire.WireError, match="duplicate key"):
        wire.loads(_frame(header, b"\x01"))


def test_the_same_header_without_duplicates_decodes() -> None:
    header = '{"__metadata__":{"dss":' + DSS + '},' + TENSOR + '}'
    assert wire.loads(_frame(header, b"\x07")).tolist() == [7]


def test_duplicate_keys_inside_the_dss_json_are_refused() -> None:
    dss = json.dumps('{"v":"DSSST1","v":"DSSST1","tree":["t","x"]}')
    header = '{"__metadata__":{"dss":' + dss + '},' + TENSOR + '}'
    with pytest.raises(wire.WireError, match="duplicate key"):
        wire.loads(_frame(header, b"\x01"))
