"""DSSST1: the tensor wire format of the Cortex Training API (spec §9).

The public face of the codec; each concern lives in its own module:

* ``limits``: the numbers (header caps, decoder limits, the chunk header allowance);
* ``frame``: the byte layout of one frame (safetensors framing), written and read;
* ``tree``: Python objects <-> the DSSST1 tree (``dumps``/``loads``);
* ``torch_io``: tensor bytes in and out, the only part that imports torch (lazily, so
  ``import contract.wire`` stays light and frames without tensors never load it);
* ``chunks``: one frame cut into chunk frames (joined, or planned as pieces to send as
  they are) and reassembled, and a chunk's header read before its payload arrives;
* ``delivery``: result-chunk poll events and inline results around frames.

Import from ``contract.wire``; the module split is not part of the interface.
"""

from __future__ import annotations

from contract.wire.basics import WireError
from contract.wire.chunks import (
    MIN_RESULT_CHUNK_BYTES,
    REQUEST_CHUNK_KEY,
    RESULT_CHUNK_KEY,
    ChunkHead,
    ChunkPlan,
    chunk_descriptor,
    chunk_payload,
    chunk_span,
    decode_byte_chunks,
    encode_byte_chunks,
    frame_head_size,
    min_chunk_bytes,
    plan_chunks,
    read_chunk_head,
    split_chunk,
)
from contract.wire.delivery import (
    OCTET_STREAM,
    decode_inline,
    decode_result_chunk_events,
    inline_frame,
    is_inline_frame,
    result_chunk_events,
    standard_request_metadata,
)
from contract.wire.frame import (
    DTYPE_ITEMSIZE,
    EMPTY_TENSOR_KEY,
    METADATA_KEY,
    ROOT_TENSOR_KEY,
    WIRE_VERSION,
    FrameParts,
    read_metadata,
    sniff_refused_payload,
)
from contract.wire.limits import (
    CHUNK_HEADER_ALLOWANCE,
    DEFAULT_LIMITS,
    MAX_HEADER_BYTES,
    REQUEST_FRAME_LIMITS,
    WireLimits,
)
from contract.wire.tree import dumps, dumps_parts, loads, loads_with_metadata

__all__ = [
    "CHUNK_HEADER_ALLOWANCE",
    "ChunkHead",
    "ChunkPlan",
    "DEFAULT_LIMITS",
    "DTYPE_ITEMSIZE",
    "EMPTY_TENSOR_KEY",
    "FrameParts",
    "MAX_HEADER_BYTES",
    "METADATA_KEY",
    "MIN_RESULT_CHUNK_BYTES",
    "OCTET_STREAM",
    "REQUEST_CHUNK_KEY",
    "REQUEST_FRAME_LIMITS",
    "RESULT_CHUNK_KEY",
    "ROOT_TENSOR_KEY",
    "WIRE_VERSION",
    "WireError",
    "WireLimits",
    "chunk_descriptor",
    "chunk_payload",
    "chunk_span",
    "decode_byte_chunks",
    "decode_inline",
    "decode_result_chunk_events",
    "dumps",
    "dumps_parts",
    "encode_byte_chunks",
    "frame_head_size",
    "inline_frame",
    "is_inline_frame",
    "loads",
    "loads_with_metadata",
    "min_chunk_bytes",
    "plan_chunks",
    "read_chunk_head",
    "read_metadata",
    "result_chunk_events",
    "sniff_refused_payload",
    "split_chunk",
    "standard_request_metadata",
]
