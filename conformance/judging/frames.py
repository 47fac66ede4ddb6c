"""An independent reading (and hand-building) of DSSST1 frames, to judge a server's bytes.

The suite does not trust ``contract.wire`` to judge the frames a server sends: this module
parses the layout itself (u64 LE header length, JSON header, ``__metadata__.dss``, tree
tags, dotted tensor keys, the empty-frame tensor) and lists what is wrong. It also builds
frames and chunks byte by byte, so properties can send exact sizes and deliberately broken
descriptors the codec would never write. Only the format's named facts (dtype sizes,
reserved keys, the version string) are imported from ``contract.wire``; no codec logic.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from contract.wire import (
    DTYPE_ITEMSIZE,
    EMPTY_TENSOR_KEY,
    REQUEST_CHUNK_KEY,
    RESULT_CHUNK_KEY,
    ROOT_TENSOR_KEY,
    WIRE_VERSION,
)

#: The format's facts (dtype sizes, reserved keys, version) come from the contract; only
#: the judging of bytes against them is the suite's own.
DTYPE_SIZES: dict[str, int] = dict(DTYPE_ITEMSIZE)
TAGS = frozenset("tjdlu")
EMPTY_KEY = EMPTY_TENSOR_KEY
ROOT_KEY = ROOT_TENSOR_KEY


@dataclass
class FrameView:
    """A frame's parts, parsed without materialising a tensor."""

    header_len: int
    entries: dict[str, dict[str, Any]]
    metadata: dict[str, Any]
    dss: Any
    op: Any
    data_len: int
    problems: list[str] = field(default_factory=list)

    @property
    def tree(self) -> Any:
        return self.dss.get("tree") if isinstance(self.dss, dict) else None


def _safetensors_header(data: bytes) -> tuple[int, dict[str, Any]] | None:
    """(header length, header object), or None when ``data`` is no safetensors blob."""
    if len(data) < 8:
        return None
    (n,) = struct.unpack_from("<Q", data, 0)
    if n < 2 or 8 + n > len(data):
        return None
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return (n, header) if isinstance(header, dict) else None


def _metadata_parts(meta: Any, problems: list[str]) -> tuple[dict[str, Any], Any, Any]:
    """(``__metadata__``, parsed ``dss``, parsed ``op``), noting what is malformed."""
    if not isinstance(meta, dict):
        problems.append("header has no __metadata__ object")
        meta = {}
    dss: Any = None
    op: Any = None
    try:
        dss = json.loads(meta["dss"]) if isinstance(meta.get("dss"), str) else None
    except ValueError:
        problems.append("__metadata__.dss is not JSON")
    if not isinstance(dss, dict) or dss.get("v") != WIRE_VERSION or "tree" not in dss:
        problems.append(
            f"__metadata__.dss must be {{v: DSSST1, tree}}, got {str(meta.get('dss'))[:80]!r}"
        )
    if "op" in meta:
        try:
            op = json.loads(meta["op"])
        except (TypeError, ValueError):
            problems.append("__metadata__.op is not JSON")
    return meta, dss, op


def _entry_problems(header: dict[str, Any], data_len: int) -> list[str]:
    """Entries that are malformed, of a foreign dtype, or whose offsets do not tile the data."""
    problems: list[str] = []
    position_ends: list[tuple[int, int]] = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            problems.append(f"tensor {name!r}: entry is not {{dtype, shape, data_offsets}}")
            continue
        size = DTYPE_SIZES.get(info["dtype"])
        if size is None:
            problems.append(f"tensor {name!r}: dtype {info['dtype']!r} is not a DSSST1 dtype")
            continue
        begin, end = info["data_offsets"]
        if end - begin != math.prod(info["shape"]) * size or not 0 <= begin <= end <= data_len:
            problems.append(f"tensor {name!r}: data_offsets {info['data_offsets']} do not fit")
        position_ends.append((begin, end))
    pos = 0
    for begin, end in sorted(position_ends):
        if begin != pos:
            problems.append("tensor data has gaps or overlaps")
            break
        pos = end
    return problems


def inspect_frame(data: bytes) -> FrameView | None:
    """Parse ``data`` as DSSST1; ``None`` when it is not even a safetensors blob.

    ``view.problems`` lists every deviation from the format (spec §9.2).
    """
    parsed = _safetensors_header(data)
    if parsed is None:
        return None
    n, header = parsed
    problems: list[str] = []
    meta, dss, op = _metadata_parts(header.pop("__metadata__", None), problems)
    data_len = len(data) - 8 - n
    problems.extend(_entry_problems(header, data_len))
    view = FrameView(n, header, meta, dss, op, data_len, problems)
    if isinstance(dss, dict) and "tree" in dss:
        problems.extend(tree_problems(dss["tree"], header))
    return view


