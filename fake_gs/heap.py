"""Giving freed heap memory back to the operating system (glibc's ``malloc_trim``)."""

from __future__ import annotations

from typing import Any

_MALLOC_TRIM: Any = None


def trim_heap() -> None:
    """Hand freed heap pages back to the OS (glibc keeps them otherwise), so the fake's RSS
    falls once big chunk buffers and results are gone. A no-op where malloc_trim is absent."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes
            import ctypes.util

            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _MALLOC_TRIM = libc.malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)
