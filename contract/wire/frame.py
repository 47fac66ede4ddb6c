"""DSSST1 framing: the byte layout of one frame, written and read (spec §9.2).

A frame is one safetensors blob, so decoding never executes anything (no pickle, no
``torch.load``). The header is parsed and checked here before any byte reaches torch.

Byte layout (pinned; the golden test rebuilds it by hand)::

    u64 little-endian N | N bytes of UTF-8 JSON header | tensor bytes

* Header JSON: ``json.dumps(..., separators=(",", ":"), ensure_ascii=False)``. First key
  ``__metadata__`` = ``{"dss": <str>}`` or ``{"dss": <str>, "op": <str>}`` (that order), then
  one entry per tensor ``{"dtype", "shape", "data_offsets"}`` (that key order).
* Tensor order (header and data alike) is the one safetensors itself writes: by dtype rank
  I64, F64, F32, I32, BF16, F16, I16, I8, U8, BOOL, then by name (code-point order). Data
  is packed with no gaps, so every tensor starts aligned to its item size.
* The header is right-padded with spaces (0x20) until ``8 + N`` is a multiple of 8. If the
  low 16 bits of N would then read ``0x80 0x02``..``0x80 0x05`` (a pickle-looking start)
  8 more spaces are added, so a naive "starts like pickle" check elsewhere never refuses
  our frames. Except for that bump the bytes equal ``safetensors.torch.save`` output for
  the same tensors and a single ``dss`` metadata entry.

Reading is strict: data offsets must tile the data section exactly and every limit in
``WireLimits`` is checked before the part it bounds is parsed.
"""

from __future__ import annotations

import json
import struct
from typing import Any, NamedTuple

from contract.wire.basics import WireError, byte_view, json_value
from contract.wire.limits import (
    DEFAULT_LIMITS,
    DIM_LIMIT,
    MAX_HEADER_CONTAINERS,
    MAX_NDIM,
    WireLimits,
)

WIRE_VERSION = "DSSST1"
EMPTY_TENSOR_KEY = "__dss_empty__"
ROOT_TENSOR_KEY = "__root__"
METADATA_KEY = "__metadata__"

#: safetensors dtype code -> (torch dtype attribute, item size); the order is the rank
#: safetensors sorts by (largest first), which the writer copies.
DTYPES: dict[str, tuple[str, int]] = {
    "I64": ("int64", 8),
    "F64": ("float64", 8),
    "F32": ("float32", 4),
    "I32": ("int32", 4),
    "BF16": ("bfloat16", 2),
    "F16": ("float16", 2),
    "I16": ("int16", 2),
    "I8": ("int8", 1),
    "U8": ("uint8", 1),
    "BOOL": ("bool", 1),
}
#: safetensors dtype code -> item size in bytes: the only dtypes a DSSST1 frame may hold.
DTYPE_ITEMSIZE: dict[str, int] = {code: size for code, (_, size) in DTYPES.items()}
_RANK = {code: i for i, code in enumerate(DTYPES)}
_PICKLE_LOOKALIKE = frozenset({0x0280, 0x0380, 0x0480, 0x0580})
REFUSED_MSG = "legacy pickle/torch.save payloads are refused; send a DSSST1 frame"


def sniff_refused_payload(data: Any) -> str | None:
    """Name the legacy format ``data`` starts like ("pickle", "zip (torch.save)") or None.

    A safetensors frame whose header length happens to be 0x0280/0x0380/... also starts
    with 0x80 0x02..0x05; it is told apart by the six zero bytes and the ``{`` that follow
    (a pickle never has an opcode 0x00 there).
    """
    try:
        mv = byte_view(data)
    except WireError:
        return None
    framed = len(mv) >= 9 and mv[2:8] == b"\0" * 6 and mv[8] == 0x7B
    if len(mv) >= 2 and mv[0] == 0x80 and 2 <= mv[1] <= 5 and not framed:
        return "pickle"
    if mv[:4] == b"PK\x03\x04":
        return "zip (torch.save)"
    return None


# --------------------------------------------------------------------------- writing


class Spec(NamedTuple):
    """One tensor to write: its safetensors name, dtype code, shape and bytes."""

    name: str
    code: str
    shape: list[int]
    nbytes: int
    data: Any  # a bytes-like object of exactly nbytes (kept alive until written)


