"""Request bodies for a replay: the bytes a tape kept (inline or as a blob), or a frame
rebuilt from its skeleton (``contract.tape.skeleton``) with seeded values.

A rebuilt frame has the recorded header byte for byte (tree, names, dtypes, shapes, op
metadata) and, per tensor, values drawn from the recorded range: integers uniformly between
the lowest and highest recorded value, floats uniformly between the lowest and highest
finite one, a constant tensor exactly, and a NaN or an infinity where the recording had one.
The seed is the recorded body's hash, so every replay sends the same bytes. A chunk is its
recorded header (with the rebuilt frame's sha256 in place of the recorded one, when that
named the recorded frame) and its slice of the rebuilt frame.
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from conformance.parity.targets import Skip
from contract import tape
from contract.tape import bounds
from contract.tape.skeleton import Tensor, skeleton_tensors
from contract.wire import DTYPE_ITEMSIZE

#: Elements generated at a time (bounds the replay's memory on a 60 MiB tensor).
_BLOCK = 1 << 20
_INTS = {"I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "u1"}
_FLOATS = {"F64": "<f8", "F32": "<f4", "F16": "<f2"}
_SPECIAL = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _block(t: Tensor, rng: Any, n: int) -> Any:
    """``n`` seeded values of tensor ``t``'s dtype within its recorded range (a numpy array)."""
    import numpy as np

    lo, hi = t.stats.get("v", [0, 0])
    if t.code in _INTS:
        if lo == hi:
            return np.full(n, lo, dtype=_INTS[t.code])
        return rng.integers(lo, hi, size=n, endpoint=True, dtype=_INTS[t.code])
    if lo == hi:
        x = np.full(n, lo, dtype=np.float64)
    else:
        u = rng.random(n)
        x = np.clip(lo * (1 - u) + hi * u, lo, hi)
    if t.code == "BF16":
        f32 = x.astype(np.float32)
        return (f32.view(np.uint32) >> 16).astype(np.uint16)  # truncation keeps the range
    return np.clip(x.astype(_FLOATS[t.code]), lo, hi)


def _nonfinite(t: Tensor, out: Any, n: int) -> None:
    """Put the recorded NaN and infinities at the first places (all of them if nothing was finite)."""
    import numpy as np

    kinds = [_SPECIAL[k] for k in t.stats.get("nf", [])][:3]
    if not kinds:
        return
    values = np.array(kinds[:n], dtype=np.float32 if t.code == "BF16" else _FLOATS[t.code])
    if "v" not in t.stats:
        values = np.resize(values, n)
    if t.code == "BF16":
        values = (values.view(np.uint32) >> 16).astype(np.uint16)
    out[: len(values)] = values


@functools.lru_cache(maxsize=256)
def _one(code: str, value: float | int) -> bytes:
    import numpy as np

    dtype = _INTS.get(code) or _FLOATS.get(code, "<f4")
    item = np.array([value], dtype=dtype)
    return (item.view(np.uint32) >> 16).astype("<u2").tobytes() if code == "BF16" else item.tobytes()


def tensor_bytes(t: Tensor, rng: Any) -> bytes:
    """The seeded bytes of one tensor of a skeleton."""
    import numpy as np

    n = t.nbytes // DTYPE_ITEMSIZE[t.code]
    if not n:
        return b""
    lo, hi = t.stats.get("v", [None, None])
    if lo is not None and lo == hi and "nf" not in t.stats:  # a constant: exactly as recorded
        return _one(t.code, lo) * n
    dtype = "<u2" if t.code == "BF16" else _INTS.get(t.code) or _FLOATS[t.code]
    out = np.empty(n, dtype=dtype)
    for start in range(0, n, _BLOCK):
        stop = min(start + _BLOCK, n)
        out[start:stop] = _block(t, rng, stop - start) if "v" in t.stats else 0
    _nonfinite(t, out, n)
    return out.tobytes()


