"""The tree codec: a Python object <-> the DSSST1 tree plus its tensors (spec §9.2).

Tree nodes: ``["t", key]``, ``["t", key, {"scalar": true}]``, ``["j", value]``,
``["d", [[k, node], ...]]``, ``["l", [...]]``, ``["u", [...]]``. ``dss`` =
``{"v":"DSSST1","tree":<node>}`` and ``op`` = the caller's metadata, both compact JSON
with ``allow_nan=False``; dict key order is kept (never sorted); ``op`` is omitted when the
metadata is ``None`` or empty. Decisions taken here:

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
unreferenced ``__dss_empty__`` marker is dropped), BOOL bytes must be 0 or 1.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from contract.wire.basics import WireError, byte_view, json_text
from contract.wire.frame import (
    EMPTY_TENSOR_KEY,
    METADATA_KEY,
    ROOT_TENSOR_KEY,
    WIRE_VERSION,
    Frame,
    FrameParts,
    Spec,
    frame_parts,
    parse_frame,
)
from contract.wire.limits import DEFAULT_LIMITS, WireLimits
from contract.wire.torch_io import make_tensor, tensor_spec

_PLAIN_LEAVES = frozenset({str, int, bool, type(None)})


def _child_path(path: str | None, key: object) -> str:
    return str(key) if path is None else f"{path}.{key}"


def _bad_float(value: float, path: str | None) -> WireError:
    return WireError(f"non-finite float {value!r} at {path or '<root>'} is not valid JSON")


class _Encoder:
    """Walks a Python object once, producing the tree and the tensors to write."""

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.specs: list[Spec] = []
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
        spec, scalar = tensor_spec(x, key)
        self.names.add(key)
        self.specs.append(spec)
        return ["t", key, {"scalar": True}] if scalar else ["t", key]


def _op_text(metadata: dict[str, Any] | None) -> str | None:
    """The ``op`` metadata string: None for no/empty metadata; plain JSON objects only."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise WireError(f"metadata must be a dict, not {type(metadata).__name__}")
    if not metadata:
        return None
    meta_encoder = _Encoder(DEFAULT_LIMITS.max_depth)
    meta_encoder.tensor_type = None  # tensors in metadata are refused as unknown types
    try:
        _, pure = meta_encoder.encode(metadata, None, 1)
    except RecursionError:
        raise WireError("metadata nests too deeply") from None
    if not pure:
        raise WireError("metadata must be plain JSON (tuples would come back as lists)")
    return json_text(metadata, "metadata")


def dumps_parts(obj: Any, metadata: dict[str, Any] | None = None) -> FrameParts:
    """The frame ``dumps`` writes, as its parts: the header, then views of the tensors' own
    bytes (nothing copied). The tensors must not change until the parts are written or sent."""
    encoder = _Encoder(DEFAULT_LIMITS.max_depth)
    try:
        tree, _ = encoder.encode(obj, None, 1)
    except RecursionError:
        raise WireError("object nests too deeply to encode") from None
    op = _op_text(metadata)
    dss = json_text({"v": WIRE_VERSION, "tree": tree}, "frame tree")
    specs = encoder.specs or [Spec(EMPTY_TENSOR_KEY, "U8", [1], 1, b"\x00")]
    return frame_parts(dss, op, specs)


def dumps(obj: Any, metadata: dict[str, Any] | None = None) -> bytes:
    """Encode ``obj`` (nested dict/list/tuple/JSON scalars/tensors) as one DSSST1 frame.

    ``metadata`` (JSON object) is stored under the header's ``__metadata__["op"]``. The
    frame is one buffer sized up front; each tensor byte is copied into it once.
    """
    return dumps_parts(obj, metadata).to_bytes()


class _Decoder:
    """Rebuilds the Python object from a parsed frame, materialising tensors on the way."""

    def __init__(self, frame: Frame, max_depth: int, share: bool = False) -> None:
        self.entries = frame.entries
        self.data = frame.data
        self.max_depth = max_depth
        self.share = share
        self.used: set[str] = set()

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
        return make_tensor(self.data[begin:end], code, shape, key, share=self.share)


def _loads(data: Any, limits: WireLimits | None, share: bool = False) -> tuple[Any, dict[str, Any]]:
    limits = DEFAULT_LIMITS if limits is None else limits
    frame = parse_frame(byte_view(data), limits)
    decoder = _Decoder(frame, limits.max_depth, share)
    try:
        obj = decoder.node(frame.tree, 1)
    except RecursionError:
        raise WireError("frame tree nests too deeply") from None
    unused = frame.entries.keys() - decoder.used - {EMPTY_TENSOR_KEY}
    if unused:
        raise WireError(f"frame holds tensors the tree never names: {sorted(unused)[:5]}")
    return obj, frame.op or {}


def loads(data: bytes | bytearray | memoryview, *, limits: WireLimits | None = None,
          share: bool = False) -> Any:
    """Decode a DSSST1 frame; garbage of any kind raises WireError.

    ``share``: the caller hands ``data`` over (it must not change it afterwards), so tensors
    may be views of it instead of copies: a writable buffer whose tensors sit at addresses
    aligned to their item size (as every safetensors writer lays them out) decodes with no
    second copy of its bytes."""
    return _loads(data, limits, share)[0]


def loads_with_metadata(
    data: bytes | bytearray | memoryview, *, limits: WireLimits | None = None
) -> tuple[Any, dict[str, Any]]:
    """Decode a frame and return ``(obj, op metadata or {})``."""
    return _loads(data, limits)
