"""Chunks: one frame cut into DSSST1 chunk frames and put back together (spec §9.3).

A chunk is a DSSST1 frame with tree ``{"payload": uint8[n]}`` and ``op``
``{"request_chunk"|"result_chunk": {chunk_idx, total_chunks, frame_sha256,
frame_size_bytes, operation?, chunk_group_id (request only)}}`` (that key order).
Reassembly accepts chunks in any order (``chunk_idx`` is explicit) and refuses everything
else spec §9.3 refuses. Splitting hashes the frame once and copies each byte once.
"""

from __future__ import annotations

import bisect
import itertools
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

from contract.wire.basics import WireError, as_bytes, byte_view, json_text, sha256_hex
from contract.wire.frame import FrameParts, Spec, frame_prefix, parse_frame
from contract.wire.limits import CHUNK_HEADER_ALLOWANCE, DEFAULT_LIMITS

REQUEST_CHUNK_KEY = "request_chunk"
RESULT_CHUNK_KEY = "result_chunk"

_CHUNK_KEYS = {"request": REQUEST_CHUNK_KEY, "result": RESULT_CHUNK_KEY}
_CHUNK_KINDS = {v: k for k, v in _CHUNK_KEYS.items()}
_CHUNK_TREE = ["d", [["payload", ["t", "payload"]]]]
_CHUNK_DSS = '{"v":"DSSST1","tree":["d",[["payload",["t","payload"]]]]}'
_HEX = frozenset("0123456789abcdef")
#: Descriptor fields every chunk of one frame must agree on.
_SHARED_FIELDS = ("total_chunks", "frame_sha256", "frame_size_bytes", "chunk_group_id", "operation")


def _chunk_key(kind: Any) -> str:
    if kind not in _CHUNK_KEYS:
        raise WireError(f"chunk kind must be 'request' or 'result', not {kind!r}")
    return _CHUNK_KEYS[kind]


# --------------------------------------------------------------------------- splitting


class _Cut(NamedTuple):
    """What every chunk of one split shares: kind key, frame size and hash, labels, cap."""

    key: str
    size: int
    digest: str
    operation: str | None
    group: str | None
    max_bytes: int


def _descriptor(cut: _Cut, idx: int, total: int) -> dict[str, Any]:
    """Chunk ``idx`` of ``total``'s descriptor, in the pinned key order."""
    desc: dict[str, Any] = {
        "chunk_idx": idx,
        "total_chunks": total,
        "frame_sha256": cut.digest,
        "frame_size_bytes": cut.size,
    }
    if cut.operation is not None:
        desc["operation"] = cut.operation
    if cut.group is not None:
        desc["chunk_group_id"] = cut.group
    return desc


def _chunk_prefix(cut: _Cut, idx: int, total: int, n: int) -> bytes:
    """The header bytes of a chunk carrying ``n`` payload bytes."""
    op = json_text({cut.key: _descriptor(cut, idx, total)}, "chunk descriptor")
    return frame_prefix(_CHUNK_DSS, op, [Spec("payload", "U8", [n], n, b"")])


