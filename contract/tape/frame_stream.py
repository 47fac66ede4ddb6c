"""Reading request frames as they stream past a recorder: their skeleton, never their bytes.

:class:`FrameScan` follows one request body: it parses the DSSST1 header once its bytes have
arrived, then, tensor by tensor, keeps each tensor's value range (lowest and highest finite
value, whether NaN or infinities occur), and at the end offers the frame's skeleton
(``contract.tape.skeleton``). A request chunk (spec §9) carries a slice of a frame; its
payload is handed to the :class:`ChunkFrames` registry, which scans the frame of each chunk
group across its chunks in order, so a chunk can later be rebuilt from the frame's skeleton
and its own offset in the frame. Memory follows the headers, never the tensor bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from typing import Any

from contract.tape.skeleton import Tensor, build_skeleton
from contract.wire.chunks import REQUEST_CHUNK_KEY
from contract.wire.frame import DTYPE_ITEMSIZE
from contract.wire.limits import MAX_HEADER_BYTES

#: numpy dtype of each code (BF16 is read as its 16 bits and widened to float32).
_NUMPY = {"I64": "<i8", "F64": "<f8", "F32": "<f4", "I32": "<i4", "BF16": "<u2", "F16": "<f2",
          "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "u1"}
_FLOATS = frozenset({"F64", "F32", "F16", "BF16"})
#: Chunk groups whose frames a recorder follows at once (the oldest is forgotten first).
OPEN_GROUPS = 16


class ValueRange:
    """The lowest and highest value of a tensor's bytes as they arrive, and its non-finite kinds."""

    __slots__ = ("code", "lo", "hi", "nonfinite", "_carry")

    def __init__(self, code: str) -> None:
        self.code = code
        self.lo: float | int | None = None
        self.hi: float | int | None = None
        self.nonfinite: set[str] = set()
        self._carry = b""

    def add(self, data: memoryview) -> None:
        size = DTYPE_ITEMSIZE[self.code]
        if self._carry:  # finish the item the previous piece cut
            need = size - len(self._carry)
            self._carry += bytes(data[:need])
            data = data[need:]
            if len(self._carry) == size:
                self._values(memoryview(self._carry))
                self._carry = b""
        whole = len(data) - len(data) % size
        if whole:
            self._values(data[:whole])
        if whole < len(data):
            self._carry += bytes(data[whole:])

    def _values(self, data: memoryview) -> None:
        if self.code in ("U8", "BOOL") and len(data) <= 64:
            self._merge(min(data), max(data))
            return
        import numpy as np

        arr = np.frombuffer(data, dtype=_NUMPY[self.code])
        if self.code == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        lo, hi = arr.min(), arr.max()
        if self.code in _FLOATS and not (math.isfinite(lo) and math.isfinite(hi)):
            self.nonfinite |= {name for name, hit in (("nan", np.isnan(arr).any()),
                                                       ("inf", (arr == np.inf).any()),
                                                       ("-inf", (arr == -np.inf).any())) if hit}
            finite = arr[np.isfinite(arr)]
            if not finite.size:
                return
            lo, hi = finite.min(), finite.max()
        cast = float if self.code in _FLOATS else int
        self._merge(cast(lo), cast(hi))

    def _merge(self, lo: float | int, hi: float | int) -> None:
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.lo is None else {"v": [self.lo, self.hi]}
        if self.nonfinite:
            out["nf"] = sorted(self.nonfinite)
        return out


def _entries(header: dict[str, Any]) -> list[tuple[str, str, list[int], int, int]]:
    """``(name, code, shape, begin, end)`` of each tensor entry, by data offset; ValueError
    unless they tile the data section."""
    out = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise ValueError("not a tensor entry")
        code, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        if code not in DTYPE_ITEMSIZE or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError("not a tensor entry")
        if end - begin != DTYPE_ITEMSIZE[code] * math.prod(shape):
            raise ValueError("offsets do not match the shape")
        out.append((name, code, list(shape), begin, end))
    out.sort(key=lambda e: (e[3], e[4]))
    position = 0
    for entry in out:
        if entry[3] != position:
            raise ValueError("offsets overlap or leave gaps")
        position = entry[4]
    return out


