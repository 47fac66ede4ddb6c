"""A whole DSSST1 request frame decoded, off the event loop and in place: its tensors
become views of the bytes it arrived in (``wire.loads(share=True)``), under the decoder
limits of the fake's settings (LIMIT-FRAME-1).

The last stage of the frame intake for a plain frame and for a chunk group's reassembled
frame, and the operation routes' frame decoder.
"""

from __future__ import annotations

import functools
from typing import Any

from starlette.concurrency import run_in_threadpool

from contract import wire
from fake_gs.chunking.stream import check_header, malformed, refuse_legacy
from fake_gs.settings import FakeSettings

#: Decoder limits for request frames with the default settings (LIMIT-FRAME-1).
REQUEST_LIMITS = wire.REQUEST_FRAME_LIMITS
#: What a fake whose chunk rules skip the frame limits decodes reassembled frames with.
_LAX_LIMITS = wire.WireLimits(max_depth=10_000, max_tensors=10**9, max_json_bytes=2**40)


@functools.lru_cache(maxsize=32)
def request_limits(settings: FakeSettings) -> wire.WireLimits:
    """The decoder limits a fake with these settings applies to request frames."""
    return wire.WireLimits(
        max_header_bytes=settings.max_frame_header_bytes,
        max_depth=settings.max_tree_depth,
        max_tensors=settings.max_tensors,
        max_json_bytes=settings.max_frame_json_bytes,
    )


async def decode(settings: FakeSettings, data: Any, *, deep_crashes: bool, frame_limits: bool = True) -> Any:
    """Decode off the event loop; ``data`` is handed over (its tensors become views of it).

    ``frame_limits`` False (a chunk rule transformed) decodes with next to no limits;
    ``deep_crashes`` (a bent behaviour) answers a frame past the depth limit with a crash."""
    limits = request_limits(settings)
    if not frame_limits:
        limits = _LAX_LIMITS
    else:
        refuse_legacy(data)
        check_header(data, settings)
    return await run_in_threadpool(_decode, data, limits, deep_crashes)


def _decode(data: Any, limits: wire.WireLimits, deep_500: bool = False) -> Any:
    refuse_legacy(data)
    try:
        return wire.loads(data, limits=limits, share=True)  # the buffer is the request's now
    except wire.WireError as exc:
        if deep_500 and "deep" in str(exc):
            raise RuntimeError(f"deep frame crashed the decoder: {exc}") from None
        raise malformed(f"malformed DSSST1 frame: {exc}") from None
    except RecursionError:
        if deep_500:
            raise RuntimeError("deep frame crashed the decoder: recursion") from None
        raise malformed("malformed DSSST1 frame: nests too deeply") from None
