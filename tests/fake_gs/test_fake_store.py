"""The store without HTTP, on a ManualClock: every timed rule moves only when the clock does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from fake_gs_api import batch, sampling_config, training_config

from contract.models import CreateJobRequest
from contract.states import JobState, RequestState
from fake_gs import FakeSettings, ManualClock
from fake_gs.answers.forms import FormsOutward
from fake_gs.state.records import JobRec
from fake_gs.state.store import Store


def _no_engine() -> Any:
    raise AssertionError("these tests run no engine work")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@contextlib.contextmanager
def _store(clock: ManualClock, **overrides: Any) -> Iterator[Store]:
    settings = FakeSettings().with_overrides(**overrides)
    store = Store(settings, _no_engine, clock=clock, outward=FormsOutward(settings.forms))
    try:
        yield store
    finally:
        store.close()


def _job(store: Store) -> JobRec:
    body = CreateJobRequest.model_validate({"sub_job_configs": [training_config(), sampling_config()]})
    job = store.table.new_job("owner", body)
    store.table.register_job(job)
    return job


def test_manual_clock_moves_both_readings_only_forward(clock: ManualClock) -> None:
    wall, mono = clock.time(), clock.monotonic()
    clock.advance(2.5)
    assert (clock.time() - wall, clock.monotonic() - mono) == (2.5, 2.5)
    with pytest.raises(ValueError):
        clock.advance(-1.0)
    assert clock.time() == wall + 2.5


def test_spec_dialect_shows_cancelling_for_a_second_of_the_clock(clock: ManualClock) -> None:
    with _store(clock, dialect="spec") as store:
        job = _job(store)
        assert store.table.status(job) == JobState.RUNNING
        store.table.cancel(job)
        assert store.table.status(job) == JobState.CANCELLING
        clock.advance(0.99)
        assert store.table.status(job) == JobState.CANCELLING  # not shown by a GET yet, not a second yet
        clock.advance(0.02)
        assert store.table.status(job) == JobState.CANCELLED


def test_a_get_shows_cancelling_once(clock: ManualClock) -> None:
    with _store(clock, dialect="spec") as store:
        job = _job(store)
        store.table.cancel(job)
        assert store.table.status(job, count_poll=True) == JobState.CANCELLING
        assert store.table.status(job) == JobState.CANCELLED  # no time passed: the GET settled it


def test_exports_expire_after_their_ttl(clock: ManualClock) -> None:
    with _store(clock, export_ttl_s=60.0) as store:
        token, _ = store.table.add_export(b"bytes", "weights.bin")
        clock.advance(59.9)
        found = store.table.export(token)
        assert found is not None and found.data == b"bytes"
        clock.advance(0.2)
        assert store.table.export(token) is None


def test_request_latency_reads_the_clock(clock: ManualClock) -> None:
    with _store(clock, latency="seconds:2") as store:
        job = _job(store)
        req = store.queue.submit(job, "step", lambda: {"ok": True})
        assert req.done_event.wait(10) and req.executed  # it ran; only the latency is left
        clock.advance(1.9)
        assert not store.queue.gate_passed(req) and store.queue.status(req) == RequestState.RUNNING
        assert store.queue.cancel_request(req) == (False, RequestState.RUNNING)
        clock.advance(0.1)
        assert store.queue.gate_passed(req) and store.queue.status(req) == RequestState.DONE
        assert store.queue.cancel_request(req) == (False, RequestState.DONE)


def test_a_queued_request_is_cancelled_and_never_runs(clock: ManualClock) -> None:
    with _store(clock) as store:
        job = _job(store)
        store.executors.hold(job.job_id, True)
        req = store.queue.submit(job, "step", _no_engine)
        assert store.queue.cancel_request(req) == (True, RequestState.CANCELLED)
        assert store.queue.status(req) == RequestState.CANCELLED
        assert store.queue.cancel_request(req) == (False, RequestState.CANCELLED)
        store.executors.hold(job.job_id, False)
        assert req.done_event.wait(10) and not req.executed


def test_a_read_result_is_kept_for_its_grace_on_the_clock(make_api, clock: ManualClock) -> None:
    api = make_api(result_grace_s=5.0, clock=clock)
    job = api.running_job()
    rid = api.submit_frame(job, "forward-no-grad", batch(2, 8))
    assert api.wait(job, rid)["status"] == "done"  # read to the end: its grace starts
    clock.advance(4.9)
    api.wait(job, api.submit_json(job, "step"))  # a later result sweeps the job's read results
    assert api.get(f"/{job}/requests/{rid}").status_code == 200  # within the grace: served again
    clock.advance(0.2)  # past the grace (it counts from the first read to the end)
    api.wait(job, api.submit_json(job, "step"))
    r = api.get(f"/{job}/requests/{rid}")
    assert r.status_code == 410 and r.json()["code"] == "result_expired", r.text
