"""What a tape may make its reader do: a tape is untrusted input, read under these bounds.

A tape is a file people download and commit, so every step that turns its text into bytes
or requests is bounded by what a recording can legitimately hold, checked before anything
is allocated or sent (a 976-byte tape saying "1.5 GiB of fill" cost gs-parity 1.5 GiB; a
1 KB skeleton rebuilt to 1.5 GiB; a recorded path of ``@127.0.0.1:OTHER/x`` sent the PAT to
another port). Anything past a bound is a :class:`TapeRefused` naming the tape's line.

One home for the figures: a replayed request body is at most :data:`MAX_REPLAY_BODY_BYTES`
(twice the contract's 60 MiB body limit, so a recorded over-limit probe still replays), a
frame rebuilt for request chunks at most :data:`MAX_REBUILT_FRAME_BYTES`, a line at most
:data:`MAX_LINE_CHARS` characters and :data:`MAX_LINE_VALUES` JSON values, a ``.gz`` tape
at most :data:`MAX_TAPE_INFLATION` times its file size past :data:`INFLATION_FREE_CHARS`,
and a replayed answer at most twice its recorded size plus :data:`ANSWER_MARGIN_BYTES`.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Mapping
from typing import Any

from contract.limits import (
    INFLATION_FREE_BYTES,
    MAX_ANSWER_BYTES,
    MAX_ANSWER_INFLATION,
    MAX_BODY_BYTES,
    MiB,
)
from contract.wire.frame import DTYPE_ITEMSIZE
from contract.wire.limits import DEFAULT_LIMITS

#: Largest request body a replay sends (a recorded 60 MiB + 1 probe of the body limit too).
MAX_REPLAY_BODY_BYTES = 2 * MAX_BODY_BYTES
#: Largest frame a replay rebuilds from its skeleton to cut request chunks from (a bigger
#: recorded frame's chunks are skipped, kind ``bytes``, saying so). Rebuilding costs about
#: three times this at its peak.
MAX_REBUILT_FRAME_BYTES = 128 * MiB
#: Longest tape line: a blob line holds a body of up to :data:`MAX_REPLAY_BODY_BYTES`,
#: zlib-compressed (incompressible bytes grow by a few per mille) and base64-encoded (4/3).
MAX_LINE_CHARS = MAX_REPLAY_BODY_BYTES * 4 // 3 + 2 * MiB
#: Most JSON values one line may hold (counted before parsing: a line of ``[[],[],...]``
#: makes an object of every three characters).
MAX_LINE_VALUES = 1 << 20
#: A ``.gz`` tape may decode to at most this many times its file size, past the free part.
MAX_TAPE_INFLATION = MAX_ANSWER_INFLATION
INFLATION_FREE_CHARS = INFLATION_FREE_BYTES
#: Tree nodes and tensors a skeleton may stand for once its ``$rep`` runs are unfolded, and
#: its deepest nesting (the codec's own tree-depth bound).
MAX_SKELETON_NODES = 1 << 18
MAX_SKELETON_DEPTH = DEFAULT_LIMITS.max_depth
#: A replayed answer may be twice the recorded one plus this; a hostile server's endless
#: answer then costs gs-parity that much, not the client's 1 GiB cap.
ANSWER_MARGIN_BYTES = 8 * MiB
#: Where a request may go: an absolute path under the service prefix, or the fake's own
#: (its admin API and export downloads). The path is appended to the target's base URL.
FAKE_PATHS = "/_fake/"
_UNSAFE_PATH = re.compile(r"[\x00-\x20\x7f\\#]")


class TapeRefused(ValueError):
    """A tape asks for more than a recording can hold, or for a request off the target."""


def where(path: str, line: Mapping[str, Any] | int | None) -> str:
    """``TAPE:LINE`` for messages (the line number read_tape noted on the line)."""
    n = line.get(LINE_KEY) if isinstance(line, Mapping) else line
    return f"{path}:{n}" if n else path


#: The key under which read_tape notes each line's number (never written back to a tape).
LINE_KEY = "_line"


def answer_bytes(recorded: Mapping[str, Any]) -> int:
    """The size of a recorded answer's body (0 when the tape gives none)."""
    body = recorded.get("body")
    size = body.get("bytes", 0) if isinstance(body, Mapping) else 0
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0


