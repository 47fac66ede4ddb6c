"""The conformance suite's own readers of a server's answers, against a hostile server on
loopback: each answer is read at most up to what its route can legitimately answer
(``contract.limits.answer_bound``), by the raw driver, by the kit-client driver and by the
recorder's hook that reads every answer for the report; cursors without end stop at the
result budget. Each ends as an error naming the route and its bound (a red clause in a
run), never a MemoryError or a hang.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator

import pytest
from hostile_server import Answer, Request, endless_json, hostile, result_page

from conformance.drivers.answer_bounds import AnswerBeyondRoute, OverlongAnswer
from conformance.drivers.raw import RawDriver
from conformance.target import Target
from contract.limits import SMALL_ANSWER_BYTES, MiB

#: What an endless answer sends at most here: past every small route's bound, so a reader
#: without one reads it all (and the server is not cut).
SENT_AT_MOST = 3 * SMALL_ANSWER_BYTES
#: Socket buffers between the server's writes and the reader's cut.
SLACK = 16 * MiB


def _target(url: str) -> Target:
    return Target(base_url=url, database="DB", schema="SC", endpoint="e", profile="proposed",
                  token="t-hostile-readers")


def _always(answer: Callable[[], Answer]) -> Callable[[Request], Answer]:
    return lambda request: answer()


def _endless() -> Answer:
    return endless_json(limit_bytes=SENT_AT_MOST)


@pytest.fixture
def traced() -> Iterator[Callable[[], int]]:
    tracemalloc.start()
    try:
        yield lambda: tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_raw_driver_reads_a_capacity_answer_up_to_what_the_route_can_answer(
        traced: Callable[[], int]) -> None:
    """get_capacity answers a small object: an endless answer stops at 16 MiB (before: at
    the driver's 1 GiB cap), as an OverlongAnswer (an AssertionError: the clause is red with
    this message) naming the route and its bound."""
    with hostile(_always(_endless)) as srv:
        driver = RawDriver(_target(srv.url), timeout_s=20.0)
        with pytest.raises(OverlongAnswer, match=r"get_capacity answered more than 16777216 bytes"):
            driver.call("get_capacity")
        (end,) = srv.settled()
        driver.close()
    assert end.cut and end.bytes < SMALL_ANSWER_BYTES + SLACK, end
    assert traced() < 3 * SMALL_ANSWER_BYTES, traced() / MiB


def test_the_client_driver_and_the_recorder_read_under_the_routes_bound(
        traced: Callable[[], int]) -> None:
    """The kit-client driver's session: the recorder's hook reads every answer (the client
    streams its own) for the report; it read the whole endless answer up to 1 GiB before the
    client's own bound saw it. Now the hook stops at the route's bound too."""
    from client.errors import CortexError
    from conformance.drivers.kit_client import ClientDriver
    from conformance.reporting.recorder import RECORDER

    with hostile(_always(_endless)) as srv:
        driver = ClientDriver(_target(srv.url), None, model="m", open_job=False, retries=0,
                              read_timeout_s=20.0, call_timeout_s=30.0)
        with pytest.raises(CortexError, match="get_capacity") as caught:
            driver.rest.get_capacity()
        (end,) = srv.settled()
    assert "16777216" in str(caught.value), caught.value
    assert end.cut and end.bytes < SMALL_ANSWER_BYTES + SLACK, end
    assert traced() < 3 * SMALL_ANSWER_BYTES, traced() / MiB
    assert RECORDER.attach(driver.session) is driver.session  # the hook was there all along


def test_a_poll_page_keeps_the_readers_cap_and_other_routes_their_own() -> None:
    import requests

    from conformance.drivers.answer_bounds import RouteBounds
    from contract.limits import ANSWER_BOUNDS
    from contract.routes import prefix, route

    adapter, base = RouteBounds(64 * MiB), "http://h" + prefix("DB", "SC", "e")

    def bound(name: str, method: str) -> tuple[str, int]:
        url = base + route(name).render(job_id="j", request_id="r")
        return adapter.bound_of(requests.Request(method, url).prepare())

    assert bound("get_request", "GET") == ("get_request", 64 * MiB)
    assert bound("get_capacity", "GET") == ("get_capacity", SMALL_ANSWER_BYTES)
    assert bound("list_jobs", "GET") == ("list_jobs", min(64 * MiB, ANSWER_BOUNDS["list_jobs"]))
    assert adapter.bound_of(requests.Request("GET", "http://h/elsewhere").prepare()) == ("unrouted", 64 * MiB)
    assert issubclass(AnswerBeyondRoute, requests.RequestException)


def test_cursors_without_end_stop_at_the_result_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server handing out a next cursor on every page kept the driver polling (its
    deadline was not checked between cursor pages). Past the page budget (20 here; the
    client's MAX_RESULT_PAGES) it stops with an OverlongAnswer."""
    from conformance.drivers import raw

    monkeypatch.setattr(raw, "MAX_RESULT_PAGES", 20)
    pages = {"n": 0}

    def script(request: Request) -> Answer:
        pages["n"] += 1
        page = result_page("j1", "r1", pages["n"], b"\x01" * 256)
        if pages["n"] >= 50:  # a reader without the budget would stop here, content
            page = page.replace(b'"next_cursor": "c51"', b'"next_cursor": null')
        return Answer(iter([page]))

    with hostile(script) as srv:
        driver = RawDriver(_target(srv.url))
        with pytest.raises(OverlongAnswer, match="21 poll pages"):
            driver.settle("j1", "r1", timeout_s=60)
        driver.close()
    assert pages["n"] == 21


def test_gs_loads_meter_reads_under_the_same_bounds(traced: Callable[[], int]) -> None:
    """gs-load's users call through the load meter's session, which the client takes instead
    of its own: it had no byte, inflation or whole-exchange bound of its own (only the
    client's per-route cap on what it reads). Now it is the same RouteBounds session."""
    from conformance.judge.answers import Judge
    from conformance.judge.tally import Tally
    from conformance.load.measure.meter import MeteredSession
    from contract.routes import prefix, route

    reported: list[object] = []
    session = MeteredSession(Judge(Tally()), reported.append)
    with hostile(_always(_endless)) as srv:
        url = srv.url + prefix("DB", "SC", "e") + route("get_capacity").render()
        with pytest.raises(AnswerBeyondRoute, match="get_capacity answered more than 16777216 bytes"):
            session.get(url, timeout=(2.0, 20.0))
        (end,) = srv.settled()
    assert end.cut and end.bytes < SMALL_ANSWER_BYTES + SLACK, end
    assert traced() < 3 * SMALL_ANSWER_BYTES, traced() / MiB
    assert len(reported) == 1  # the meter still reports the failed exchange
