"""The numbers of the DSSST1 wire: header caps, decoder limits, the chunk header allowance.

One home for every frame limit (spec §9.2, §9.3): the codec, the fake's request
limits, the client's chunk-size check and the suite's properties all import them from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from contract.limits import MiB

#: The largest safetensors header length field the codec ever reads (WIRE-HEADER-1).
MAX_HEADER_BYTES = 64 * MiB
#: Bytes of each chunk kept for the chunk frame's own header: ranges start at
#: ``max_bytes - CHUNK_HEADER_ALLOWANCE`` (CHUNK-SIZE-1, spec §9.3).
CHUNK_HEADER_ALLOWANCE = 8192
#: Most JSON arrays and objects one frame's header may hold, its ``dss`` tree and ``op``
#: metadata included, counted before anything is parsed (brackets inside strings count
#: too: an upper bound). What a header may describe: three per tensor entry plus the tree's
#: own containers; 2**21 is ten times the 100,000 tensors ``max_tensors`` allows plus room
#: for a tree of JSON lists. An 80 MiB answer whose header held 20 million empty lists grew
#: the client by 1.57 GiB before its typed error; at this bound a header costs at most
#: ~130 MiB of lists.
MAX_HEADER_CONTAINERS = 1 << 21
#: Most dimensions one tensor entry may declare, and the bound on each dimension.
MAX_NDIM = 64
DIM_LIMIT = 2**63


@dataclass(frozen=True)
class WireLimits:
    """Decoder limits; the defaults accept anything ``dumps`` writes.

    ``max_header_bytes`` caps the safetensors header length field (checked before any
    parsing); ``max_depth`` the nesting of d/l/u tree nodes (JSON inside a ``j`` node is
    bounded by the JSON parser's own recursion guard, reported as WireError);
    ``max_containers`` the JSON arrays and objects of the header, its metadata strings
    included (counted before parsing); ``max_tensors`` the header entries; ``max_json_bytes`` the UTF-8 size of each of the
    ``dss`` and ``op`` metadata strings; ``max_frame_bytes`` the whole frame (None: no cap).
    """

    max_header_bytes: int = MAX_HEADER_BYTES
    max_depth: int = 64
    max_containers: int = MAX_HEADER_CONTAINERS
    max_tensors: int = 100_000
    max_json_bytes: int = 16 * MiB
    max_frame_bytes: int | None = None


#: What ``loads`` applies when the caller names no limits (and what ``dumps`` never exceeds).
DEFAULT_LIMITS = WireLimits()

#: The limits a server applies to request frames (LIMIT-FRAME-1): a 16 MiB header, 64 levels
#: of nesting, 10 000 tensors and 16 MiB per JSON metadata string.
REQUEST_FRAME_LIMITS = WireLimits(
    max_header_bytes=16 * MiB, max_depth=64, max_tensors=10_000, max_json_bytes=16 * MiB
)
