"""The fake's frame limits come from the contract (LIMIT-FRAME-1, CHUNK-SIZE-1), not a copy."""

from __future__ import annotations

from contract import wire
from fake_gs.chunking.intake import REQUEST_LIMITS, request_limits
from fake_gs.settings import MIN_RESULT_CHUNK_BYTES, FakeSettings


def test_default_settings_decode_with_the_contract_request_limits() -> None:
    assert request_limits(FakeSettings()) == wire.REQUEST_FRAME_LIMITS
    assert REQUEST_LIMITS is wire.REQUEST_FRAME_LIMITS


def test_the_smallest_result_chunk_size_still_cuts_a_frame_that_round_trips() -> None:
    frame = wire.dumps({"x": [1, 2, 3]})
    chunks = wire.encode_byte_chunks(frame, "result", max_bytes=MIN_RESULT_CHUNK_BYTES, force_chunk=True)
    assert all(len(chunk) <= MIN_RESULT_CHUNK_BYTES for chunk in chunks)
    assert wire.decode_byte_chunks(chunks, "result") == frame
