"""The request chunk-group protocol (spec §9.3, §6.1) as one pure state machine.

Given what is known of a chunk's group, the chunk's descriptor, facts about its payload
and the server's limits, :func:`decide` answers what happens to the chunk: ``Ack`` (kept,
progress answered), ``Execute`` (the final chunk: reassemble and run once), ``Replay``
(the final chunk of a group that already ran: its original execution) or ``Refuse`` (a
contract error). Nothing here touches HTTP, asyncio, the store or a clock, so every rule
is tested on plain values; the intake (``fake_gs/chunking/intake.py``) gathers the facts
under the store lock and carries the decision out.

``Reclaim`` (the server's budgets hold a new group once room is taken back from accounts
over their fair share) asks the intake to free that room and decide again.

A rule that may be waived has a name (:data:`RESTART`, :data:`CAPS`, ...); the rules in
force name the ones they waive and the decisions they transform in ``fake_gs/chunking/hooks.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from contract.errors import ErrorCode, detail_entry
from contract.wire import chunk_span
from fake_gs.chunking import shares
from fake_gs.chunking.stream import descriptor_problem

if TYPE_CHECKING:  # the machine reads only the chunk caps of the fake's settings
    from fake_gs.settings import FakeSettings as Limits

#: A chunk group's own states (the fake's bookkeeping, not the API's request states):
#: FAILED is a group whose execution was refused.
OPEN, FINALIZING, DONE, FAILED = "open", "finalizing", "done", "failed"

#: Rules that may be waived, by name.
RESTART = "restart"  # a first-seen group starts at chunk 0 (CG-RESTART-1)
CAPS = "caps"  # open groups and buffered bytes are capped (LIMIT-GROUPS-1)
ACCOUNT_CAPS = "account-caps"  # ... per account too, and server budgets shared fairly (LIMIT-ACCOUNT-1)
MISSING = "missing"  # a final chunk with chunks missing is refused (CG-MISSING-1)
RULES = frozenset({RESTART, CAPS, ACCOUNT_CAPS, MISSING})

#: The most missing chunk indices a refusal names.
MISSING_NAMED = 20


@dataclass
class GroupState:
    """What the machine reads of a known group: the terms its first chunk set, its status
    and the chunks in (``fake_gs.chunking.groups.ChunkGroup`` adds the bytes and the bookkeeping)."""

    route: str
    total: int
    frame_sha256: str
    frame_size: int
    operation: str | None
    #: Every chunk but the last spans this many frame bytes (judged from the first chunk).
    range_size: int
    status: str = OPEN
    received: set[int] = field(default_factory=set)


class Chunk(NamedTuple):
    """One request chunk as it arrived: its descriptor and what is known of its payload."""

    job_id: str
    route: str
    desc: Mapping[str, Any]
    payload_len: int
    #: The group already holds this index with other bytes (compared by the caller).
    differs_from_stored: bool = False

    @property
    def position(self) -> tuple[str, int, int]:
        """``(chunk_group_id, chunk_idx, total_chunks)``."""
        desc = self.desc
        return str(desc["chunk_group_id"]), int(desc["chunk_idx"]), int(desc["total_chunks"])

    @property
    def final(self) -> bool:
        _, idx, total = self.position
        return idx == total - 1


@dataclass(frozen=True)
class Load:
    """Open chunk groups and the bytes they reserve (each one's declared frame size)."""

    open_groups: int = 0
    reserved: int = 0


@dataclass(frozen=True)
class Usage:
    """Chunk-group load before a new group opens: of its job, its account (``me``), the
    server, and every account's over the server (``accounts``: for the fair shares)."""

    job: Load = Load()
    account: Load = Load()
    server_reserved: int = 0
    server_open: int = 0
    accounts: Mapping[str, Load] = field(default_factory=dict)
    me: str = ""


@dataclass(frozen=True)
class Refuse:
    """Answer the contract error; nothing is kept."""

    code: ErrorCode
    message: str
    detail: tuple[dict[str, Any], ...] = ()
    #: The chunk reached its known group before it was refused (it counts as activity).
    touches_group: bool = False


@dataclass(frozen=True)
class Ack:
    """A non-final chunk (or a repeat of one): keep it if new, answer progress (202)."""

    keep: bool
    #: Set when the group is new: open it with this chunk range size and record it.
    new_range_size: int | None = None
    #: Bent only: the progress answer carries a request id (CG-NONFINAL-1).
    leak_request_id: bool = False


@dataclass(frozen=True)
class Execute:
    """The final chunk of an open group: keep it, verify the frame, run it exactly once."""

    keep: bool
    new_range_size: int | None = None
    #: Chunks still missing (only non-empty when the MISSING rule is waived).
    missing: tuple[int, ...] = ()
    verify_sha: bool = True
    release_bytes: bool = True
    frame_limits: bool = True
    #: Keep the decoded frame so a replay can run it again (bent only).
    keep_decoded: bool = False


@dataclass(frozen=True)
class Reclaim:
    """A new group the server's budgets hold once this much is freed from accounts over
    their fair share (their least recently touched open groups); then decide again."""

    bytes: int = 0
    groups: int = 0


@dataclass(frozen=True)
class Replay:
    """The final chunk of a group that already ran: the original execution's request."""

    #: Bent only: run the frame again instead (CG-IDEM-1).
    execute_again: bool = False
    #: Bent only, with ``execute_again``: answer the original request all the same, so
    #: only the re-run's effect (the next step's micro-batch count) shows it.
    quietly: bool = False


Decision = Ack | Execute | Replay | Refuse | Reclaim
NO_USAGE = Usage()


def _malformed(message: str) -> Refuse:
    return Refuse(ErrorCode.MALFORMED_FRAME, message)


def descriptor_refusal(desc: Mapping[str, Any], payload_len: int, max_body: int) -> Refuse | None:
    """Descriptor facts the codec does not check: index range and sizes that add up
    (:func:`fake_gs.chunking.stream.descriptor_problem`, which the intake asks at the door)."""
    problem = descriptor_problem(desc, payload_len, max_body)
    return None if problem is None else _malformed(problem)


def first_range_size(desc: Mapping[str, Any], payload_len: int) -> int | Refuse:
    """The equal range size a group's chunks use, judged from its first chunk."""
    idx, total, size = desc["chunk_idx"], desc["total_chunks"], desc["frame_size_bytes"]
    if total == 1:
        return max(size, 1)
    if idx < total - 1:
        if payload_len <= 0 or not (total - 1) * payload_len < size <= total * payload_len:
            return _malformed(f"chunk sizes do not add up: {total} chunks of {payload_len} bytes "
                             f"cannot make {size} bytes")
        return payload_len
    # Only reachable when a group may start at its last chunk (RESTART waived): infer R.
    return max(1, -(-(size - payload_len) // (total - 1)))


def conflict_field(group: GroupState, route: str, desc: Mapping[str, Any]) -> str | None:
    """The descriptor field a chunk disagrees with its group on, if any."""
    if group.route != route:
        return "route"
    checks = (
        ("frame_sha256", group.frame_sha256),
        ("total_chunks", group.total),
        ("frame_size_bytes", group.frame_size),
        ("operation", group.operation),
    )
    for name, value in checks:
        if desc.get(name) != value:
            return name
    return None


def first_missing(received: Set[int], total: int, limit: int = MISSING_NAMED) -> list[int]:
    """The first ``limit`` chunk indices not received yet."""
    out: list[int] = []
    for idx in range(total):
        if idx not in received:
            out.append(idx)
            if len(out) >= limit:
                break
    return out


def _load_refusal(who: str, load: Load, max_open: int, max_bytes: int, size: int) -> Refuse | None:
    """One scope's caps (a job's, an account's): open groups, then reserved bytes."""
    if load.open_groups >= max_open:
        return Refuse(ErrorCode.CHUNK_GROUP_LIMIT, f"{who} already has {load.open_groups} open chunk groups "
                      f"(the cap is {max_open}); finish or abandon one first")
    if load.reserved + size > max_bytes:
        return Refuse(ErrorCode.BUFFER_LIMIT, f"{who} cannot buffer {size} more bytes: {load.reserved} are "
                      f"buffered and the cap is {max_bytes}")
    return None


def _server_budget(what: str, held: Mapping[str, int], total: int, mine: int, asked: int, cap: int,
                   me: str, shared: bool) -> Refuse | int | None:
    """One server-wide budget (LIMIT-ACCOUNT-1): None if ``asked`` fits, how much to reclaim
    from accounts over their fair share if the asker is within its own, else a refusal."""
    if total + asked <= cap:
        return None
    share = shares.fair_share(cap, held, me)
    if shared and mine + asked <= share and shares.over_share(held, me, cap):
        return total + asked - cap
    told = f"; this account's share while others upload is {share}" if shared else ""
    return Refuse(ErrorCode.CHUNK_GROUP_LIMIT, f"the server is {what} (the cap is {cap}{told}); retry later")


def server_refusal(size: int, limits: Limits, usage: Usage, shared: bool = True) -> Refuse | Reclaim | None:
    """The server-wide budgets of a new group: reserved bytes and open groups, each shared
    fairly between accounts (``shared`` False: first come, first served)."""
    accounts = usage.accounts
    found = (
        _server_budget(f"buffering {usage.server_reserved} chunk bytes", {a: u.reserved for a, u in accounts.items()},
                       usage.server_reserved, usage.account.reserved, size, limits.max_buffered_bytes_total,
                       usage.me, shared),
        _server_budget(f"holding {usage.server_open} open chunk groups", {a: u.open_groups for a, u in accounts.items()},
                       usage.server_open, usage.account.open_groups, 1, limits.max_open_groups_total, usage.me, shared),
    )
    wanted: list[int] = []
    for verdict in found:
        if isinstance(verdict, Refuse):
            return verdict
        wanted.append(verdict or 0)
    return Reclaim(wanted[0], wanted[1]) if any(wanted) else None


def caps_refusal(chunk: Chunk, limits: Limits, usage: Usage,
                 waived: Set[str] = frozenset()) -> Refuse | Reclaim | None:
    """LIMIT-GROUPS-1 and LIMIT-ACCOUNT-1 for a new group: open groups and reserved bytes
    (each open group's declared frame size) per job, per account and for the server, whose
    budgets are shared fairly between accounts (:mod:`fake_gs.chunking.shares`)."""
    if CAPS in waived:
        return None
    size = int(chunk.desc["frame_size_bytes"])
    refusal = _load_refusal(f"job {chunk.job_id}", usage.job, limits.max_open_groups_per_job,
                            limits.max_buffered_bytes_per_job, size)
    if refusal is None:  # a waiver counts the account as empty (its caps still bound one group)
        account = Load() if ACCOUNT_CAPS in waived else usage.account
        refusal = _load_refusal("this account", account, limits.max_open_groups_per_account,
                                limits.max_buffered_bytes_per_account, size)
    if refusal is None:
        return server_refusal(size, limits, usage, shared=ACCOUNT_CAPS not in waived)
    return refusal


def place(chunk: Chunk, received: Set[int], range_size: int, *, new: bool,
          waived: Set[str] = frozenset()) -> Decision:
    """A chunk of an open group (``new``: one this chunk opens): its size must match its
    range, and a final chunk needs every other chunk in (CG-MISSING-1)."""
    gid, idx, total = chunk.position
    final, new_range = chunk.final, (range_size if new else None)
    if idx in received and not final:
        return Ack(keep=False, new_range_size=new_range)  # a resend of the same bytes (CG-IDEM-2)
    start, end = chunk_span(idx, total, range_size, int(chunk.desc["frame_size_bytes"]))
    if chunk.payload_len != end - start:
        return Refuse(ErrorCode.MALFORMED_FRAME,
                      f"chunk {idx} carries {chunk.payload_len} bytes; this group's chunk {idx} "
                      f"spans {end - start} bytes", touches_group=True)
    missing = [i for i in first_missing(received, total) if i != idx] if final else []
    if missing and MISSING not in waived:
        return Refuse(ErrorCode.CHUNK_GROUP_MISSING_CHUNKS,
                      f"chunk group {gid} is missing chunk_idx {missing}; send them, then the final chunk",
                      tuple(detail_entry(("request_chunk", "chunk_idx", i), "missing", "missing") for i in missing),
                      touches_group=True)
    keep = idx not in received
    if not final:
        return Ack(keep=keep, new_range_size=new_range)
    return Execute(keep=keep, new_range_size=new_range, missing=tuple(missing))


def open_new(chunk: Chunk, limits: Limits, usage: Usage, waived: Set[str] = frozenset()) -> Decision:
    """A chunk of a group not known here: only chunk 0 opens one (CG-RESTART-1), within
    the caps, with chunk sizes that add up to the declared frame."""
    gid, idx, _ = chunk.position
    if idx != 0 and RESTART not in waived:
        return Refuse(ErrorCode.CHUNK_GROUP_RESTART_REQUIRED,
                      f"chunk group {gid} is not known here; resend the whole group from chunk 0")
    capped = caps_refusal(chunk, limits, usage, waived)
    if isinstance(capped, Refuse):
        return capped
    range_size = first_range_size(chunk.desc, chunk.payload_len)
    if isinstance(range_size, Refuse):
        return range_size
    placed = place(chunk, frozenset(), range_size, new=True, waived=waived)
    return capped if capped is not None and not isinstance(placed, Refuse) else placed


def decide(chunk: Chunk, group: GroupState | None, limits: Limits, usage: Usage = NO_USAGE,
           waived: Set[str] = frozenset()) -> Decision:
    """What happens to ``chunk`` given its group (None: not known here).

    ``usage`` matters only when the group is new; ``waived`` names rules switched off.
    The descriptor itself is judged first, by :func:`descriptor_refusal`."""
    gid, idx, _ = chunk.position
    if chunk.differs_from_stored:
        return Refuse(ErrorCode.CHUNK_GROUP_CONFLICT, f"chunk {idx} of group {gid} was sent before with another payload")
    if group is None:
        return open_new(chunk, limits, usage, waived)
    name = conflict_field(group, chunk.route, chunk.desc)
    if name is not None:
        return Refuse(ErrorCode.CHUNK_GROUP_CONFLICT, f"chunk group {gid} was started with another {name}",
                      (detail_entry(("request_chunk", name), "differs from the group", ErrorCode.CONFLICT),))
    if group.status in (FINALIZING, DONE):
        return Replay() if chunk.final else Ack(keep=False)
    return place(chunk, group.received, group.range_size, new=False, waived=waived)