def answer_cap(recorded_bytes: int) -> int:
    """Bytes a replay reads of an answer whose recorded size was ``recorded_bytes``."""
    return min(MAX_ANSWER_BYTES, 2 * max(recorded_bytes, 0) + ANSWER_MARGIN_BYTES)


def count_values(text: str) -> int:
    """An upper bound on the JSON values of ``text`` (every value but the first follows a
    comma or opens a container), counted without parsing it."""
    return text.count(",") + text.count("[") + text.count("{") + 1


def request_path_refusal(path: Any, on_prefix: bool) -> str | None:
    """Why a recorded request path must not be sent (None: it may). ``on_prefix``: the path
    is under the service prefix."""
    if not isinstance(path, str):
        return "its recorded path is not a string"
    if not path.startswith("/") or path.startswith("//") or _UNSAFE_PATH.search(path):
        return (f"its recorded path {path[:80]!r} is not an absolute path (it must start with one "
                "'/', with no backslash, space, control character or '#'): it could name another host")
    if not on_prefix and not path.startswith(FAKE_PATHS):
        return f"its recorded path {path[:80]!r} is not a path of the service (under its prefix)"
    return None


def _size(value: Any, what: str, cap: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TapeRefused(f"{what} is not a byte count ({str(value)[:40]!r})")
    if value > cap:
        raise TapeRefused(f"{what} says {value} bytes, more than a replay sends ({cap})")
    return value


def check_body(body: Any) -> None:
    """A recorded request body's declared sizes, before anything is decoded from them."""
    if body is None:
        return
    if not isinstance(body, Mapping):
        raise TapeRefused("the request body is not an object")
    size = _size(body.get("bytes", 0), "the request body", MAX_REPLAY_BODY_BYTES)
    fill = body.get("fill")
    if fill is not None and (isinstance(fill, bool) or not isinstance(fill, int) or not 0 <= fill <= 255):
        raise TapeRefused(f"the request body's fill is not a byte value ({str(fill)[:40]!r})")
    how = body.get("rebuild")
    if isinstance(how, Mapping) and "frame" in how:
        skeleton_size(how["frame"], size)


def inflate(z64: Any, declared: int, what: str) -> bytes:
    """The zlib + base64 bytes a tape holds, never more than the ``declared`` size it gives
    for them (a 1.4 MB zlib stream declaring 100 bytes was inflated to 2 GiB)."""
    if not isinstance(z64, str):
        raise TapeRefused(f"{what}: its kept bytes are not base64 text")
    try:
        packed = base64.b64decode(z64, validate=True)
    except (binascii.Error, ValueError):
        raise TapeRefused(f"{what}: its kept bytes are not base64") from None
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(packed, declared + 1)
    except zlib.error as exc:
        raise TapeRefused(f"{what}: its kept bytes are not zlib ({exc})") from None
    if len(data) > declared or inflater.unconsumed_tail:
        raise TapeRefused(f"{what}: its kept bytes expand past the {declared} bytes it declares; refused "
                          "as a decompression bomb")
    return data


def skeleton_size(skel: Any, cap: int) -> int:
    """The tensor bytes a frame skeleton stands for, counted without unfolding it; TapeRefused
    past ``cap`` bytes, :data:`MAX_SKELETON_NODES` nodes or :data:`MAX_SKELETON_DEPTH` levels
    (a 1 KB skeleton of nested ``$rep`` runs unfolded to gigabytes)."""
    if not isinstance(skel, Mapping):
        raise TapeRefused("a frame skeleton is not an object")
    counter = _Counter(cap)
    if "tree" in skel:
        counter.node(skel["tree"], 1, 0)
    extra = skel.get("extra", [])
    if not isinstance(extra, list):
        raise TapeRefused("a frame skeleton's extra tensors are not a list")
    for item in extra:
        if not isinstance(item, list) or len(item) != 4:
            raise TapeRefused("a frame skeleton lists a malformed tensor")
        counter.tensor(item[1], item[2], 1)
    return counter.bytes


class _Counter:
    def __init__(self, cap: int) -> None:
        self.cap, self.nodes, self.bytes = cap, 0, 0

    def add(self, nodes: int) -> None:
        self.nodes += nodes
        if self.nodes > MAX_SKELETON_NODES:
            raise TapeRefused(f"a frame skeleton stands for more than {MAX_SKELETON_NODES} tree nodes")

    def tensor(self, code: Any, shape: Any, times: int) -> None:
        if code not in DTYPE_ITEMSIZE or not isinstance(shape, list) or len(shape) > DEFAULT_LIMITS.max_depth \
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise TapeRefused("a frame skeleton has a tensor with no valid dtype and shape")
        self.add(times)
        # Dimensions multiply into a huge number before any check would see it: bound as we go.
        size = DTYPE_ITEMSIZE[code]
        for d in shape:
            size *= d
            if size > self.cap:
                break
        self.bytes += size * times
        if self.bytes > self.cap:
            raise TapeRefused(f"a frame skeleton stands for more than {self.cap} bytes of tensors")

    def node(self, node: Any, times: int, depth: int) -> None:
        if depth > MAX_SKELETON_DEPTH:
            raise TapeRefused(f"a frame skeleton nests deeper than {MAX_SKELETON_DEPTH} levels")
        if isinstance(node, Mapping) and "$t" in node:
            self.tensor(node["$t"], node.get("shape"), times)
            return
        if not isinstance(node, list) or len(node) != 2:
            raise TapeRefused("a frame skeleton holds a malformed tree node")
        self.add(times)
        tag, children = node
        if tag == "j":
            return
        if not isinstance(children, list):
            raise TapeRefused("a frame skeleton holds a malformed tree node")
        if tag == "d":
            for pair in children:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise TapeRefused("a frame skeleton holds a malformed dict entry")
                self.node(pair[1], times, depth + 1)
            return
        for item in children:
            repeat = item.get("$rep") if isinstance(item, Mapping) else None
            if repeat is None:
                self.node(item, times, depth + 1)
                continue
            if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
                raise TapeRefused("a frame skeleton repeats a node a number of times that is no count")
            if times * repeat > MAX_SKELETON_NODES:
                raise TapeRefused(f"a frame skeleton stands for more than {MAX_SKELETON_NODES} tree nodes")
            self.node(item.get("node"), times * repeat, depth + 1)


def check_line(line: Mapping[str, Any], on_prefix: Any) -> None:
    """One parsed tape line's declared sizes and request path (``on_prefix(path)``: whether
    a path is under the service prefix); TapeRefused says what is wrong."""
    kind = line.get("kind")
    if kind == "exchange":
        req = line.get("request")
        if not isinstance(req, Mapping) or not isinstance(line.get("response"), Mapping):
            raise TapeRefused("an exchange without its request and response")
        path = req.get("path")
        why = request_path_refusal(path, isinstance(path, str) and bool(on_prefix(path)))
        if why:
            raise TapeRefused(f"exchange #{line.get('seq')}: {why}; refused, nothing of this tape was sent")
        try:
            check_body(req.get("body"))
        except TapeRefused as exc:
            raise TapeRefused(f"exchange #{line.get('seq')}: {exc}") from None
    elif kind == "blob":
        _size(line.get("bytes"), "a blob", MAX_REPLAY_BODY_BYTES)
        if not isinstance(line.get("z64"), str) or not isinstance(line.get("sha256"), str):
            raise TapeRefused("a blob without its sha256 and bytes")
    elif kind == "frame":
        size = line.get("bytes")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise TapeRefused("a frame line without its byte count")
        if line.get("skeleton") is not None and size <= MAX_REBUILT_FRAME_BYTES:
            skeleton_size(line["skeleton"], size)
