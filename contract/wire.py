"""DSSST1: the tensor wire format of the Cortex Training API (facts, sections 6 and 7).

A frame is one safetensors blob, so decoding never executes anything (no pickle, no
``torch.load``). This module writes and reads it itself: the header is parsed and checked
here before any byte reaches torch, and torch/safetensors are imported lazily so that
``import contract.wire`` stays light (frames without tensors and all chunk helpers never
import torch at all).

Byte layout (pinned; ``dumps`` is deterministic and the golden test rebuilds it by hand)::

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
* ``dss`` = ``{"v":"DSSST1","tree":<node>}`` and ``op`` = the caller's metadata, both
  compact JSON as above plus ``allow_nan=False``; dict key order is kept (never sorted).
  ``op`` is omitted when the metadata is ``None`` or empty.

Tree (facts section 6): ``["t", key]``, ``["t", key, {"scalar": true}]``, ``["j", value]``,
``["d", [[k, node], ...]]``, ``["l", [...]]``, ``["u", [...]]``. Decisions taken here:

* a dict/list collapses to one ``j`` node only if nothing below it is a tensor *or a
  tuple*, so tuples always come back as tuples and lists as lists;
* dict keys must be ``str`` everywhere (JSON would silently turn ``1`` into ``"1"``);
  floats must be finite (NaN/inf are not JSON); only str/int/float/bool/None leaves;
  subclasses (``IntEnum``, ``OrderedDict``...) come back as the base type;
* two tensors mapping to the same key path (``{"a.b": x, "a": {"b": y}}``) and a tensor
  named ``__metadata__`` are refused;
* nesting: containers may be nested ``max_depth`` (64) deep, checked by ``dumps`` too so it
  never writes what ``loads`` refuses; tensors may use dtypes BOOL, U8, I8, I16, I32, I64,
  F16, BF16, F32, F64 only (others raise ``WireError`` in ``dumps``); little-endian hosts.

Decoding is strict: every header entry must be referenced exactly once by the tree (the
unreferenced ``__dss_empty__`` marker is dropped), data offsets must tile the data
section exactly, BOOL bytes must be 0 or 1, JSON may not contain NaN/Infinity. Decoded
tensors own their memory (each is a fresh writable ``bytearray`` behind
``torch.frombuffer``): they never alias the caller's buffer or each other.

Chunks (section 7) are DSSST1 frames with tree ``{"payload": uint8[n]}`` and ``op``
``{"request_chunk"|"result_chunk": {chunk_idx, total_chunks, frame_sha256,
frame_size_bytes, operation?, chunk_group_id (request only)}}`` (that key order).
Reassembly accepts chunks in any order (``chunk_idx`` is explicit) and refuses everything
else listed in the facts. Splitting hashes the frame once and copies each byte once.
"""

from __future__ import annotations

import base64
import binascii
import collections
import hashlib
import json
import math
import struct
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import torch

__all__ = [
    "CHUNK_HEADER_ALLOWANCE",
    "EMPTY_TENSOR_KEY",
    "MAX_HEADER_BYTES",
    "ROOT_TENSOR_KEY",
    "WIRE_VERSION",
    "WireError",
    "WireLimits",
    "chunk_descriptor",
    "split_chunk",
    "chunk_payload",
    "decode_byte_chunks",
    "decode_inline",
    "decode_result_chunk_events",
    "dumps",
    "encode_byte_chunks",
    "inline_frame",
    "is_inline_frame",
    "loads",
    "loads_with_metadata",
    "min_chunk_bytes",
    "read_metadata",
    "result_chunk_events",
    "sniff_refused_payload",
    "standard_request_metadata",
]

WIRE_VERSION = "DSSST1"
MAX_HEADER_BYTES = 64 * 1024 * 1024
CHUNK_HEADER_ALLOWANCE = 8192
EMPTY_TENSOR_KEY = "__dss_empty__"
ROOT_TENSOR_KEY = "__root__"
METADATA_KEY = "__metadata__"
REQUEST_CHUNK_KEY = "request_chunk"
RESULT_CHUNK_KEY = "result_chunk"
OCTET_STREAM = "application/octet-stream"

_CHUNK_KEYS = {"request": REQUEST_CHUNK_KEY, "result": RESULT_CHUNK_KEY}
_CHUNK_KINDS = {v: k for k, v in _CHUNK_KEYS.items()}
_CHUNK_TREE = ["d", [["payload", ["t", "payload"]]]]
_CHUNK_DSS = '{"v":"DSSST1","tree":["d",[["payload",["t","payload"]]]]}'
_PICKLE_LOOKALIKE = frozenset({0x0280, 0x0380, 0x0480, 0x0580})
_REFUSED_MSG = "legacy pickle/torch.save payloads are refused; send a DSSST1 frame"
_HEX = frozenset("0123456789abcdef")
_MAX_NDIM = 64
_DIM_LIMIT = 2**63