def _where(path: str | None) -> str:
    return path or "<root>"


def _child(path: str | None, key: object) -> str:
    return str(key) if path is None else f"{path}.{key}"


class _TreeWalk:
    """One pass over a tree, collecting problems and the tensor keys it names."""

    def __init__(self, entries: dict[str, dict[str, Any]]) -> None:
        self.entries = entries
        self.problems: list[str] = []
        self.used: list[str] = []

    def walk(self, node: Any, path: str | None) -> None:
        if not isinstance(node, list) or not node or node[0] not in TAGS:
            self.problems.append(
                f"node at {_where(path)} is not a t/j/d/l/u array: {str(node)[:60]}"
            )
            return
        tag = node[0]
        if tag == "t":
            self.tensor(node, path)
        elif tag == "j":
            if len(node) != 2:
                self.problems.append(f"j node at {_where(path)} must hold one value")
        elif tag == "d":
            self.mapping(node, path)
        else:
            self.sequence(node, path)

    def tensor(self, node: list[Any], path: str | None) -> None:
        key = node[1] if len(node) > 1 else None
        want = path if path is not None else ROOT_KEY
        if key != want:
            self.problems.append(f"tensor key {key!r} is not its path {want!r}")
        if key not in self.entries:
            self.problems.append(f"tree names tensor {key!r} the header lacks")
            return
        self.used.append(key)
        scalar = len(node) == 3 and isinstance(node[2], dict) and node[2].get("scalar")
        shape = self.entries[key]["shape"]
        if scalar and shape != [1]:
            self.problems.append(f"scalar tensor {key!r} stored with shape {shape}, not [1]")

    def mapping(self, node: list[Any], path: str | None) -> None:
        well_formed = len(node) == 2 and isinstance(node[1], list)
        for pair in node[1] if well_formed else []:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                self.problems.append(f"d node at {_where(path)} has a bad item")
                continue
            self.walk(pair[1], _child(path, pair[0]))
        if not well_formed:
            self.problems.append(f"d node at {_where(path)} must hold a list of pairs")

    def sequence(self, node: list[Any], path: str | None) -> None:
        if not (len(node) == 2 and isinstance(node[1], list)):
            self.problems.append(f"{node[0]} node at {_where(path)} must hold a list")
            return
        for i, child in enumerate(node[1]):
            self.walk(child, _child(path, i))


def tree_problems(tree: Any, entries: dict[str, dict[str, Any]]) -> list[str]:
    """Tags, key paths, scalar storage and the empty-frame tensor (WIRE-TREE/SCALAR/EMPTY)."""
    walker = _TreeWalk(entries)
    walker.walk(tree, None)
    problems, used = walker.problems, walker.used
    if not used:
        if EMPTY_KEY not in entries:
            problems.append("a frame without tensors must carry the __dss_empty__ tensor")
        elif entries[EMPTY_KEY].get("dtype") != "U8" or entries[EMPTY_KEY].get("shape") != [1]:
            problems.append("__dss_empty__ must be a 1-element uint8 tensor")
    extra = set(entries) - set(used) - {EMPTY_KEY}
    if extra:
        problems.append(f"header tensors not named by the tree: {sorted(extra)[:5]}")
    return problems


def tensor_dtypes(view: FrameView) -> set[str]:
    return {str(info.get("dtype")) for info in view.entries.values()}


# --- building by hand ----------------------------------------------------------------------


@dataclass(frozen=True)
class RawTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    data: bytes


def build_frame(
    tree: Any,
    tensors: Sequence[RawTensor] = (),
    op: dict[str, Any] | None = None,
    *,
    version: str = WIRE_VERSION,
    header_len: int | None = None,
    raw_dss: str | None = None,
) -> bytes:
    """A frame with exactly these parts; ``header_len`` pads the header with spaces."""
    meta: dict[str, str] = {
        "dss": raw_dss
        if raw_dss is not None
        else json.dumps({"v": version, "tree": tree}, separators=(",", ":"))
    }
    if op is not None:
        meta["op"] = json.dumps(op, separators=(",", ":"))
    header: dict[str, Any] = {"__metadata__": meta}
    offset = 0
    items = list(tensors) or [RawTensor(EMPTY_KEY, "U8", (1,), b"\x00")]
    for t in items:
        header[t.name] = {
            "dtype": t.dtype,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(t.data)],
        }
        offset += len(t.data)
    text = json.dumps(header, separators=(",", ":")).encode()
    if header_len is None:
        header_len = len(text) + (-(8 + len(text)) % 8)
    if header_len < len(text):
        raise ValueError(f"header needs {len(text)} bytes, asked for {header_len}")
    text += b" " * (header_len - len(text))
    return struct.pack("<Q", len(text)) + text + b"".join(t.data for t in items)


