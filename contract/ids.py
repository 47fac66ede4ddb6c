"""Ids: what a caller-chosen id (a checkpoint id) may be, and the sub-job id format.

A caller-chosen id must be a single path segment a URL carries intact.

Ids travel as path segments (``/checkpoints/{checkpoint_id}``). An id that is ``.`` or
``..``, holds ``/`` or control characters, or is not valid UTF-8 (a lone surrogate) is
rewritten or split by URL normalisation, forges log lines, or cannot be encoded at all:
saved once, it could never be exported or deleted again.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from contract.models import SUB_JOB_ID_WORD

#: Longest id accepted (bytes of UTF-8).
MAX_ID_BYTES = 256
#: A complete sub-job id, ``{job_id}:{training|sampling|log_prob}:{index}`` (spec §1.2).
SUB_JOB_ID_RE = re.compile(
    r"^(?P<job>[^:\s]+):(?P<word>" + "|".join(SUB_JOB_ID_WORD.values()) + r"):(?P<index>0|[1-9][0-9]*)$"
)


def sub_job_ids(job_id: str, job_types: Iterable[str]) -> list[str]:
    """The ids of a job's sub-jobs in create order: the index counts the earlier sub-jobs of
    the same type from 0 (spec §1.2). An unknown type keeps its own word."""
    counts: Counter[str] = Counter()
    out = []
    for job_type in job_types:
        word = SUB_JOB_ID_WORD.get(job_type, job_type)
        out.append(f"{job_id}:{word}:{counts[word]}")
        counts[word] += 1
    return out


def job_of_sub_job(sub_job_id: object) -> str | None:
    """The job id inside a complete sub-job id, or None for anything else."""
    match = SUB_JOB_ID_RE.match(sub_job_id) if isinstance(sub_job_id, str) else None
    return match["job"] if match else None


def id_problem(value: str) -> str | None:
    """Why ``value`` cannot be an id, or None when it can."""
    if value in (".", ".."):
        return f"{value!r} is a dot-segment, which URL normalisation removes"
    if "/" in value:
        return "holds '/', which splits the path"
    bad = next((c for c in value if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0), None)
    if bad is not None:
        return f"holds the control character {bad!r}"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8 (a lone surrogate)"
    if size > MAX_ID_BYTES:
        return f"is {size} bytes; the limit is {MAX_ID_BYTES}"
    return None


def printable(text: str, limit: int = 2000) -> str:
    """``text`` with control characters (and lone surrogates) escaped, for one log line."""
    out = []
    for c in text[:limit]:
        code = ord(c)
        if code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code < 0xE000 or c == "\\":
            out.append("\\\\" if c == "\\" else f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(c)
    return "".join(out) + ("..." if len(text) > limit else "")