def rebuild_frame(skeleton: dict[str, Any], seed: str, declared: int) -> bytes:
    """The frame a skeleton describes, with values seeded by ``seed``; TapeRefused unless it
    has the ``declared`` size (checked before a tensor byte is made: its size was bounded when
    the tape was read, ``contract.tape.bounds``)."""
    import numpy as np

    bounds.skeleton_size(skeleton, declared)
    prefix, tensors = skeleton_tensors(skeleton)
    size = len(prefix) + sum(t.nbytes for t in tensors)
    if size != declared:
        raise bounds.TapeRefused(f"the frame its skeleton describes has {size} bytes, the recorded one {declared}")
    rng = np.random.default_rng(_seed(seed))
    return b"".join([prefix, *(tensor_bytes(t, rng) for t in tensors)])


class Bodies:
    """Every request body of one tape, for sending: kept bytes, blobs, rebuilt frames."""

    def __init__(self, lines: Iterable[dict[str, Any]]) -> None:
        self.blobs: dict[str, dict[str, Any]] = {}
        self.frames: dict[tuple[str, str], dict[str, Any]] = {}
        for line in lines:
            if line["kind"] == "blob":
                self.blobs[line["sha256"]] = line
            elif line["kind"] == "frame":
                self.frames[(line["group"], line["frame_sha256"])] = line
        self._inner: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        #: How many bodies this replay rebuilt from a skeleton.
        self.rebuilt = 0

    def kept(self, body: dict[str, Any]) -> bytes | None:
        """The bytes the tape kept (inline or as a blob), None when it kept none."""
        return tape.raw_body(body, self.blobs)

    def must_rebuild(self, body: dict[str, Any]) -> bool:
        """A chunk of a group some chunk of which is rebuilt (then all are: their frame hash
        must agree), or a frame the tape kept as its skeleton only."""
        how = body.get("rebuild") or {}
        if "chunk" in how:
            return (how["chunk"]["group"], how["chunk"]["frame_sha256"]) in self.frames
        return "frame" in how

    def rebuild(self, body: dict[str, Any]) -> bytes:
        """The body rebuilt from its skeleton; Skip when the tape holds too little for it."""
        how = body["rebuild"]
        data = (self._chunk(how["chunk"], body["bytes"]) if "chunk" in how
                else rebuild_frame(how["frame"], body["sha256"], body["bytes"]))
        if len(data) != body["bytes"]:
            raise Skip(f"the rebuilt request body has {len(data)} bytes, the recorded one {body['bytes']}",
                       kind="bytes")
        self.rebuilt += 1
        return data

    def _chunk(self, how: dict[str, Any], declared: int) -> bytes:
        key = (how["group"], how["frame_sha256"])
        frame = self.frames.get(key)
        if frame is None or frame.get("skeleton") is None:
            raise Skip("a request chunk kept as its place in a frame the tape could not describe "
                       "(its group's chunks were not all seen in order)", kind="bytes")
        if frame["bytes"] > bounds.MAX_REBUILT_FRAME_BYTES:
            raise Skip(f"a request chunk of a {frame['bytes']}-byte frame (line {frame.get(bounds.LINE_KEY)}), "
                       f"more than a replay rebuilds ({bounds.MAX_REBUILT_FRAME_BYTES} bytes)", kind="bytes")
        inner = self._inner_frame(key, frame)
        head = bounds.inflate(how["head"], declared, "a request chunk's header")
        if frame.get("verified"):
            head = head.replace(key[1].encode(), hashlib.sha256(inner).hexdigest().encode())
        return head + inner[how["offset"]:how["offset"] + how["payload"]]

    def _inner_frame(self, key: tuple[str, str], frame: dict[str, Any]) -> bytes:
        if key not in self._inner:
            self._inner[key] = rebuild_frame(frame["skeleton"], key[1], frame["bytes"])
            while len(self._inner) > 2:
                self._inner.popitem(last=False)
        return self._inner[key]
