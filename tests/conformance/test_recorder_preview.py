"""A body's preview in the report: scrubbed before it is cut, and at a cost bounded by the
window it shows, not by the body's size."""

from __future__ import annotations

import json

import pytest

from conformance.reporting import recorder

SESSION_TOKEN = "IQoJb3JpZ2luX2VjE" + "x" * 1100  # an STS session token's length


@pytest.mark.parametrize("fill", [10, 20 * 1024 * 1024])
def test_a_credential_at_the_head_of_any_body_is_masked_whole(fill: int) -> None:
    body = json.dumps({"AWS_TOKEN": SESSION_TOKEN, "fill": "y" * fill}).encode()
    shown = recorder.preview(body, "application/json")
    assert SESSION_TOKEN[:8] not in shown and "<redacted>" in shown, shown[:200]
    assert len(shown) < 700


def test_a_large_body_is_scrubbed_only_in_its_window(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def measured(text: str) -> str:
        seen.append(len(text))
        return text

    monkeypatch.setattr(recorder, "scrub_text", measured)
    body = json.dumps({"values": [1.5] * (4 * 1024 * 1024)}).encode()
    recorder.preview(body, "application/json")
    assert seen and max(seen) <= recorder._SCRUBBED < len(body)
