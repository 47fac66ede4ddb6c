"""Small pure pieces: timing specs, settings, cursors, max_events, delivery forms, imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract import wire
from contract.limits import MAX_EVENTS_CAP
from fake_gs import FakeSettings, Timing
from fake_gs.answers.delivery import (
    decode_cursor,
    encode_cursor,
    has_tensor,
    jsonable,
    parse_max_events,
    prepare,
)
from fake_gs.answers.refusals import ApiError
from fake_gs.engines import ENGINES, load_engine
from fake_gs.settings import MIN_RESULT_CHUNK_BYTES


@pytest.mark.parametrize(("text", "kind", "amount"), [
    ("instant", "instant", 0), ("polls:3", "polls", 3), ("seconds:0.5", "seconds", 0.5), ("polls:0", "instant", 0),
    (" SECONDS:2 ", "seconds", 2)])
def test_timing_parse(text: str, kind: str, amount: float) -> None:
    t = Timing.parse(text)
    assert (t.kind, t.amount) == (kind, amount)
    assert Timing.parse(str(t)) == t


@pytest.mark.parametrize("bad", ["polls", "polls:x", "minutes:3", "seconds:-1", "polls:1.5"])
def test_timing_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        Timing.parse(bad)


def test_settings_validation_and_overrides() -> None:
    s = FakeSettings(startup="polls:2", tokens=["a"])  # type: ignore[arg-type]
    assert s.startup == Timing("polls", 2) and s.tokens == ("a",) and s.auth_enabled
    for bad in ({"profile": "future"}, {"status_style": "loud"}, {"result_delivery": "pigeon"},
                {"result_chunk_bytes": MIN_RESULT_CHUNK_BYTES - 1}, {"max_total_gpus": -1}):
        with pytest.raises(ValueError):
            FakeSettings(**bad)
    with pytest.raises(TypeError):
        s.with_overrides(colour="red")
    assert s.with_overrides(seed=9).seed == 9


def test_cursor_round_trip_and_binding() -> None:
    cur = encode_cursor("req-1", 32)
    assert decode_cursor("req-1", cur) == 32 and decode_cursor("req-1", None) == 0
    for bad in ("%%%", "bm9wZQ", encode_cursor("req-2", 3)):
        with pytest.raises(ApiError):
            decode_cursor("req-1", bad)


def test_max_events() -> None:
    assert parse_max_events(None) == 16 and parse_max_events("5") == 5
    assert parse_max_events("100000") == MAX_EVENTS_CAP and parse_max_events("100000", uncapped=True) == 100000
    for bad in ("0", "-1", "x", "2.5"):
        with pytest.raises(ApiError):
            parse_max_events(bad)


def test_delivery_forms() -> None:
    import torch

    assert json.loads(prepare({"a": 1.0}, force_frame=False, mode="auto", chunk_bytes=10_000).raw or b"") == {"a": 1.0}
    assert prepare(None, force_frame=False, mode="auto", chunk_bytes=10_000).raw == b"{}"
    small = prepare({"t": torch.ones(2)}, force_frame=False, mode="auto", chunk_bytes=10_000)
    assert small.form == "inline" and wire.is_inline_frame(json.loads(small.raw or b""))
    big = prepare({"t": torch.ones(10_000)}, force_frame=False, mode="auto", chunk_bytes=10_000)
    events = [json.loads(e) for e in big.events or []]
    assert events and all(e["type"] == "result_chunk" for e in events)
    assert torch.equal(wire.loads(wire.decode_result_chunk_events(events))["t"], torch.ones(10_000))
    assert big.nbytes == sum(len(e) for e in big.events or [])
    assert prepare({}, force_frame=True, mode="chunks", chunk_bytes=10_000).events
    assert has_tensor([{"x": (1, torch.ones(1))}]) and not has_tensor({"x": [1, "a"]})
    assert jsonable({"a": torch.tensor(2.5), "b": torch.ones(2), "c": float("nan")}) == {"a": 2.5, "b": [1.0, 1.0], "c": None}


def test_engine_registry() -> None:
    assert set(ENGINES) == {"shape", "tiny"}
    assert load_engine("shape", 3).name == "shape"
    with pytest.raises(ValueError):
        load_engine("quantum")


def test_importing_and_building_the_app_does_not_load_torch() -> None:
    code = ("import sys; import fake_gs, fake_gs.cli; from fake_gs import create_app; create_app(); "
            "assert 'torch' not in sys.modules, 'torch loaded'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