class FrameScan:
    """One request body read as a DSSST1 frame as it arrives (``failed`` says why it is not one)."""

    def __init__(self, chunks: ChunkFrames | None = None, header_cap: int = MAX_HEADER_BYTES) -> None:
        self._chunks = chunks
        self._cap = header_cap
        self._head = bytearray()
        self._n: int | None = None
        self.header: bytes | None = None
        self.meta: dict[str, Any] = {}
        self.data_len = 0
        self._at = 0
        self._tensors: list[tuple[str, str, list[int], int, int, ValueRange]] = []
        self._next = 0
        self.piece: ChunkPiece | None = None
        self.failed: str | None = None
        self._closed = False

    @property
    def complete(self) -> bool:
        return self.failed is None and self.header is not None and self._at == self.data_len

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self.failed is not None or self._closed:
            return
        rest: memoryview | None = memoryview(data).cast("B")
        if self.header is None and rest is not None:
            rest = self._take_header(rest)
        if rest is not None and len(rest):
            self._data(rest)

    def _take_header(self, mv: memoryview) -> memoryview | None:
        if self._n is None:
            take = 8 - len(self._head)
            self._head += mv[:take]
            mv = mv[take:]
            if len(self._head) < 8:
                return None
            self._n = int.from_bytes(self._head, "little")
            if not 2 <= self._n <= self._cap:
                self.failed = "no DSSST1 header length"
                return None
        take = 8 + self._n - len(self._head)
        self._head += mv[:take]
        mv = mv[take:]
        if len(self._head) < 8 + self._n:
            return None
        self._parse(bytes(self._head))
        self._head = bytearray()
        return None if self.failed else mv

    def _parse(self, raw: bytes) -> None:
        try:
            header = json.loads(raw[8:].decode("utf-8"))
            meta = header.pop("__metadata__", {})
            if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
                raise ValueError("bad metadata")
            entries = _entries(header)
            op = json.loads(meta["op"]) if "op" in meta else {}
        except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
            self.failed = "not a DSSST1 header"
            return
        self.header, self.meta = raw, meta
        self.data_len = entries[-1][4] if entries else 0
        desc = op.get(REQUEST_CHUNK_KEY) if isinstance(op, dict) else None
        if isinstance(desc, dict) and self._chunks is not None and [e[0] for e in entries] == ["payload"]:
            self.piece = self._chunks.piece(desc, self.data_len)
        else:
            self._tensors = [(*e, ValueRange(e[1])) for e in entries]

    def _data(self, mv: memoryview) -> None:
        start, end = self._at, self._at + len(mv)
        if end > self.data_len:
            self.failed = "bytes past the frame's data"
            return
        if self.piece is not None:
            self.piece.feed(mv)
        while self._next < len(self._tensors):
            _, _, _, begin, stop, values = self._tensors[self._next]
            if begin >= end:
                break
            lo, hi = max(begin, start), min(stop, end)
            if hi > lo:
                values.add(mv[lo - start:hi - start])
            if stop > end:
                break
            self._next += 1
        self._at = end

    def close(self) -> None:
        """The body has ended (whole or not): a chunk's place in its frame is settled."""
        if self._closed:
            return
        self._closed = True
        if self.piece is not None and self._chunks is not None:
            self._chunks.finish(self.piece, self.complete)

    def skeleton(self) -> dict[str, Any] | None:
        """The frame's skeleton once it is complete (None for a chunk or no frame)."""
        if not self.complete or self.piece is not None or self.header is None:
            return None
        tensors = [Tensor(name, code, shape, values.stats()) for name, code, shape, _, _, values in self._tensors]
        return build_skeleton(self.meta, tensors, self.header)


class ChunkPiece:
    """One chunk's payload on its way into its group's frame scan."""

    def __init__(self, key: tuple[str, str], idx: int, payload: int, offset: int | None,
                 group: _Group | None) -> None:
        self.key, self.idx, self.payload, self.offset = key, idx, payload, offset
        self.group = group  # set while this chunk feeds the group's scan
        self.received = 0

    def feed(self, mv: memoryview) -> None:
        if self.group is not None and self.group.scan is not None:
            self.group.scan.feed(mv)
            self.group.sha.update(mv)
        self.received += len(mv)


class _Group:
    def __init__(self, size: int) -> None:
        self.size = size
        self.scan: FrameScan | None = FrameScan()
        self.sha = hashlib.sha256()
        self.next = 0
        self.fed = 0
        self.offsets: dict[int, int] = {}
        self.busy = self.broken = self.needed = self.emitted = self.complete = False
        self.verified = False


class ChunkFrames:
    """The frames of the request chunk groups a recorder sees, each scanned across its chunks
    in order (a chunk out of order, or cut, leaves its group without a skeleton)."""

    def __init__(self, keep: int = OPEN_GROUPS) -> None:
        self._groups: OrderedDict[tuple[str, str], _Group] = OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()

    def piece(self, desc: dict[str, Any], payload: int) -> ChunkPiece:
        key = (str(desc.get("chunk_group_id", "")), str(desc.get("frame_sha256", "")))
        idx, size = desc.get("chunk_idx"), desc.get("frame_size_bytes")
        if not isinstance(idx, int) or not isinstance(size, int):
            return ChunkPiece(key, -1, payload, None, None)
        with self._lock:
            g = self._groups.get(key)
            if g is not None and idx == 0 and g.broken and not g.busy:
                g = None  # the group starts again from its first chunk
            if g is not None and (g.complete or g.busy or idx != g.next or g.broken):
                g.broken |= not g.complete and idx > g.next
                return ChunkPiece(key, idx, payload, g.offsets.get(idx), None)
            if g is None:
                if idx != 0:
                    return ChunkPiece(key, idx, payload, None, None)
                g = self._groups[key] = _Group(size)
                while len(self._groups) > self._keep:
                    self._groups.popitem(last=False)
            self._groups.move_to_end(key)
            g.busy = True
            return ChunkPiece(key, idx, payload, g.fed, g)

    def finish(self, piece: ChunkPiece, whole: bool) -> None:
        g = piece.group
        if g is None:
            return
        with self._lock:
            g.busy = False
            if not whole or piece.received != piece.payload or g.scan is None:
                g.broken = True
                return
            g.offsets[piece.idx] = g.fed
            g.next += 1
            g.fed += piece.received
            if g.fed >= g.size:
                g.complete = True
                g.verified = g.sha.hexdigest() == piece.key[1] and g.fed == g.size

    def need(self, piece: ChunkPiece) -> None:
        """A chunk of this group is taped without its bytes: its frame's line must be written."""
        with self._lock:
            g = self._groups.get(piece.key)
            if g is not None:
                g.needed = True

    def ready(self) -> list[dict[str, Any]]:
        """``frame`` lines of the complete frames some chunk needs, each returned once (the
        skeletons are made outside the lock: a big header takes a while)."""
        with self._lock:
            due = [(key, g) for key, g in self._groups.items() if g.complete and g.needed and not g.emitted]
            for _, g in due:
                g.emitted = True
        out = []
        for (group, sha), g in due:
            skeleton = g.scan.skeleton() if g.scan is not None else None
            g.scan = None
            out.append({"kind": "frame", "group": group, "frame_sha256": sha, "bytes": g.size,
                        "verified": g.verified, "skeleton": skeleton})
        return out
