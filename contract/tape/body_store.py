"""What a tape keeps of each request body, so that a replay can send every request again.

In order of preference, a request body is kept as:

1. nothing more than its outline, when that says it all (exact JSON, one repeated byte);
2. its bytes inline (zlib, base64: ``z64``), when they compress to :data:`KEEP_BYTES` or less;
3. its bytes out of line (``--record-bodies bytes``, the default): one ``blob`` line per
   distinct body (content-addressed by sha256, zlib, base64), written before the first
   exchange that sent it, so a run that sends the same 60 MiB chunk twice stores it once;
   the exchange's body says ``"blob": true``. Blobs count against the tape's budget;
4. its skeleton (``"rebuild"``): a frame as its tree, dtypes, shapes and value ranges, a
   request chunk as its own header, its offset in its frame and the frame's skeleton (one
   ``frame`` line per chunk group); a replay rebuilds the frame with seeded values. This is
   what ``--record-bodies outline`` keeps of every frame too big to keep inline, and what
   any frame gets once the budget is spent (with one warning saying so);
5. nothing (``not_kept`` says why): a body that is no frame, once the budget is spent.

A body holding a known credential (or a credential-looking key or text) is never kept as
bytes (``withheld``). A scrub pass over a finished tape treats ``blob`` lines as kept
bytes: :func:`contract.tape.blob_bytes` reads one, and dropping it means marking the
exchanges whose body names its sha256 ``withheld``.
"""

from __future__ import annotations

import base64
import json
import threading
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

from contract.limits import MiB
from contract.tape.frame_stream import ChunkFrames, FrameScan
from contract.tape.outline import BodySink, mask, scrub_text

#: A request body is kept inline when it compresses to at most this many bytes.
KEEP_BYTES = 96 * 1024
#: What a recorder keeps of bodies too big to keep inline: their bytes, or their skeleton.
BODY_MODES = ("bytes", "outline")
DEFAULT_BODY_MODE = BODY_MODES[0]
#: Default size budget of a tape's blobs (their base64 text), MiB.
BUDGET_MIB = 512


def z64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _text_of(packed: bytes) -> str:
    return zlib.decompress(packed).decode("utf-8", "replace")


