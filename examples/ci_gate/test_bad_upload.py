"""A test that stays green without the gate: the team's own uploader cuts three bytes off
the final request chunk, the fake refuses that chunk (400 ``malformed_frame``), and the
code only logs the failure. The ``fake_gs`` gate fails the test, naming the exchange and
the chunk group the upload left open."""

from __future__ import annotations

import logging
from typing import Any

import requests

from contract import wire


def upload_batch(url: str, headers: dict[str, str], frame: bytes) -> None:
    """The bug: the final chunk loses its last bytes, and failures are only logged."""
    chunks = wire.encode_byte_chunks(frame, "request", "forward_backward", max_bytes=16384)
    chunks[-1] = chunks[-1][:-3]
    for chunk in chunks:
        answer = requests.post(url, data=chunk, timeout=30,
                               headers={**headers, "Content-Type": "application/octet-stream"})
        if answer.status_code >= 400:
            logging.getLogger("uploader").warning("upload failed: %s", answer.status_code)


def test_upload_a_batch(fake_gs: Any, rl_client: Any) -> None:
    frame = wire.dumps({"batch": {"note": "no tensors needed to show the bug " * 600}})
    upload_batch(f"{fake_gs.service_url}/{rl_client.job_id}/forward-backward", fake_gs.headers, frame)
