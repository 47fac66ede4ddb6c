"""What a caller-chosen id (a checkpoint id) may be: a single path segment a URL carries intact.

Ids travel as path segments (``/checkpoints/{checkpoint_id}``). An id that is ``.`` or
``..``, holds ``/`` or control characters, or is not valid UTF-8 (a lone surrogate) is
rewritten or split by URL normalisation, forges log lines, or cannot be encoded at all:
saved once, it could never be exported or deleted again (issue 12, decided).
"""

from __future__ import annotations

#: Longest id accepted (bytes of UTF-8).
MAX_ID_BYTES = 256


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