class BodyStore:
    """The request-body policy of one tape: inline bytes, blobs within a budget, skeletons."""

    def __init__(self, mode: str = DEFAULT_BODY_MODE, budget_mib: float = BUDGET_MIB, keep_bytes: int = KEEP_BYTES,
                 warn: Callable[[str], None] | None = None, path: str = "") -> None:
        if mode not in BODY_MODES:
            raise ValueError(f"record bodies as {' or '.join(BODY_MODES)}, not {mode!r}")
        self.mode = mode
        self.budget = int(budget_mib * MiB)
        self.keep_bytes = keep_bytes
        self.spent = 0
        self.blobs: set[str] = set()
        self.counts: Counter[str] = Counter()
        self.over_budget_at: int | None = None
        self.chunks = ChunkFrames()
        self._warn = warn or (lambda message: None)
        self._path = path
        self._lock = threading.Lock()

    def sink(self, secrets: tuple[str, ...]) -> BodySink:
        """A sink for one request body, compressing no further than the budget allows."""
        room = max(self.budget - self.spent, 0) * 3 // 4
        return BodySink(squeeze_cap=self.keep_bytes, pack_cap=room, scan=FrameScan(self.chunks),
                        secrets=secrets, lean=self.mode == "outline")

    def keep(self, sink: BodySink, body: dict[str, Any] | None, seq: int,
             withheld: Callable[[dict[str, Any], bytes | None, bool], str | None]) -> list[dict[str, Any]]:
        """Decide what ``body`` (the sink's outline) keeps; the lines to write before it."""
        scan = sink.scan
        sink.end()
        lines: list[dict[str, Any]] = []
        if body is not None:
            self._describe_chunk(scan, body)
            lines = self._keep(sink, body, seq, withheld)
        return lines + self.chunks.ready()

    def _describe_chunk(self, scan: FrameScan | None, body: dict[str, Any]) -> None:
        if scan is not None and scan.piece is not None and "chunk" not in body:
            desc = json.loads(scan.meta["op"])["request_chunk"]
            body["chunk"] = {"kind": "request", "descriptor": mask(desc), "payload_bytes": scan.data_len}

    def _keep(self, sink: BodySink, body: dict[str, Any], seq: int,
              withheld: Callable[[dict[str, Any], bytes | None, bool], str | None]) -> list[dict[str, Any]]:
        place = self._chunk_place(sink.scan)
        if place is not None:
            # Every chunk of a group says where it sits in its frame: once one of them is
            # rebuilt, the replay rebuilds them all (their frame_sha256 must agree).
            body["rebuild"] = {"chunk": place}
        if body.get("exact") or "fill" in body:
            self.counts["outline"] += 1
            return []
        packed = sink.packed()
        inline = packed is not None and len(packed) <= self.keep_bytes
        why = withheld(body, packed, sink.secret_seen) if packed is not None else None
        if why:
            body["withheld"] = why
            self.counts["withheld"] += 1
            if self._rebuilds(sink.scan, body) and not self._names_a_secret(body, sink):
                self.counts["rebuilt"] += 1
            else:
                body.pop("rebuild", None)
            return []
        if inline and packed is not None:
            body["z64"] = z64(packed)
            self.counts["inline"] += 1
            return []
        if self.mode == "bytes" and (line := self._blob(body, packed, seq)) is not None:
            return line
        if sink.overflowed:
            self._over_budget(seq, sink.size)
        if self._rebuilds(sink.scan, body):
            self.counts["rebuilt"] += 1
            return []
        if (line := self._blob(body, packed, seq)) is not None:
            return line
        body["not_kept"] = self._not_kept_reason()
        self.counts["not_kept"] += 1
        return []

    @staticmethod
    def _names_a_secret(body: dict[str, Any], sink: BodySink) -> bool:
        """A skeleton keeps the tree's JSON leaves: one that names a secret is no rebuild."""
        text = json.dumps(body.get("rebuild")).encode()
        return any(secret in text for secret in sink.secrets)

    def _not_kept_reason(self) -> str:
        if self.over_budget_at is not None or self.mode == "bytes":
            return f"the tape's {self.budget / MiB:g} MiB budget for request bodies was spent"
        return ("recorded with --record-bodies outline, and its skeleton does not regenerate it "
                "(no DSSST1 frame, or one the tape cannot describe)")

    def _blob(self, body: dict[str, Any], packed: bytes | None, seq: int) -> list[dict[str, Any]] | None:
        """Store the body out of line if it is stored already or the budget allows (the
        blob line when it is new); None when it is not stored."""
        sha = body["sha256"]
        with self._lock:
            if sha in self.blobs:
                self.counts["stored"] += 1
                body["blob"] = True
                return []
            if packed is None:
                return None
            cost = 4 * -(-len(packed) // 3)
            if self.spent + cost > self.budget:
                self._over_budget(seq, cost)
                return None
            self.spent += cost
            self.blobs.add(sha)
            self.counts["stored"] += 1
        body["blob"] = True
        return [{"kind": "blob", "sha256": sha, "bytes": body["bytes"], "z64": z64(packed)}]

    def _over_budget(self, seq: int, cost: int) -> None:
        if self.over_budget_at is not None:
            return
        self.over_budget_at = seq
        self._warn(
            f"parity tape {self._path}: its {self.budget / MiB:g} MiB budget for request bodies is "
            f"spent at exchange #{seq} (a body of {cost / MiB:.1f} MiB more); from there on a body too "
            "big to keep inline is kept as its skeleton (a frame is rebuilt with seeded values on "
            "replay) or not at all. Record with a larger --record-budget-mib, or with "
            "--record-bodies outline to keep no tensor bytes.")

    def _chunk_place(self, scan: FrameScan | None) -> dict[str, Any] | None:
        """Where a request chunk sits in its frame: its own header, its frame, its offset."""
        piece = scan.piece if scan is not None else None
        if scan is None or piece is None or piece.offset is None or not scan.complete or scan.header is None:
            return None
        return {"head": z64(zlib.compress(scan.header)), "group": piece.key[0],
                "frame_sha256": piece.key[1], "offset": piece.offset, "payload": scan.data_len}

    def _rebuilds(self, scan: FrameScan | None, body: dict[str, Any]) -> bool:
        """Whether a replay can rebuild this body without its bytes (its skeleton is kept)."""
        if scan is None or not scan.complete:
            return False
        if scan.piece is not None:
            if "rebuild" not in body:
                return False
            self.chunks.need(scan.piece)
            return True
        # A complete scan has read the frame to its end and the skeleton regenerates its
        # header, so the rebuilt frame has the recorded size.
        skeleton = scan.skeleton()
        if skeleton is not None:
            body["rebuild"] = {"frame": skeleton}
        return skeleton is not None

    def summary(self) -> dict[str, Any]:
        """What the tape kept of its request bodies (the ``end`` line's ``bodies``)."""
        return {"mode": self.mode, **{k: self.counts[k] for k in
                                      ("outline", "inline", "stored", "rebuilt", "withheld", "not_kept")},
                "blobs": len(self.blobs), "blob_bytes": self.spent, "budget_bytes": self.budget,
                **({"over_budget_at": self.over_budget_at} if self.over_budget_at is not None else {})}


def text_withheld(tokens: tuple[str, ...], body: dict[str, Any], packed: bytes | None,
                  secret_seen: bool) -> str | None:
    """Why kept bytes must be withheld (a credential in them), or None."""
    if body.pop("masked", False) or secret_seen:
        return "the bytes held a credential"
    textual = any(form in body for form in ("json", "text")) or packed is not None and len(packed) <= KEEP_BYTES
    if packed is not None and textual:
        text = _text_of(packed)
        if any(t in text for t in tokens) or scrub_text(text) != text:
            return "the bytes held a credential"
    return None
