"""The client's requests, judged exchange by exchange by the rules the fake's gate enforces.

Each rule is the fake's own where it has one: the auth headers (:func:`contract.auth.auth_header_problem`,
which the fake's ``authenticate`` calls), a chunk's frame and descriptor
(:func:`contract.wire.read_chunk_head`), the descriptor facts and the chunk-group machine
(:mod:`fake_gs.chunking.machine`: :func:`descriptor_refusal` and :func:`decide`, fed what the
judge saw of each group). A request that breaks a rule is booked on the **client**; when the
server then accepted it (a 2xx), the server is booked too, under the same clause.

- AUTH-HEADERS-1 (spec §2.2): a service call without ``Authorization: Bearer`` and the PAT
  token-type header;
- ADDR-CT-4 (spec §2.3): a body whose content type is not the route's;
- ERR-REJECT-1: a JSON body the route's request model refuses;
- CLIENT-CHUNK-1 (spec §9.3): a forward-backward body that is not a chunk;
- CHUNK-FORMAT-1, CHUNK-DESC-1: a request chunk whose frame or descriptor is malformed;
- CHUNK-DESC-2, CG-RESTART-1, CG-CONFLICT-1, CG-MISSING-1: a chunk the group machine refuses;
- CHUNK-VERIFY-1: a group whose chunks' payloads, in order, are not the frame their
  ``frame_sha256`` names (spec §9.3 has each chunk carry the original frame's SHA-256). The
  observer hashes each group's payloads as they pass (:meth:`RequestRules.group_hash`),
  frames up to :data:`HASH_UP_TO` bytes: a bigger frame's chunks pass unhashed, so the
  proxy's cost per byte stays the kernel's (a tape keeps no payloads: not judged there);
- CLIENT-POLL-1 (spec §9.5): a poll of a request whose last page named a ``next_cursor``
  that does not ask that cursor (the pages are drained by cursor; a failed poll is retried
  with the cursor it asked);
- CLIENT-ONCE-1: a call that is not idempotent, sent again (same route, path and body) after
  an ambiguous failure without the Idempotency-Key of its first try (a silent resend).

Caps and budgets are the server's business (a 429 is an answer, not a client fault): the
machine runs with them waived. Groups are remembered per job, route and group id, at most
:data:`GROUPS_KEPT` of them.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from conformance.judge.exchange import Exchange
from conformance.judge.tally import Tally
from contract.auth import AUTHORIZATION_HEADER, TOKEN_TYPE_HEADER, auth_header_problem
from contract.errors import ErrorCode
from contract.idempotency import IDEMPOTENCY_KEY_HEADER, ambiguous_failure
from contract.limits import MAX_BODY_BYTES
from contract.wire import ChunkHead, WireError, read_chunk_head
from fake_gs.chunking import machine as cm
from fake_gs.settings import FakeSettings

AUTH, CONTENT_TYPE, SCHEMA = "AUTH-HEADERS-1", "ADDR-CT-4", "ERR-REJECT-1"
ALWAYS_CHUNKED, CHUNK_FORMAT, CHUNK_DESC = "CLIENT-CHUNK-1", "CHUNK-FORMAT-1", "CHUNK-DESC-1"
SILENT_RESEND, FRAME_HASH, POLL_BY_CURSOR = "CLIENT-ONCE-1", "CHUNK-VERIFY-1", "CLIENT-POLL-1"
#: Frames up to this size are hashed as their chunks pass (the proxy then reads every byte
#: of them; a bigger frame passes socket to socket, its hash unjudged).
HASH_UP_TO = 16 * 1024 * 1024
#: A refusal of the group machine, by its code -> the clause it enforces.
GROUP_CLAUSES: dict[str, str] = {
    ErrorCode.MALFORMED_FRAME.value: "CHUNK-DESC-2",
    ErrorCode.CHUNK_GROUP_RESTART_REQUIRED.value: "CG-RESTART-1",
    ErrorCode.CHUNK_GROUP_CONFLICT.value: "CG-CONFLICT-1",
    ErrorCode.CHUNK_GROUP_MISSING_CHUNKS.value: "CG-MISSING-1",
}
#: Every clause this module judges.
JUDGED: tuple[str, ...] = (AUTH, CONTENT_TYPE, SCHEMA, ALWAYS_CHUNKED, CHUNK_FORMAT, CHUNK_DESC,
                           *dict.fromkeys(GROUP_CLAUSES.values()), FRAME_HASH, POLL_BY_CURSOR, SILENT_RESEND)
#: The side each clause is judged on here: the client's, and the server's too where a 2xx
#: to a request that breaks the rule is booked on the server (``server_too``).
JUDGED_SIDES: dict[str, tuple[str, ...]] = {
    **{cid: ("client",) for cid in JUDGED},
    **{cid: ("client", "server") for cid in (SCHEMA, CHUNK_FORMAT, CHUNK_DESC, *GROUP_CLAUSES.values(), FRAME_HASH)},
}
#: Chunk groups and ambiguous failures remembered (a resend comes within seconds).
GROUPS_KEPT = 4096
#: The machine judges the protocol, not the server's budgets.
_WAIVED = frozenset({cm.CAPS, cm.ACCOUNT_CAPS})


def _model_problem(model: type[BaseModel], data: Any) -> str | None:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[:2]
        return f"{model.__name__}: " + "; ".join(f"{'.'.join(map(str, e['loc']))} {e['msg']}" for e in first)
    return None


class _Bounded(OrderedDict[Any, Any]):
    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > GROUPS_KEPT:
            self.popitem(last=False)


class RequestRules:
    """Judges each request of a stream of exchanges; violations go to ``tally``."""

    def __init__(self, tally: Tally, hash_up_to: int = HASH_UP_TO) -> None:
        self.tally = tally
        self.limits = FakeSettings()
        self.hash_up_to = hash_up_to
        self._groups: _Bounded = _Bounded()
        self._ambiguous: _Bounded = _Bounded()
        #: Per group: the next chunk index to hash and the frame's hash through the ones before.
        self._frames: _Bounded = _Bounded()
        #: Per request: the cursor its last page named.
        self._cursors: _Bounded = _Bounded()

    def judge(self, ex: Exchange) -> None:
        """One exchange, once its answer (or its failure) is known."""
        if ex.route is None:
            return
        self._auth(ex)
        self._content_type(ex)
        if ex.route.chunked:
            self._chunk(ex)
        elif ex.route.request_model is not None and ex.request_json is not None:
            self._schema(ex, ex.route.request_model)
        if ex.name == "get_request":
            self._poll(ex)
        self._resend(ex)

    def group_hash(self, ex: Exchange, head: ChunkHead) -> Any:
        """The frame hash ``ex``'s chunk continues (a hashlib object), as the observer reads the
        chunk's header: a new one for chunk 0, the group's so far for its next chunk; None when
        the frame is too big to hash or the chunk is not the next one hashed (a replay)."""
        desc = head.desc
        if not isinstance(desc.get("frame_size_bytes"), int) or desc["frame_size_bytes"] > self.hash_up_to:
            return None
        if desc.get("chunk_idx") == 0:
            return hashlib.sha256()
        frame = self._frames.get(_group_key(ex, desc))
        return frame[1].copy() if frame is not None and frame[0] == desc.get("chunk_idx") else None

    def _red(self, clause: str, ex: Exchange, why: str, *, server_too: bool = False) -> None:
        self.tally.violation(clause, f"{ex.describe()}: {why}", side="client")
        if server_too and ex.status is not None and 200 <= ex.status < 300:
            self.tally.violation(clause, f"accepted: {ex.describe()}: {why}", side="server")

    def _auth(self, ex: Exchange) -> None:
        self.tally.saw(AUTH)
        problem = auth_header_problem(ex.header(AUTHORIZATION_HEADER), ex.header(TOKEN_TYPE_HEADER))
        if problem is not None:
            self._red(AUTH, ex, problem)

    def _content_type(self, ex: Exchange) -> None:
        assert ex.route is not None
        want = ex.route.content_type
        if want is None or not (ex.request_body or ex.chunk_desc is not None):
            return
        self.tally.saw(CONTENT_TYPE)
        got = (ex.header("Content-Type") or "").split(";")[0].strip().lower()
        if got != want:
            self._red(CONTENT_TYPE, ex, f"content type {got or 'none'!r}, the route takes {want}")

    def _schema(self, ex: Exchange, model: type[BaseModel]) -> None:
        self.tally.saw(SCHEMA)
        problem = _model_problem(model, ex.request_json)
        if problem is not None:
            self._red(SCHEMA, ex, problem, server_too=True)

    def _chunk(self, ex: Exchange) -> None:
        assert ex.route is not None
        desc, payload = ex.chunk_desc, ex.chunk_payload
        if desc is None:
            if not ex.request_body:
                return
            try:
                head = read_chunk_head(ex.request_body)
            except WireError as exc:
                clause = CHUNK_DESC if "descriptor" in str(exc) else CHUNK_FORMAT
                self.tally.saw(clause)
                self._red(clause, ex, str(exc), server_too=True)
                return
            if head is None:
                if ex.name == "forward_backward":
                    self.tally.saw(ALWAYS_CHUNKED)
                    self._red(ALWAYS_CHUNKED, ex, "a plain frame, not a request chunk")
                return
            if head.kind != "request":
                self.tally.saw(CHUNK_FORMAT)
                self._red(CHUNK_FORMAT, ex, "a result chunk sent as a request", server_too=True)
                return
            desc, payload = head.desc, head.payload_len
        for clause in (CHUNK_FORMAT, CHUNK_DESC):
            self.tally.saw(clause)
        if ex.name == "forward_backward":
            self.tally.saw(ALWAYS_CHUNKED)
        self._group(ex, desc, payload)

    def _group(self, ex: Exchange, desc: Mapping[str, Any], payload: int) -> None:
        """The chunk through the fake's group machine, with what was seen of its group."""
        assert ex.route is not None
        self._hash_kept(ex)
        refusal = cm.descriptor_refusal(desc, payload, MAX_BODY_BYTES)
        chunk = cm.Chunk(ex.params.get("job_id", ""), ex.route.name, desc, payload)
        key = _group_key(ex, desc)
        group: cm.GroupState | None = self._groups.get(key)
        decision = refusal if refusal is not None else cm.decide(chunk, group, self.limits, waived=_WAIVED)
        for clause in dict.fromkeys(GROUP_CLAUSES.values()):
            self.tally.saw(clause)
        if isinstance(decision, cm.Refuse):
            clause = GROUP_CLAUSES.get(decision.code.value, "CHUNK-DESC-2")
            self._red(clause, ex, decision.message, server_too=True)
            return
        self._frame_hash(ex, key, desc)
        if ex.status is None or not 200 <= ex.status < 300:
            return  # refused or lost: the group is where it was
        if group is None and isinstance(decision, (cm.Ack, cm.Execute)) and decision.new_range_size:
            group = cm.GroupState(chunk.route, int(desc["total_chunks"]), str(desc["frame_sha256"]),
                                  int(desc["frame_size_bytes"]), desc.get("operation"), decision.new_range_size)
            self._groups.put(key, group)
        if group is None:
            return
        if isinstance(decision, (cm.Ack, cm.Execute)) and decision.keep:
            group.received.add(chunk.position[1])
        if isinstance(decision, cm.Execute):
            group.status = cm.DONE

    def _hash_kept(self, ex: Exchange) -> None:
        """A chunk kept whole (a tape's, a small upload's) is hashed here, as the proxy hashes
        one in passing."""
        if ex.frame_hash is not None or not ex.request_body or len(ex.request_body) != ex.sent:
            return
        try:
            head = read_chunk_head(ex.request_body)
        except WireError:
            return
        if head is not None and head.kind == "request":
            running = self.group_hash(ex, head)
            if running is not None:
                running.update(memoryview(ex.request_body)[head.payload_start:head.payload_start + head.payload_len])
                ex.frame_hash = running

    def _frame_hash(self, ex: Exchange, key: tuple[str, str, str], desc: Mapping[str, Any]) -> None:
        """CHUNK-VERIFY-1: the last chunk hashed ends the frame; its hash is the one every
        chunk named (judged whatever the answer: a mismatch is the client's; accepted, the
        server's too). An accepted chunk before it moves the group's hash on."""
        if ex.frame_hash is None:
            return
        idx, total = int(desc["chunk_idx"]), int(desc["total_chunks"])
        if idx < total - 1:
            if ex.status is not None and 200 <= ex.status < 300:
                self._frames.put(key, (idx + 1, ex.frame_hash))
            return
        self._frames.pop(key, None)
        self.tally.saw(FRAME_HASH)
        got, named = ex.frame_hash.hexdigest(), str(desc.get("frame_sha256"))
        if got != named:
            self._red(FRAME_HASH, ex, f"the group's {total} chunk(s) reassemble to a frame of sha256 "
                                      f"{got[:16]}..., its chunks name {named[:16]}...", server_too=True)

    def _poll(self, ex: Exchange) -> None:
        """CLIENT-POLL-1: a request whose last page named a next_cursor is polled at that cursor."""
        rid = ex.params.get("request_id", "")
        asked = ex.query.get("cursor") or None
        due = self._cursors.pop(rid, None)
        if due is not None:
            self.tally.saw(POLL_BY_CURSOR)
            if asked != due:
                self._red(POLL_BY_CURSOR, ex, f"request {rid}'s last page named next_cursor {due!r}; "
                                              f"this poll asked {asked!r}")
        page = ex.json if ex.status is not None and 200 <= ex.status < 300 and ex.body_whole else None
        if isinstance(page, Mapping) and page.get("next_cursor"):
            self._cursors.put(rid, str(page["next_cursor"]))
        elif due is not None and asked == due and not isinstance(page, Mapping):
            self._cursors.put(rid, due)  # that poll failed: it is retried at the same cursor

    def _resend(self, ex: Exchange) -> None:
        """CLIENT-ONCE-1: the same unsafe call after an ambiguous failure, without its key."""
        assert ex.route is not None
        if ex.method != "POST" or ex.route.chunked or not ex.body_sha256:
            return
        if ex.route.call_idempotency(operation_type=ex.operation_type) != "unsafe":
            return
        same = (ex.url.split("?")[0], ex.body_sha256)
        key = ex.header(IDEMPOTENCY_KEY_HEADER)
        failed = self._ambiguous.pop(same, None)
        if failed is not None:
            self.tally.saw(SILENT_RESEND)
            first_key, first = failed
            if key is None or key != first_key:
                self._red(SILENT_RESEND, ex, f"resent after an ambiguous failure ({first}) "
                                             "without the first try's Idempotency-Key")
        if ambiguous_failure(ex.status, ex.headers.get("Retry-After")):
            self._ambiguous.put(same, (key, ex.describe()))


def _group_key(ex: Exchange, desc: Mapping[str, Any]) -> tuple[str, str, str]:
    """A chunk group as the judge remembers it: job, route and group id."""
    return ex.params.get("job_id", ""), ex.name, str(desc.get("chunk_group_id"))