def chunk_header_len(kind: str, desc: dict[str, Any], n: int) -> int:
    """The unpadded header length of a chunk carrying ``n`` payload bytes."""
    frame = build_chunk(kind, desc, b"\x00" * 0, _n_override=n)
    return struct.unpack_from("<Q", frame, 0)[0]


def build_chunk(
    kind: str,
    desc: dict[str, Any],
    payload: bytes,
    *,
    header_len: int | None = None,
    _n_override: int | None = None,
) -> bytes:
    """A chunk frame ``{payload: U8[n]}`` whose op metadata is ``{<kind>_chunk: desc}``."""
    n = len(payload) if _n_override is None else _n_override
    key = {"request": REQUEST_CHUNK_KEY, "result": RESULT_CHUNK_KEY}.get(kind, kind)
    tree = ["d", [["payload", ["t", "payload"]]]]
    meta = {
        "dss": json.dumps({"v": WIRE_VERSION, "tree": tree}, separators=(",", ":")),
        "op": json.dumps({key: desc}, separators=(",", ":")),
    }
    header = {
        "__metadata__": meta,
        "payload": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]},
    }
    text = json.dumps(header, separators=(",", ":")).encode()
    if _n_override is not None:
        return struct.pack("<Q", len(text)) + text
    if header_len is None:
        header_len = len(text) + (-(8 + len(text)) % 8)
    if header_len < len(text):
        raise ValueError(f"chunk header needs {len(text)} bytes, asked for {header_len}")
    text += b" " * (header_len - len(text))
    return struct.pack("<Q", len(text)) + text + payload


def descriptor(
    frame: bytes,
    idx: int,
    total: int,
    group: str | None,
    operation: str | None = "forward-backward",
) -> dict[str, Any]:
    desc: dict[str, Any] = {
        "chunk_idx": idx,
        "total_chunks": total,
        "frame_sha256": hashlib.sha256(frame).hexdigest(),
        "frame_size_bytes": len(frame),
    }
    if operation is not None:
        desc["operation"] = operation
    if group is not None:
        desc["chunk_group_id"] = group
    return desc


def split(
    frame: bytes,
    total: int,
    group: str | None,
    operation: str | None = "forward-backward",
    kind: str = "request",
) -> list[bytes]:
    """Cut ``frame`` into ``total`` near-equal hand-built chunks."""
    size = -(-len(frame) // total) if frame else 0
    out = []
    for i in range(total):
        part = frame[i * size : (i + 1) * size]
        out.append(build_chunk(kind, descriptor(frame, i, total, group, operation), part))
    return out


def chunk_parts(chunk: bytes) -> tuple[dict[str, Any], bytes]:
    """(op metadata, payload bytes) of a chunk frame."""
    view = inspect_frame(chunk)
    if view is None or "payload" not in view.entries:
        raise ValueError("not a chunk frame")
    begin, end = view.entries["payload"]["data_offsets"]
    start = 8 + view.header_len
    return (view.op if isinstance(view.op, dict) else {}), chunk[start + begin : start + end]


def with_payload(chunk: bytes, payload: bytes) -> bytes:
    """The same chunk (same descriptor) carrying other payload bytes."""
    op, _ = chunk_parts(chunk)
    ((kind_key, desc),) = op.items()
    return build_chunk(kind_key, desc, payload)


def with_descriptor(chunk: bytes, **changes: Any) -> bytes:
    """The same chunk with descriptor fields changed (``None`` removes a field)."""
    op, payload = chunk_parts(chunk)
    ((kind_key, desc),) = op.items()
    desc = dict(desc)
    for k, v in changes.items():
        if v is None:
            desc.pop(k, None)
        else:
            desc[k] = v
    return build_chunk(kind_key, desc, payload)


def as_kind(chunk: bytes, kind_key: str) -> bytes:
    """The same chunk re-labelled (``result_chunk`` sent as a request chunk)."""
    op, payload = chunk_parts(chunk)
    ((_, desc),) = op.items()
    return build_chunk(kind_key, dict(desc), payload)