def frame_prefix(dss: str, op: str | None, specs: list[Spec]) -> bytes:
    """The length field plus padded header for ``specs`` (already in frame order)."""
    meta = {"dss": dss} if op is None else {"dss": dss, "op": op}
    header: dict[str, Any] = {METADATA_KEY: meta}
    offset = 0
    for spec in specs:
        end = offset + spec.nbytes
        header[spec.name] = {"dtype": spec.code, "shape": spec.shape, "data_offsets": [offset, end]}
        offset = end
    try:
        raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WireError(f"a string in the frame is not encodable as UTF-8: {exc}") from None
    # What loads refuses, dumps never writes.
    containers = raw.count(b"[") + raw.count(b"{")
    if containers > MAX_HEADER_CONTAINERS:
        raise WireError(f"the frame's header would hold {containers} JSON arrays/objects, over "
                        f"the {MAX_HEADER_CONTAINERS} limit (send big nested lists as tensors)")
    size = len(raw) + (-(8 + len(raw)) % 8)
    while size & 0xFFFF in _PICKLE_LOOKALIKE:
        size += 8
    return struct.pack("<Q", size) + raw + b" " * (size - len(raw))


class FrameParts(NamedTuple):
    """One frame as the byte ranges it is made of, in frame order (the header first), not
    yet copied anywhere: what a sender streams as is and ``dumps`` writes out once."""

    parts: tuple[memoryview, ...]
    size: int

    def write_into(self, out: Any, offset: int = 0) -> None:
        """Copy the frame into the writable buffer ``out`` at ``offset`` (each byte once)."""
        target = byte_view(out, "output buffer")
        for part in self.parts:
            target[offset : offset + len(part)] = part
            offset += len(part)

    def to_bytes(self) -> bytes:
        """The frame as one ``bytes``: its size is known up front, so the result is allocated
        once and each part copied into it once (CPython's join sizes first, then copies with
        the GIL released); nothing is joined twice."""
        return b"".join(self.parts)


def frame_parts(dss: str, op: str | None, specs: list[Spec]) -> FrameParts:
    """The frame's parts: prefix, then each tensor's bytes in safetensors order."""
    specs = sorted(specs, key=lambda s: (_RANK[s.code], s.name))
    parts = [memoryview(frame_prefix(dss, op, specs))]
    parts.extend(byte_view(s.data, f"tensor {s.name!r}") for s in specs if s.nbytes)
    return FrameParts(tuple(parts), sum(len(p) for p in parts))



# --------------------------------------------------------------------------- reading


class Entry(NamedTuple):
    """One checked header entry: dtype code, shape and its byte range in the data section."""

    code: str
    shape: list[int]
    begin: int
    end: int


class Frame(NamedTuple):
    """A parsed and validated frame header; ``data`` is the view of the tensor bytes."""

    entries: dict[str, Entry]
    tree: Any
    op: dict[str, Any] | None
    data: memoryview


def read_header(mv: memoryview, limits: WireLimits) -> tuple[dict[str, Any], memoryview]:
    """Check framing and parse the header JSON; returns (header dict, data section view)."""
    refused = sniff_refused_payload(mv)
    if refused is not None:
        raise WireError(f"payload looks like {refused}: {REFUSED_MSG}")
    if limits.max_frame_bytes is not None and len(mv) > limits.max_frame_bytes:
        raise WireError(f"frame of {len(mv)} bytes exceeds the {limits.max_frame_bytes} limit")
    if len(mv) < 8:
        raise WireError(f"frame of {len(mv)} bytes is too short for a safetensors header")
    (size,) = struct.unpack_from("<Q", mv, 0)
    if size > limits.max_header_bytes:
        raise WireError(f"header length {size} exceeds the {limits.max_header_bytes} byte cap")
    if size > len(mv) - 8:
        raise WireError(f"header length {size} runs past the end of a {len(mv)} byte frame")
    if size < 2 or mv[8] != 0x7B:
        raise WireError("safetensors header must be a JSON object starting with '{'")
    try:
        text = str(mv[8 : 8 + size], "utf-8")
    except UnicodeDecodeError as exc:
        raise WireError(f"header is not UTF-8: {exc}") from None
    check_containers(text, limits.max_containers)
    header = json_value(text, "safetensors header")
    if not isinstance(header, dict):
        raise WireError("safetensors header must be a JSON object")
    return header, mv[8 + size :]


def check_containers(text: str, cap: int) -> None:
    """Refuse a header of more JSON arrays/objects than ``cap`` before parsing it: each
    costs an object, so a header of ``[]`` repeated costs ~20x its bytes once parsed."""
    containers = text.count("[") + text.count("{")
    if containers > cap:
        raise WireError(f"header holds about {containers} JSON arrays/objects, over the {cap} "
                        "limit; refused unparsed")