def _all_fit(cut: _Cut, range_size: int) -> bool:
    """Do all chunks cut at ``range_size`` fit ``max_bytes``? A header only grows with its
    chunk's index (padding keeps that order), so the last full chunk and the final one are
    the two to check; no chunk's header is made until it is sent."""
    if cut.max_bytes <= 0:
        return True
    total = max(1, -(-cut.size // range_size))
    for idx in {max(0, total - 2), total - 1}:
        n = min(range_size, cut.size - idx * range_size)
        if cut.max_bytes < len(_chunk_prefix(cut, idx, total, n)) + n:
            return False
    return True


def _first_range(max_bytes: int) -> int:
    """The range size to try first: ``max_bytes - 8192`` (8 KiB for the chunk's own header),
    or half of a ``max_bytes`` too small for that allowance; ranges halve until chunks fit."""
    if max_bytes > CHUNK_HEADER_ALLOWANCE:
        return max_bytes - CHUNK_HEADER_ALLOWANCE
    return max(1, max_bytes // 2)


def _fit_range(cut: _Cut) -> int:
    """The range size whose chunks all fit ``max_bytes``."""
    range_size = max(cut.size, 1) if cut.max_bytes <= 0 else _first_range(cut.max_bytes)
    while not _all_fit(cut, range_size):
        range_size //= 2
        if range_size < 1:
            raise WireError(f"a chunk header alone exceeds max_bytes={cut.max_bytes}")
    return range_size


def _group_label(key: str, chunk_group_id: str | None) -> str | None:
    """The chunk group a request split goes under (a fresh uuid4 if unnamed); None for results."""
    if key != REQUEST_CHUNK_KEY:
        return None
    group = str(uuid.uuid4()) if chunk_group_id is None else chunk_group_id
    if not isinstance(group, str):
        raise WireError("chunk_group_id must be a string")
    return group


def chunk_span(idx: int, total: int, range_size: int, frame_size: int) -> tuple[int, int]:
    """The frame bytes chunk ``idx`` of ``total`` carries (spec §9.3): equal ranges of
    ``range_size`` bytes in order, the last chunk taking the rest of the frame."""
    start = idx * range_size
    return start, frame_size if idx == total - 1 else start + range_size


class ChunkPlan:
    """How one frame travels: as is (``plain``), or as chunks each made of its chunk header
    followed by views of the frame's own bytes. Nothing is joined: a sender writes
    :meth:`pieces` one after another, so the frame exists once however it is cut. A chunk's
    header is made when it is first asked for (:meth:`prefix`), so a sender can make the
    next one while the current chunk is on the wire."""

    def __init__(self, parts: Sequence[memoryview], cut: _Cut | None, range_size: int) -> None:
        self.parts = tuple(parts)
        self.cut = cut
        self.range_size = range_size
        self.size = sum(len(p) for p in self.parts)
        self.total = 1 if cut is None else max(1, -(-self.size // range_size))
        self._starts = list(itertools.accumulate((len(p) for p in self.parts), initial=0))
        self._prefixes: dict[int, bytes] = {}

    @property
    def plain(self) -> bool:
        """The frame goes as one plain body, without a chunk header."""
        return self.cut is None

    def __len__(self) -> int:
        return self.total

    def span(self, idx: int) -> tuple[int, int]:
        """The frame bytes chunk ``idx`` carries."""
        if self.cut is None:
            return 0, self.size
        return chunk_span(idx, self.total, self.range_size, self.size)

    def prefix(self, idx: int) -> bytes:
        """Chunk ``idx``'s header (made once, on first use)."""
        if self.cut is None:
            return b""
        found = self._prefixes.get(idx)
        if found is None:
            start, end = self.span(idx)
            found = self._prefixes[idx] = _chunk_prefix(self.cut, idx, self.total, end - start)
        return found

    def body_size(self, idx: int) -> int:
        start, end = self.span(idx)
        return len(self.prefix(idx)) + end - start

    def _views(self, begin: int, end: int) -> list[memoryview]:
        """Views of frame bytes ``[begin, end)``, one per part they fall in."""
        out: list[memoryview] = []
        i = bisect.bisect_right(self._starts, begin) - 1
        while begin < end:
            base, part = self._starts[i], self.parts[i]
            stop = min(end, base + len(part))
            if stop > begin:
                out.append(part[begin - base : stop - base])
            begin, i = max(begin, stop), i + 1
        return out

    def pieces(self, idx: int) -> list[memoryview]:
        """Chunk ``idx`` (or the plain frame) as the byte ranges to send in order."""
        if self.cut is None:
            return list(self.parts)
        return [memoryview(self.prefix(idx)), *self._views(*self.span(idx))]

    def chunk(self, idx: int) -> bytes:
        """Chunk ``idx`` as one ``bytes`` (a copy: for callers that need a single object)."""
        return b"".join(self.pieces(idx))


def _frame_parts(frame: Any) -> tuple[memoryview, ...]:
    if isinstance(frame, FrameParts):
        return frame.parts
    return (byte_view(frame),)


def plan_chunks(
    frame: Any,
    kind: str,
    operation: str | None = None,
    max_bytes: int = 0,
    chunk_group_id: str | None = None,
    force_chunk: bool = False,
) -> ChunkPlan:
    """How ``frame`` (bytes-like, or the :class:`FrameParts` of ``dumps_parts``) is cut into
    DSSST1 chunk frames of at most ``max_bytes`` each (spec §9.3); see :func:`encode_byte_chunks`."""
    key = _chunk_key(kind)
    if not isinstance(max_bytes, int):
        raise WireError(f"max_bytes must be an int, not {type(max_bytes).__name__}")
    parts = _frame_parts(frame)
    size = sum(len(p) for p in parts)
    if not force_chunk and (max_bytes <= 0 or size <= max_bytes):
        return ChunkPlan(parts, None, max(size, 1))
    if operation is not None and not isinstance(operation, str):
        raise WireError("operation must be a string")
    group = _group_label(key, chunk_group_id)
    cut = _Cut(key, size, sha256_hex(parts), operation, group, max_bytes)
    return ChunkPlan(parts, cut, _fit_range(cut))


def encode_byte_chunks(
    frame: Any,
    kind: str,
    operation: str | None = None,
    max_bytes: int = 0,
    chunk_group_id: str | None = None,
    force_chunk: bool = False,
) -> list[bytes]:
    """Split ``frame`` into DSSST1 chunk frames of at most ``max_bytes`` each (spec §9.3).

    A frame that fits (or any frame when ``max_bytes <= 0``) goes as is unless
    ``force_chunk``. ``chunk_group_id`` is used for request chunks only (a fresh uuid4 when
    None). Any ``max_bytes`` that holds one chunk header plus one payload byte works:
    ranges start at ``max_bytes - 8192`` (half of a smaller ``max_bytes``) and halve until
    every chunk fits. The frame is hashed once and each byte copied once; senders that can
    write a chunk in pieces use :func:`plan_chunks` and copy nothing.
    """
    plan = plan_chunks(frame, kind, operation, max_bytes, chunk_group_id, force_chunk)
    if plan.plain and not isinstance(frame, FrameParts):
        return [as_bytes(frame)]
    return [plan.chunk(idx) for idx in range(len(plan))]


def min_chunk_bytes(frame_size: int = 2**40, kind: str = "result", operation: str | None = None) -> int:
    """The smallest ``max_bytes`` that can carry a frame of up to ``frame_size`` bytes in
    1-byte ranges (the worst-case chunk header plus one payload byte)."""
    key = _chunk_key(kind)
    group = str(uuid.uuid4()) if key == REQUEST_CHUNK_KEY else None
    cut = _Cut(key, frame_size, "0" * 64, operation, group, 0)
    return len(_chunk_prefix(cut, frame_size - 1, frame_size, 1)) + 1


#: The smallest result chunk size that carries any result frame (up to 1 TiB) in 1-byte
#: ranges: a server's result chunk size may not go below it.
MIN_RESULT_CHUNK_BYTES = min_chunk_bytes(2**40, "result")


# --------------------------------------------------------------------------- reading


class _Chunk(NamedTuple):
    kind: str
    desc: dict[str, Any]
    payload: memoryview
    #: Where the payload starts in the chunk frame, and its declared length.
    start: int
    length: int


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


def _parse_chunk(data: Any, what: str = "chunk", head_only: bool = False) -> _Chunk | None:
    """Parse a chunk frame (None for a plain DSSST1 frame); WireError on garbage.
    ``head_only``: ``data`` holds the header and maybe part of the payload."""
    mv = byte_view(data, what)
    frame = parse_frame(mv, DEFAULT_LIMITS, head_only=head_only)
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
    data_start = len(mv) - len(frame.data)
    return _Chunk(kind, desc, frame.data[entry.begin : entry.end], data_start + entry.begin,
                  entry.end - entry.begin)


class ChunkHead(NamedTuple):
    """A chunk known from its header alone: its payload is still arriving."""

    kind: str
    desc: dict[str, Any]
    #: Where the payload starts in the chunk frame, and how many bytes it declares.
    payload_start: int
    payload_len: int


def frame_head_size(data: Any) -> int | None:
    """The bytes a frame's header takes (length field included): what a reader must hold
    before :func:`read_chunk_head` can parse it; None while fewer than 8 bytes are in."""
    mv = byte_view(data)
    if len(mv) < 8:
        return None
    return 8 + int.from_bytes(mv[:8], "little")


def read_chunk_head(head: Any) -> ChunkHead | None:
    """The chunk whose frame starts with ``head`` (at least :func:`frame_head_size` bytes),
    checked as :func:`split_chunk` checks a whole one; None for a plain frame. The caller
    checks that exactly ``payload_len`` payload bytes follow the header."""
    parsed = _parse_chunk(head, head_only=True)
    return None if parsed is None else ChunkHead(parsed.kind, parsed.desc, parsed.start, parsed.length)


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


# --------------------------------------------------------------------------- reassembly


def _missing_indices(seen: set[int], total: int, limit: int = 20) -> list[int]:
    """The first ``limit`` indices in range(total) absent from ``seen`` (total may be huge)."""
    missing: list[int] = []
    idx = 0
    while idx < total and len(missing) < limit:
        if idx not in seen:
            missing.append(idx)
        idx += 1
    return missing


def _parse_all(chunks: Sequence[bytes | bytearray], kind: str | None) -> list[_Chunk | None]:
    """Parse every item (None for a plain frame), naming the index of the first bad one."""
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
    return parsed


def _one_group(parsed: list[_Chunk | None], kind: str | None) -> list[_Chunk]:
    """The chunks, once checked to be all chunks, of one kind, describing one frame."""
    plain = [i for i, p in enumerate(parsed) if p is None]
    if plain:
        raise WireError(f"item {plain[0]} is a plain frame without chunk metadata among chunks")
    items = [p for p in parsed if p is not None]
    if len({p.kind for p in items}) > 1:
        raise WireError("chunks mix request and result kinds")
    if kind is not None and items[0].kind != kind:
        raise WireError(f"expected {kind} chunks, got {items[0].kind} chunks")
    first = items[0].desc
    for field in _SHARED_FIELDS:
        for i, p in enumerate(items):
            if p.desc.get(field) != first.get(field):
                raise WireError(f"chunk {i} disagrees with chunk 0 on {field}")
    return items


def _payloads_by_index(items: list[_Chunk], total: int) -> dict[int, memoryview]:
    """Each chunk's payload under its ``chunk_idx``: every index once, none out of range."""
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
    return by_idx


def _joined_frame(by_idx: dict[int, memoryview], desc: dict[str, Any]) -> bytes:
    """The payloads in index order, checked against the frame's size and sha256."""
    size = sum(len(p) for p in by_idx.values())
    if size != desc["frame_size_bytes"]:
        raise WireError(
            f"chunks carry {size} bytes but frame_size_bytes is {desc['frame_size_bytes']}"
        )
    frame = b"".join(by_idx[i] for i in range(desc["total_chunks"]))
    if sha256_hex((frame,)) != desc["frame_sha256"]:
        raise WireError("reassembled frame does not match frame_sha256")
    return frame


def decode_byte_chunks(chunks: Sequence[bytes | bytearray], kind: str | None = None) -> bytes:
    """Reassemble and verify the frame carried by ``chunks`` (any order; spec §9.3)."""
    parsed = _parse_all(chunks, kind)
    if len(parsed) == 1 and parsed[0] is None:
        return as_bytes(chunks[0])
    items = _one_group(parsed, kind)
    first = items[0].desc
    by_idx = _payloads_by_index(items, first["total_chunks"])
    return _joined_frame(by_idx, first)