#: safetensors dtype code -> (torch dtype attribute, item size); the order is the rank
#: safetensors sorts by (largest first), which this module copies.
_DTYPES: dict[str, tuple[str, int]] = {
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
_RANK = {code: i for i, code in enumerate(_DTYPES)}
_ITEMSIZE = {code: size for code, (_, size) in _DTYPES.items()}
_PLAIN_LEAVES = frozenset({str, int, bool, type(None)})


class WireError(ValueError):
    """Every refusal of the codec: garbage, limits, unsupported values, bad chunks."""


@dataclass(frozen=True)
class WireLimits:
    """Decoder limits; the defaults accept anything ``dumps`` writes.

    ``max_header_bytes`` caps the safetensors header length field (checked before any
    parsing); ``max_depth`` the nesting of d/l/u tree nodes (JSON inside a ``j`` node is
    bounded by the JSON parser's own recursion guard, reported as WireError);
    ``max_tensors`` the header entries; ``max_json_bytes`` the UTF-8 size of each of the
    ``dss`` and ``op`` metadata strings; ``max_frame_bytes`` the whole frame (None: no cap).
    """

    max_header_bytes: int = MAX_HEADER_BYTES
    max_depth: int = 64
    max_tensors: int = 100_000
    max_json_bytes: int = 16 * 1024 * 1024
    max_frame_bytes: int | None = None


_DEFAULT_LIMITS = WireLimits()


def standard_request_metadata() -> dict[str, Any]:
    """The ``op`` metadata tensor-op requests carry (a fresh dict each call)."""
    return {"response_options": {"format": "dssst1", "delivery": "chunked"}}


# --------------------------------------------------------------------------- helpers


def _json_text(value: Any, what: str) -> str:
    """Compact, order-keeping, strict JSON (the pinned serialisation)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise WireError(f"{what} is not JSON-serialisable: {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise WireError(f"non-standard JSON constant {name} is refused")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Refuse an object naming a key twice, as safetensors does: a parser keeping the first
    and one keeping the last would read two different frames from the same bytes."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        counts = collections.Counter(k for k, _ in pairs)
        dup = next(k for k, n in counts.items() if n > 1)
        raise WireError(f"duplicate key {dup[:80]!r} in a JSON object")
    return obj


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)


def _json_value(text: str, what: str) -> Any:
    """Parse strict JSON, mapping every failure (incl. deep nesting) to WireError."""
    try:
        return _DECODER.decode(text)
    except WireError:
        raise
    except (ValueError, RecursionError) as exc:
        raise WireError(f"{what} is not valid JSON: {exc}") from None


def _view(data: Any, what: str = "frame") -> memoryview:
    """A flat byte view of ``data`` without copying; WireError for non-bytes input."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"{what} must be bytes, bytearray or memoryview, not {type(data).__name__}")
    try:
        mv = memoryview(data)
        if mv.ndim != 1 or mv.format != "B":
            mv = mv.cast("B")
    except (TypeError, ValueError) as exc:
        raise WireError(f"{what} is not a contiguous byte buffer: {exc}") from None
    return mv


def _as_bytes(data: Any) -> bytes:
    return data if isinstance(data, bytes) else bytes(data)


def _torch() -> Any:
    import torch

    return torch


def _check_little_endian() -> None:
    if sys.byteorder != "little":
        raise WireError("DSSST1 tensors are little-endian; big-endian hosts are not supported")


def sniff_refused_payload(data: Any) -> str | None:
    """Name the legacy format ``data`` starts like ("pickle", "zip (torch.save)") or None.

    A safetensors frame whose header length happens to be 0x0280/0x0380/... also starts
    with 0x80 0x02..0x05; it is told apart by the six zero bytes and the ``{`` that follow
    (a pickle never has an opcode 0x00 there).
    """
    try:
        mv = _view(data)
    except WireError:
        return None
    framed = len(mv) >= 9 and mv[2:8] == b"\0" * 6 and mv[8] == 0x7B
    if len(mv) >= 2 and mv[0] == 0x80 and 2 <= mv[1] <= 5 and not framed:
        return "pickle"
    if mv[:4] == b"PK\x03\x04":
        return "zip (torch.save)"
    return None


# --------------------------------------------------------------------------- writing


class _Spec(NamedTuple):
    """One tensor to write: its safetensors name, dtype code, shape and bytes."""

    name: str
    code: str
    shape: list[int]
    nbytes: int
    data: Any  # a bytes-like object of exactly nbytes (kept alive until written)


def _frame_prefix(dss: str, op: str | None, specs: list[_Spec]) -> bytes:
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
    size = len(raw) + (-(8 + len(raw)) % 8)
    while size & 0xFFFF in _PICKLE_LOOKALIKE:
        size += 8
    return struct.pack("<Q", size) + raw + b" " * (size - len(raw))


def _build_frame(dss: str, op: str | None, specs: list[_Spec]) -> bytes:
    specs = sorted(specs, key=lambda s: (_RANK[s.code], s.name))
    parts: list[Any] = [_frame_prefix(dss, op, specs)]
    parts.extend(s.data for s in specs if s.nbytes)
    return b"".join(parts)


def _child_path(path: str | None, key: object) -> str:
    return str(key) if path is None else f"{path}.{key}"


def _bad_float(value: float, path: str | None) -> WireError:
    return WireError(f"non-finite float {value!r} at {path or '<root>'} is not valid JSON")


class _Encoder:
    """Walks a Python object once, producing the tree and the tensors to write."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.specs: list[_Spec] = []
        self.names: set[str] = set()
        torch_mod = sys.modules.get("torch")
        # No torch imported means no object can be a tensor: skip importing it.
        self.tensor_type: type | None = getattr(torch_mod, "Tensor", None)

    def encode(self, x: Any, path: str | None, depth: int) -> tuple[list[Any], bool]:
        """Return (node, pure); pure nodes are ``["j", x]`` and may collapse upward."""
        tx = type(x)
        if tx in _PLAIN_LEAVES:
            return ["j", x], True
        if tx is float:
            if not math.isfinite(x):
                raise _bad_float(x, path)
            return ["j", x], True
        if self.tensor_type is not None and isinstance(x, self.tensor_type):
            return self.tensor(x, path), False
        if isinstance(x, (dict, list, tuple)):
            if depth > self.max_depth:
                raise WireError(f"nesting deeper than {self.max_depth} at {path or '<root>'}")
            if isinstance(x, dict):
                return self.mapping(x, path, depth)
            return self.sequence(x, path, depth)
        if isinstance(x, float):
            if not math.isfinite(x):
                raise _bad_float(x, path)
            return ["j", x], True
        if isinstance(x, (str, int)):
            return ["j", x], True
        raise WireError(f"cannot encode a {tx.__name__} at {path or '<root>'}")

    def mapping(self, x: dict[Any, Any], path: str | None, depth: int) -> tuple[list[Any], bool]:
        children: list[list[Any]] | None = None
        for i, (k, v) in enumerate(x.items()):
            if not isinstance(k, str):
                raise WireError(
                    f"dict keys must be str, got {type(k).__name__} at {path or '<root>'}"
                )
            tv = type(v)
            if tv in _PLAIN_LEAVES or (tv is float and math.isfinite(v)):
                if children is not None:
                    children.append([k, ["j", v]])
                continue
            node, pure = self.encode(v, _child_path(path, k), depth + 1)
            if not pure and children is None:
                children = [[pk, ["j", pv]] for pk, pv in list(x.items())[:i]]
            if children is not None:
                children.append([k, node])
        if children is None:
            return ["j", x], True
        return ["d", children], False

    def sequence(
        self, x: list[Any] | tuple[Any, ...], path: str | None, depth: int
    ) -> tuple[list[Any], bool]:
        is_tuple = isinstance(x, tuple)
        children: list[list[Any]] | None = [] if is_tuple else None
        for i, v in enumerate(x):
            tv = type(v)
            if tv in _PLAIN_LEAVES or (tv is float and math.isfinite(v)):
                if children is not None:
                    children.append(["j", v])
                continue
            node, pure = self.encode(v, _child_path(path, i), depth + 1)
            if not pure and children is None:
                children = [["j", pv] for pv in x[:i]]
            if children is not None:
                children.append(node)
        if is_tuple:
            return ["u", children], False
        if children is None:
            return ["j", x], True
        return ["l", children], False

    def tensor(self, x: Any, path: str | None) -> list[Any]:
        key = ROOT_TENSOR_KEY if path is None else path
        if key == METADATA_KEY:
            raise WireError(f"a tensor may not be stored under the reserved key {METADATA_KEY!r}")
        if key in self.names:
            raise WireError(f"two tensors map to the same key {key!r}; rename a dict key")
        _check_little_endian()
        torch = _torch()
        try:
            t = x.detach()
            if t.layout != torch.strided:
                raise WireError(f"tensor {key!r} has layout {t.layout}; only dense tensors")
            code = _torch_codes().get(t.dtype)
            if code is None:
                raise WireError(f"tensor {key!r} has unsupported dtype {t.dtype}")
            if t.device.type != "cpu":
                t = t.to("cpu")
            if t.is_neg():
                t = t.resolve_neg()
            t = t.contiguous()
            scalar = t.dim() == 0
            shape = [1] if scalar else [int(d) for d in t.shape]
            nbytes = t.numel() * t.element_size()
            data = _tensor_bytes(t) if nbytes else b""
        except WireError:
            raise
        except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
            raise WireError(f"cannot write tensor {key!r}: {exc}") from None
        self.names.add(key)
        self.specs.append(_Spec(key, code, shape, nbytes, data))
        return ["t", key, {"scalar": True}] if scalar else ["t", key]


_TORCH_CODES: dict[Any, str] = {}


def _torch_codes() -> dict[Any, str]:
    """torch dtype -> safetensors code, built on first use (needs torch)."""
    if not _TORCH_CODES:
        torch = _torch()
        _TORCH_CODES.update({getattr(torch, attr): code for code, (attr, _) in _DTYPES.items()})
    return _TORCH_CODES


_TORCH_DTYPES: dict[str, Any] = {}


def _torch_dtypes() -> dict[str, Any]:
    """safetensors code -> torch dtype, built on first use (needs torch)."""
    if not _TORCH_DTYPES:
        _check_little_endian()
        torch = _torch()
        _TORCH_DTYPES.update({code: getattr(torch, attr) for code, (attr, _) in _DTYPES.items()})
    return _TORCH_DTYPES


def _tensor_bytes(t: torch.Tensor) -> Any:
    """A zero-copy byte view of a contiguous CPU tensor (numpy), else one copy (torch)."""
    torch = _torch()
    flat = t.reshape(-1)
    if flat.stride(0) != 1:  # a 1-element tensor may carry stride 0 and still be contiguous
        flat = flat.as_strided((flat.numel(),), (1,))
    flat = flat.view(torch.uint8)
    try:
        array: Any = flat.numpy()
        return memoryview(array)
    except (RuntimeError, TypeError, ImportError):  # numpy missing: copy through torch
        buf = bytearray(flat.numel())
        torch.frombuffer(buf, dtype=torch.uint8).copy_(flat)
        return buf


def dumps(obj: Any, metadata: dict[str, Any] | None = None) -> bytes:
    """Encode ``obj`` (nested dict/list/tuple/JSON scalars/tensors) as one DSSST1 frame.

    ``metadata`` (JSON object) is stored under the header's ``__metadata__["op"]``.
    """
    encoder = _Encoder(_DEFAULT_LIMITS.max_depth)
    try:
        tree, _ = encoder.encode(obj, None, 1)
    except RecursionError:
        raise WireError("object nests too deeply to encode") from None
    op: str | None = None
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise WireError(f"metadata must be a dict, not {type(metadata).__name__}")
        if metadata:
            meta_encoder = _Encoder(_DEFAULT_LIMITS.max_depth)
            meta_encoder.tensor_type = None  # tensors in metadata are refused as unknown types
            try:
                _, pure = meta_encoder.encode(metadata, None, 1)
            except RecursionError:
                raise WireError("metadata nests too deeply") from None
            if not pure:
                raise WireError("metadata must be plain JSON (tuples would come back as lists)")
            op = _json_text(metadata, "metadata")
    dss = _json_text({"v": WIRE_VERSION, "tree": tree}, "frame tree")
    specs = encoder.specs or [_Spec(EMPTY_TENSOR_KEY, "U8", [1], 1, b"\x00")]
    return _build_frame(dss, op, specs)


# --------------------------------------------------------------------------- reading


class _Entry(NamedTuple):
    code: str
    shape: list[int]
    begin: int
    end: int


class _Frame(NamedTuple):
    """A parsed and validated frame header; ``data`` is the view of the tensor bytes."""

    entries: dict[str, _Entry]
    tree: Any
    op: dict[str, Any] | None
    data: memoryview


def _read_header(mv: memoryview, limits: WireLimits) -> tuple[dict[str, Any], memoryview]:
    """Check framing and parse the header JSON; returns (header dict, data section view)."""
    refused = sniff_refused_payload(mv)
    if refused is not None:
        raise WireError(f"payload looks like {refused}: {_REFUSED_MSG}")
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
    header = _json_value(text, "safetensors header")
    if not isinstance(header, dict):
        raise WireError("safetensors header must be a JSON object")
    return header, mv[8 + size :]


def _header_metadata(header: dict[str, Any]) -> dict[str, str]:
    meta = header.pop(METADATA_KEY, None)
    if meta is None:
        return {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise WireError("__metadata__ must map strings to strings")
    return meta


def _bad_entry(name: str, problem: str) -> WireError:
    return WireError(f"tensor {name[:80]!r}: {problem}")


def _entries(header: dict[str, Any], data_len: int, limits: WireLimits) -> dict[str, _Entry]:
    """Validate every tensor entry; offsets must tile the data section exactly."""
    if len(header) > limits.max_tensors:
        raise WireError(f"frame holds {len(header)} tensors, over the {limits.max_tensors} limit")
    entries: dict[str, _Entry] = {}
    position = 0
    in_order = True  # frames we write list tensors in data order; others get sorted
    for name, info in header.items():
        if type(info) is not dict or len(info) != 3:
            raise _bad_entry(name, "entry must be exactly {dtype, shape, data_offsets}")
        code, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        itemsize = _ITEMSIZE.get(code) if type(code) is str else None
        if itemsize is None:
            raise _bad_entry(name, f"unsupported dtype {str(code)[:40]!r}")
        if type(shape) is not list or len(shape) > _MAX_NDIM:
            raise _bad_entry(name, f"shape must be a list of at most {_MAX_NDIM} ints")
        size = itemsize
        for dim in shape:
            if type(dim) is not int or not 0 <= dim < _DIM_LIMIT:
                raise _bad_entry(name, "shape must hold non-negative ints")
            size *= dim
        if type(offsets) is not list or len(offsets) != 2:
            raise _bad_entry(name, "data_offsets must be [begin, end]")
        begin, end = offsets
        if type(begin) is not int or type(end) is not int or not 0 <= begin <= end <= data_len:
            raise _bad_entry(name, "data_offsets out of range")
        if end - begin != size:
            raise _bad_entry(name, f"{end - begin} bytes do not match shape {shape}")
        entries[name] = _Entry(str(code), shape, begin, end)
        in_order = in_order and begin == position
        position = end
    if not in_order:
        position = 0
        for entry in sorted(entries.values(), key=lambda e: (e.begin, e.end)):
            if entry.begin != position:
                raise WireError("tensor data_offsets overlap or leave gaps")
            position = entry.end
    if position != data_len:
        raise WireError(f"tensor data covers {position} of {data_len} data bytes")
    return entries


def _metadata_json(meta: dict[str, str], key: str, limits: WireLimits) -> Any:
    text = meta[key]
    if (
        len(text) > limits.max_json_bytes
        or len(text.encode("utf-8", "surrogatepass")) > limits.max_json_bytes
    ):
        raise WireError(f"{key} metadata is over the {limits.max_json_bytes} byte JSON limit")
    return _json_value(text, f"{key} metadata")


def _parse_frame(mv: memoryview, limits: WireLimits) -> _Frame:
    header, data = _read_header(mv, limits)
    meta = _header_metadata(header)
    entries = _entries(header, len(data), limits)
    if "dss" not in meta:
        raise WireError("not a DSSST1 frame: no dss entry in __metadata__")
    dss = _metadata_json(meta, "dss", limits)
    if not isinstance(dss, dict) or dss.get("v") != WIRE_VERSION or "tree" not in dss:
        version = dss.get("v") if isinstance(dss, dict) else None
        raise WireError(f"unsupported wire version {version!r}; expected {WIRE_VERSION}")
    op: dict[str, Any] | None = None
    if "op" in meta:
        op = _metadata_json(meta, "op", limits)
        if not isinstance(op, dict):
            raise WireError("op metadata must be a JSON object")
    return _Frame(entries, dss["tree"], op, data)


class _Decoder:
    """Rebuilds the Python object from a parsed frame, materialising tensors on the way.

    Each tensor gets a fresh ``bytearray`` copy of its bytes behind ``torch.frombuffer``:
    writable, owning its memory, aliasing neither the input buffer nor other tensors.
    """

    def __init__(self, frame: _Frame, max_depth: int) -> None:
        self.entries = frame.entries
        self.data = frame.data
        self.max_depth = max_depth
        self.used: set[str] = set()
        self.torch: Any = None
        self.dtypes: dict[str, Any] = {}

    def node(self, node: Any, depth: int) -> Any:
        if type(node) is not list or not node:
            raise WireError(f"tree node must be a non-empty JSON array, got {type(node).__name__}")
        tag = node[0]
        if tag == "j" and len(node) == 2:
            return node[1]
        if tag == "t" and len(node) in (2, 3):
            return self.tensor(node)
        if tag in ("d", "l", "u") and len(node) == 2 and type(node[1]) is list:
            if depth > self.max_depth:
                raise WireError(f"tree nests deeper than {self.max_depth}")
            if tag == "d":
                out: dict[str, Any] = {}
                for pair in node[1]:
                    if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str:
                        raise WireError("dict node items must be [str key, node] pairs")
                    if pair[0] in out:
                        raise WireError(f"dict node repeats key {pair[0][:80]!r}")
                    out[pair[0]] = self.node(pair[1], depth + 1)
                return out
            items = [self.node(child, depth + 1) for child in node[1]]
            return tuple(items) if tag == "u" else items
        label = tag if type(tag) is str else type(tag).__name__
        raise WireError(f"malformed tree node with tag {label[:40]!r}")

    def tensor(self, node: list[Any]) -> Any:
        key = node[1]
        entry = self.entries.get(key) if type(key) is str else None
        if entry is None:
            label = key[:80] if type(key) is str else type(key).__name__
            raise WireError(f"tree names tensor {label!r} which the frame lacks")
        if key in self.used:
            raise WireError(f"tree names tensor {key[:80]!r} twice")
        self.used.add(key)
        code, shape, begin, end = entry
        if len(node) == 3:
            opts = node[2]
            scalar = opts.get("scalar", False) if type(opts) is dict else None
            if scalar is True:
                if shape != [1]:
                    raise WireError(f"scalar tensor {key[:80]!r} must be stored with shape [1]")
                shape = []
            elif scalar is not False:
                raise WireError(f'tensor {key[:80]!r}: options must be {{"scalar": bool}}')
        if self.torch is None:
            self.torch, self.dtypes = _torch(), _torch_dtypes()
        try:
            if begin == end:
                return self.torch.empty(shape, dtype=self.dtypes[code])
            if end - begin >= _LARGE_COPY:
                flat = _copy_large(self.torch, self.data[begin:end]).view(self.dtypes[code])
                if code == "BOOL" and flat.view(self.torch.uint8).max().item() > 1:
                    raise WireError(f"bool tensor {key[:80]!r} holds bytes other than 0 and 1")
            else:
                buf = bytearray(self.data[begin:end])
                if code == "BOOL" and buf.translate(None, b"\x00\x01"):
                    raise WireError(f"bool tensor {key[:80]!r} holds bytes other than 0 and 1")
                flat = self.torch.frombuffer(buf, dtype=self.dtypes[code])
            if len(shape) == 1:
                return flat
            return flat.view(*shape) if shape else flat.view(())
        except WireError:
            raise
        except (RuntimeError, ValueError, TypeError, OverflowError) as exc:
            raise WireError(f"cannot build tensor {key[:80]!r}: {exc}") from None


#: From this size on a tensor takes the page-offset-aware copy (measured: below it the
#: plain bytearray copy is as fast and has less per-tensor overhead).
_LARGE_COPY = 64 << 20
_PAGE = 4096


def _copy_large(torch: Any, src: memoryview) -> Any:
    """Copy ``src`` into a fresh uint8 tensor placed ~2 KiB off the source's page offset.

    memcpy slows down ~3x when the destination sits just after the source modulo 4 KiB
    (stores alias the next loads: "4K aliasing"), and a plain ``bytearray`` copy lands
    wherever malloc puts it. So a large tensor gets 4 KiB of slack and starts where
    (dst - src) mod 4096 is about 2048. The tensor is a view at that offset into its own
    storage (``storage_offset() > 0``); nothing else shares the storage.
    """
    n = len(src)
    try:
        import numpy as np
    except ImportError:  # no numpy: a plain copy, at whatever alignment malloc gives
        return torch.frombuffer(bytearray(src), dtype=torch.uint8)
    source = np.frombuffer(src, dtype=np.uint8)
    store = torch.empty(n + _PAGE, dtype=torch.uint8)
    shift = (source.ctypes.data + _PAGE // 2 - store.data_ptr()) % _PAGE // 64 * 64
    out = store[shift : shift + n]
    np.copyto(out.numpy(), source)
    return out


def _loads(data: Any, limits: WireLimits | None) -> tuple[Any, dict[str, Any]]:
    limits = _DEFAULT_LIMITS if limits is None else limits
    frame = _parse_frame(_view(data), limits)
    decoder = _Decoder(frame, limits.max_depth)
    try:
        obj = decoder.node(frame.tree, 1)
    except RecursionError:
        raise WireError("frame tree nests too deeply") from None
    unused = frame.entries.keys() - decoder.used - {EMPTY_TENSOR_KEY}
    if unused:
        raise WireError(f"frame holds tensors the tree never names: {sorted(unused)[:5]}")
    return obj, frame.op or {}


def loads(data: bytes | bytearray | memoryview, *, limits: WireLimits | None = None) -> Any:
    """Decode a DSSST1 frame; garbage of any kind raises WireError."""
    return _loads(data, limits)[0]


def loads_with_metadata(
    data: bytes | bytearray | memoryview, *, limits: WireLimits | None = None
) -> tuple[Any, dict[str, Any]]:
    """Decode a frame and return ``(obj, op metadata or {})``."""
    return _loads(data, limits)


def read_metadata(data: Any) -> dict[str, Any]:
    """Lenient peek at the ``op`` metadata without touching tensors: garbage gives ``{}``."""
    try:
        header, _ = _read_header(_view(data), _DEFAULT_LIMITS)
        meta = _header_metadata(header)
        if "op" not in meta:
            return {}
        op = _metadata_json(meta, "op", _DEFAULT_LIMITS)
    except (WireError, MemoryError):  # a peek never fails: every garbage maps to WireError
        return {}
    return op if isinstance(op, dict) else {}


# --------------------------------------------------------------------------- chunks


def _chunk_key(kind: Any) -> str:
    if kind not in _CHUNK_KEYS:
        raise WireError(f"chunk kind must be 'request' or 'result', not {kind!r}")
    return _CHUNK_KEYS[kind]


def encode_byte_chunks(
    frame: bytes,
    kind: str,
    operation: str | None = None,
    max_bytes: int = 0,
    chunk_group_id: str | None = None,
    force_chunk: bool = False,
) -> list[bytes]:
    """Split ``frame`` into DSSST1 chunk frames of at most ``max_bytes`` each (facts §7).

    A frame that fits (or any frame when ``max_bytes <= 0``) goes as is unless
    ``force_chunk``. ``chunk_group_id`` is used for request chunks only (a fresh uuid4 when
    None). Any ``max_bytes`` that holds one chunk header plus one payload byte works:
    ranges start at ``max_bytes - 8192`` (half of a smaller ``max_bytes``) and halve until
    every chunk fits. The frame is hashed once and each byte copied once.
    """
    key = _chunk_key(kind)
    if not isinstance(max_bytes, int):
        raise WireError(f"max_bytes must be an int, not {type(max_bytes).__name__}")
    mv = _view(frame)
    size = len(mv)
    if not force_chunk and (max_bytes <= 0 or size <= max_bytes):
        return [_as_bytes(frame)]
    if operation is not None and not isinstance(operation, str):
        raise WireError("operation must be a string")
    group: str | None = None
    if key == REQUEST_CHUNK_KEY:
        group = str(uuid.uuid4()) if chunk_group_id is None else chunk_group_id
        if not isinstance(group, str):
            raise WireError("chunk_group_id must be a string")
    digest = hashlib.sha256(mv).hexdigest()
    range_size = max(size, 1) if max_bytes <= 0 else _first_range(max_bytes)
    while True:
        total = max(1, -(-size // range_size))
        prefixes: list[bytes] = []
        for idx in range(total):
            n = min(range_size, size - idx * range_size)
            desc: dict[str, Any] = {
                "chunk_idx": idx,
                "total_chunks": total,
                "frame_sha256": digest,
                "frame_size_bytes": size,
            }
            if operation is not None:
                desc["operation"] = operation
            if group is not None:
                desc["chunk_group_id"] = group
            op = _json_text({key: desc}, "chunk descriptor")
            prefix = _frame_prefix(_CHUNK_DSS, op, [_Spec("payload", "U8", [n], n, b"")])
            if 0 < max_bytes < len(prefix) + n:
                break
            prefixes.append(prefix)
        if len(prefixes) == total:
            break
        range_size //= 2
        if range_size < 1:
            raise WireError(f"a chunk header alone exceeds max_bytes={max_bytes}")
    return [
        b"".join((prefix, mv[idx * range_size : (idx + 1) * range_size]))
        for idx, prefix in enumerate(prefixes)
    ]


def _first_range(max_bytes: int) -> int:
    """The range size to try first: ``max_bytes - 8192`` (8 KiB for the chunk's own header),
    or half of a ``max_bytes`` too small for that allowance; ranges halve until chunks fit."""
    return max_bytes - CHUNK_HEADER_ALLOWANCE if max_bytes > CHUNK_HEADER_ALLOWANCE else max(1, max_bytes // 2)


def min_chunk_bytes(frame_size: int = 2**40, kind: str = "result", operation: str | None = None) -> int:
    """The smallest ``max_bytes`` that can carry a frame of up to ``frame_size`` bytes in
    1-byte ranges (the worst-case chunk header plus one payload byte)."""
    key = _chunk_key(kind)
    desc: dict[str, Any] = {"chunk_idx": frame_size - 1, "total_chunks": frame_size,
                            "frame_sha256": "0" * 64, "frame_size_bytes": frame_size}
    if operation is not None:
        desc["operation"] = operation
    if key == REQUEST_CHUNK_KEY:
        desc["chunk_group_id"] = str(uuid.uuid4())
    op = _json_text({key: desc}, "chunk descriptor")
    return len(_frame_prefix(_CHUNK_DSS, op, [_Spec("payload", "U8", [1], 1, b"")])) + 1


class _Chunk(NamedTuple):
    kind: str
    desc: dict[str, Any]
    payload: memoryview


def _check_descriptor(kind: str, desc: Any) -> dict[str, Any]:
    if not isinstance(desc, dict):
        raise WireError(f"{kind} chunk descriptor must be a JSON object")
    for field, minimum in (("chunk_idx", 0), ("total_chunks", 1), ("frame_size_bytes", 0)):
        value = desc.get(field)
        if type(value) is not int or value < minimum:
            raise WireError(f"{kind} chunk descriptor: {field} must be an int >= {minimum}")
    sha = desc.get("frame_sha256")
    if type(sha) is not str or len(sha) != 64 or not _HEX.issuperset(sha):
        raise WireError(f"{kind} chunk descriptor: frame_sha256 must be 64 lowercase hex digits")
    for field in ("operation", "chunk_group_id"):
        if field in desc and type(desc[field]) is not str:
            raise WireError(f"{kind} chunk descriptor: {field} must be a string")
    if kind == "request" and "chunk_group_id" not in desc:
        raise WireError("request chunk descriptor lacks chunk_group_id")
    return desc


def _parse_chunk(data: Any, what: str = "chunk") -> _Chunk | None:
    """Parse a chunk frame (None for a plain DSSST1 frame); WireError on garbage."""
    frame = _parse_frame(_view(data, what), _DEFAULT_LIMITS)
    op = frame.op or {}
    found = [k for k in (REQUEST_CHUNK_KEY, RESULT_CHUNK_KEY) if k in op]
    if not found:
        return None
    if len(found) > 1:
        raise WireError(f"{what} carries both request_chunk and result_chunk descriptors")
    kind = _CHUNK_KINDS[found[0]]
    desc = _check_descriptor(kind, op[found[0]])
    entry = frame.entries.get("payload")
    if frame.tree != _CHUNK_TREE or len(frame.entries) != 1 or entry is None:
        raise WireError(f"{what} tree must be exactly {{'payload': uint8 tensor}}")
    if entry.code != "U8" or len(entry.shape) != 1:
        raise WireError(f"{what} payload must be a 1-D uint8 tensor")
    return _Chunk(kind, desc, frame.data[entry.begin : entry.end])


def split_chunk(chunk: bytes) -> tuple[str, dict[str, Any], memoryview] | None:
    """``(kind, descriptor, payload view)`` in one parse, None for a plain frame.

    Servers need all three for every chunk they accept; parsing once keeps the hot path
    to a single header read."""
    parsed = _parse_chunk(chunk)
    return None if parsed is None else (parsed.kind, parsed.desc, parsed.payload)


def chunk_descriptor(chunk: bytes) -> tuple[str, dict[str, Any]] | None:
    """``("request"|"result", descriptor)`` for a chunk, None for a plain frame."""
    parsed = _parse_chunk(chunk)
    return None if parsed is None else (parsed.kind, parsed.desc)


def chunk_payload(chunk: bytes) -> memoryview | bytes:
    """The byte range a chunk carries, as a zero-copy view into ``chunk``."""
    parsed = _parse_chunk(chunk)
    if parsed is None:
        raise WireError("not a chunk: the frame has no chunk descriptor")
    return parsed.payload


def _missing_indices(seen: set[int], total: int, limit: int = 20) -> list[int]:
    """The first ``limit`` indices in range(total) absent from ``seen`` (total may be huge)."""
    missing: list[int] = []
    idx = 0
    while idx < total and len(missing) < limit:
        if idx not in seen:
            missing.append(idx)
        idx += 1
    return missing


def decode_byte_chunks(chunks: Sequence[bytes], kind: str | None = None) -> bytes:
    """Reassemble and verify the frame carried by ``chunks`` (any order; facts §7)."""
    if isinstance(chunks, (bytes, bytearray, memoryview, str)) or not isinstance(chunks, Sequence):
        raise WireError("chunks must be a sequence of byte strings")
    if not chunks:
        raise WireError("no chunks to reassemble")
    if kind is not None:
        _chunk_key(kind)
    parsed: list[_Chunk | None] = []
    for i, chunk in enumerate(chunks):
        try:
            parsed.append(_parse_chunk(chunk))
        except WireError as exc:
            raise WireError(f"chunk {i}: {exc}") from None
    if len(parsed) == 1 and parsed[0] is None:
        return _as_bytes(chunks[0])
    plain = [i for i, p in enumerate(parsed) if p is None]
    if plain:
        raise WireError(f"item {plain[0]} is a plain frame without chunk metadata among chunks")
    items = [p for p in parsed if p is not None]
    kinds = {p.kind for p in items}
    if len(kinds) > 1:
        raise WireError("chunks mix request and result kinds")
    if kind is not None and items[0].kind != kind:
        raise WireError(f"expected {kind} chunks, got {items[0].kind} chunks")
    first = items[0].desc
    for field in (
        "total_chunks",
        "frame_sha256",
        "frame_size_bytes",
        "chunk_group_id",
        "operation",
    ):
        for i, p in enumerate(items):
            if p.desc.get(field) != first.get(field):
                raise WireError(f"chunk {i} disagrees with chunk 0 on {field}")
    total: int = first["total_chunks"]
    by_idx: dict[int, memoryview] = {}
    for i, p in enumerate(items):
        idx = p.desc["chunk_idx"]
        if idx >= total:
            raise WireError(f"chunk {i} has chunk_idx {idx} out of range for {total} chunks")
        if idx in by_idx:
            raise WireError(f"duplicate chunk_idx {idx}")
        by_idx[idx] = p.payload
    if len(items) != total:
        missing = _missing_indices(set(by_idx), total)
        raise WireError(f"got {len(items)} of {total} chunks; missing chunk_idx {missing}")
    size = sum(len(p) for p in by_idx.values())
    if size != first["frame_size_bytes"]:
        raise WireError(
            f"chunks carry {size} bytes but frame_size_bytes is {first['frame_size_bytes']}"
        )
    frame = b"".join(by_idx[i] for i in range(total))
    if hashlib.sha256(frame).hexdigest() != first["frame_sha256"]:
        raise WireError("reassembled frame does not match frame_sha256")
    return frame


# --------------------------------------------------------------------------- results


def result_chunk_events(frame: bytes, max_bytes: int) -> list[dict[str, Any]]:
    """Cut a result frame into ``result_chunk`` poll events (always the chunk envelope)."""
    chunks = encode_byte_chunks(frame, "result", max_bytes=max_bytes, force_chunk=True)
    return [
        {
            "type": "result_chunk",
            "payload_b64": base64.b64encode(chunk).decode("ascii"),
            "payload_sha256": hashlib.sha256(chunk).hexdigest(),
        }
        for chunk in chunks
    ]


def decode_result_chunk_events(events: Sequence[dict[str, Any]]) -> bytes:
    """Check each event's sha256, then reassemble the result frame."""
    if not isinstance(events, Sequence) or isinstance(events, (str, bytes)):
        raise WireError("events must be a sequence of result_chunk events")
    chunks: list[bytes] = []
    for i, event in enumerate(events):
        if not isinstance(event, dict) or event.get("type") != "result_chunk":
            raise WireError(f"event {i} is not a result_chunk event")
        b64, sha = event.get("payload_b64"), event.get("payload_sha256")
        if not isinstance(b64, str) or not isinstance(sha, str):
            raise WireError(f"event {i} lacks payload_b64/payload_sha256 strings")
        chunk = _b64decode(b64, f"event {i}")
        if hashlib.sha256(chunk).hexdigest() != sha.lower():
            raise WireError(f"event {i}: payload_sha256 mismatch")
        chunks.append(chunk)
    return decode_byte_chunks(chunks, "result")


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WireError(f"{what}: payload_b64 is not valid base64: {exc}") from None


def inline_frame(frame: bytes) -> dict[str, Any]:
    """Wrap a small frame as an inline base64 result (facts §5, form 2)."""
    return {
        "content_type": OCTET_STREAM,
        "encoding": "base64",
        "wire_format": WIRE_VERSION,
        "payload_b64": base64.b64encode(_view(frame)).decode("ascii"),
    }


_INLINE_FIELDS = (
    ("content_type", OCTET_STREAM),
    ("encoding", "base64"),
    ("wire_format", WIRE_VERSION),
)


def is_inline_frame(obj: Any) -> bool:
    """True if ``obj`` is an inline DSSST1 result (extra keys are tolerated)."""
    return (
        isinstance(obj, dict)
        and all(obj.get(k) == v for k, v in _INLINE_FIELDS)
        and isinstance(obj.get("payload_b64"), str)
    )


def decode_inline(result: dict[str, Any]) -> bytes:
    """The frame bytes of an inline result; WireError names the wrong key."""
    if not isinstance(result, dict):
        raise WireError(f"inline result must be a dict, not {type(result).__name__}")
    for k, v in _INLINE_FIELDS:
        if result.get(k) != v:
            raise WireError(f"inline result: {k} must be {v!r}, got {result.get(k)!r}")
    b64 = result.get("payload_b64")
    if not isinstance(b64, str):
        raise WireError("inline result: payload_b64 must be a string")
    return _b64decode(b64, "inline result")