def header_metadata(header: dict[str, Any]) -> dict[str, str]:
    """Take ``__metadata__`` out of ``header``: a str -> str map, ``{}`` when absent."""
    meta = header.pop(METADATA_KEY, None)
    if meta is None:
        return {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise WireError("__metadata__ must map strings to strings")
    return meta


def _bad_entry(name: str, problem: str) -> WireError:
    return WireError(f"tensor {name[:80]!r}: {problem}")


def _entry(name: str, info: Any, data_len: int) -> Entry:
    """Check one header entry: known dtype, sane shape, offsets in range matching the shape."""
    if type(info) is not dict or len(info) != 3:
        raise _bad_entry(name, "entry must be exactly {dtype, shape, data_offsets}")
    code, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    itemsize = DTYPE_ITEMSIZE.get(code) if type(code) is str else None
    if itemsize is None:
        raise _bad_entry(name, f"unsupported dtype {str(code)[:40]!r}")
    if type(shape) is not list or len(shape) > MAX_NDIM:
        raise _bad_entry(name, f"shape must be a list of at most {MAX_NDIM} ints")
    size = itemsize
    for dim in shape:
        if type(dim) is not int or not 0 <= dim < DIM_LIMIT:
            raise _bad_entry(name, "shape must hold non-negative ints")
        size *= dim
    if type(offsets) is not list or len(offsets) != 2:
        raise _bad_entry(name, "data_offsets must be [begin, end]")
    begin, end = offsets
    if type(begin) is not int or type(end) is not int or not 0 <= begin <= end <= data_len:
        raise _bad_entry(name, "data_offsets out of range")
    if end - begin != size:
        raise _bad_entry(name, f"{end - begin} bytes do not match shape {shape}")
    return Entry(str(code), shape, begin, end)


def _entries(header: dict[str, Any], data_len: int, limits: WireLimits) -> dict[str, Entry]:
    """Validate every tensor entry; offsets must tile the data section exactly."""
    if len(header) > limits.max_tensors:
        raise WireError(f"frame holds {len(header)} tensors, over the {limits.max_tensors} limit")
    entries: dict[str, Entry] = {}
    position = 0
    in_order = True  # frames we write list tensors in data order; others get sorted
    for name, info in header.items():
        entry = entries[name] = _entry(name, info, data_len)
        in_order = in_order and entry.begin == position
        position = entry.end
    if not in_order:
        position = 0
        for entry in sorted(entries.values(), key=lambda e: (e.begin, e.end)):
            if entry.begin != position:
                raise WireError("tensor data_offsets overlap or leave gaps")
            position = entry.end
    if position != data_len:
        raise WireError(f"tensor data covers {position} of {data_len} data bytes")
    return entries


def metadata_json(meta: dict[str, str], key: str, limits: WireLimits) -> Any:
    """Parse the ``dss`` or ``op`` metadata string after checking its size."""
    text = meta[key]
    if (
        len(text) > limits.max_json_bytes
        or len(text.encode("utf-8", "surrogatepass")) > limits.max_json_bytes
    ):
        raise WireError(f"{key} metadata is over the {limits.max_json_bytes} byte JSON limit")
    return json_value(text, f"{key} metadata")


def _declared_data_len(header: dict[str, Any]) -> int:
    """The data section the header's entries describe: their largest end offset (0 when no
    entry names a usable one; the entry checks then say what is wrong)."""
    ends = [info["data_offsets"][1] for info in header.values()
            if type(info) is dict and type(info.get("data_offsets")) is list and len(info["data_offsets"]) == 2]
    return max((end for end in ends if type(end) is int and end >= 0), default=0)


def parse_frame(mv: memoryview, limits: WireLimits, *, head_only: bool = False) -> Frame:
    """Read and check a whole frame's header (not its tensors) within ``limits``.

    ``head_only``: ``mv`` holds the header and maybe the start of the data; the entries must
    tile the data section they declare, which the caller then checks arrives in full."""
    header, data = read_header(mv, limits)
    meta = header_metadata(header)
    entries = _entries(header, _declared_data_len(header) if head_only else len(data), limits)
    if "dss" not in meta:
        raise WireError("not a DSSST1 frame: no dss entry in __metadata__")
    dss = metadata_json(meta, "dss", limits)
    if not isinstance(dss, dict) or dss.get("v") != WIRE_VERSION or "tree" not in dss:
        version = dss.get("v") if isinstance(dss, dict) else None
        raise WireError(f"unsupported wire version {version!r}; expected {WIRE_VERSION}")
    op: dict[str, Any] | None = None
    if "op" in meta:
        op = metadata_json(meta, "op", limits)
        if not isinstance(op, dict):
            raise WireError("op metadata must be a JSON object")
    return Frame(entries, dss["tree"], op, data)


def read_metadata(data: Any) -> dict[str, Any]:
    """Lenient peek at the ``op`` metadata without touching tensors: garbage gives ``{}``."""
    try:
        header, _ = read_header(byte_view(data), DEFAULT_LIMITS)
        meta = header_metadata(header)
        if "op" not in meta:
            return {}
        op = metadata_json(meta, "op", DEFAULT_LIMITS)
    except (WireError, MemoryError):  # a peek never fails: every garbage maps to WireError
        return {}
    return op if isinstance(op, dict) else {}
