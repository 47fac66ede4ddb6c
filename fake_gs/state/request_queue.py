"""The fake's asynchronous requests: submission onto the job's serial executor, execution,
the status a poll shows, waiters, and cancellation (spec §7.7).

Request latency is computed on read (``polls:N`` counts polls, ``seconds:T`` reads the
injected clock), so nothing sleeps; engines run outside the store's lock.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

from contract.errors import ErrorCode, error_body
from contract.states import JOB_TERMINAL, REQUEST_IN_FLIGHT, REQUEST_TERMINAL, RequestState
from fake_gs.answers import delivery
from fake_gs.answers.refusals import ApiError
from fake_gs.answers.render import dumps
from fake_gs.clock import Clock
from fake_gs.settings import FakeSettings
from fake_gs.state import result_retention
from fake_gs.state.executor import Executors
from fake_gs.state.job_table import JOB_ENDED_OR_ENDING
from fake_gs.state.outward import KIT_OUTWARD, Outward
from fake_gs.state.records import JobRec, RequestRec
from fake_gs.state.rules import Rules

log = logging.getLogger("fake_gs.state.store")

#: Request failures caused by the request's content rather than by a bug.
INPUT_ERRORS = (ValueError, LookupError, TypeError, RuntimeError, ArithmeticError)
#: What one execution produced: (error body, delivered result, stream events, the bytes the
#: delivered result holds: sized once, outside the lock).
Outcome = tuple[dict[str, Any] | None, delivery.Delivered | None, list[dict[str, Any]], int]


class Page(NamedTuple):
    """What one poll shows of a request (spec §6.8): its status, its result JSON (``b"null"``
    for none), one page of its events, the cursor to the next page, its error, its times."""

    request_id: str
    status: str
    result: bytes
    events: list[bytes]
    cursor: str | None
    error: Any
    created_at: float
    updated_at: float


class RequestQueue:
    """Requests by id, under the store's lock; ``jobs`` is the job table's dict."""

    def __init__(self, settings: FakeSettings, rules: Rules, clock: Clock, lock: threading.RLock,
                 executors: Executors, jobs: dict[str, JobRec], outward: Outward = KIT_OUTWARD) -> None:
        self.settings = settings
        self.rules = rules
        self.outward = outward
        self.clock = clock
        self.lock = lock
        self.executors = executors
        self._jobs = jobs
        self.requests: dict[str, RequestRec] = {}
        #: Requests ever submitted (records of ended jobs are dropped; this count is not).
        self.requests_submitted = 0
        self.requests_by_op: Counter[str] = Counter()
        #: Requests whose work ran (at-most-once proofs compare it with client successes).
        self.executed_by_op: Counter[str] = Counter()
        self.internal_errors = 0
        #: The crowded bends' state: steps picked to run twice, crowded submits seen.
        self._run_twice: set[str] = set()
        self._crowded = 0

    # --- submission -----------------------------------------------------------------------

    def submit(self, job: JobRec, op: str, work: Callable[[], Any], *, force_frame: bool = False,
               stream: bool = False, group_id: str | None = None, request_id: str | None = None) -> RequestRec:
        """Queue ``work`` on the job's serial executor and return its request record (a
        ``request_id`` chosen by the caller: the document's example request, fake_gs.http.example_data)."""
        rid = request_id or self.outward.request_id()
        req = RequestRec(request_id=rid, job_id=job.job_id, op=op, created_at=self.clock.time(),
                         work=work, force_frame=force_frame, stream=stream, group_id=group_id)
        with self.lock:
            # Checked again here, under the lock: the job may have ended while the call's
            # body was arriving; a call that loses that race leaves nothing behind (409).
            if job.status in JOB_ENDED_OR_ENDING and self.rules.late_body_refused:
                raise ApiError(ErrorCode.JOB_NOT_RUNNING,
                               f"job {job.public_id} is {job.status}: it ended before the call's body arrived")
            # The crowded bends act only while another request is in flight on the server
            # (queued or running, any job), as a server that breaks under concurrency would;
            # the scan of every request costs only while one of them is bent.
            crowded = self.rules.crowded_calls_fail and op in ("step", "save")
            twice = self.rules.crowded_step_runs_twice and op == "step"
            if (crowded or twice) and any(not r.executed and not r.cancelled for r in self.requests.values()):
                if twice:
                    self._run_twice.add(req.request_id)
                else:
                    self._crowded += 1
                    if self._crowded % 3 == 1:  # one in three, the first included
                        raise ApiError(ErrorCode.INTERNAL, f"{op} failed while other requests were in flight")
            self.requests[req.request_id] = req
            self.requests_submitted += 1
            job.requests_total += 1
            self.requests_by_op[op] += 1
            self.executors.queue(job.job_id).submit(lambda: self.execute(req))
        return req

    def request_for(self, job: JobRec, request_id: str) -> RequestRec:
        with self.lock:
            req = self.requests.get(request_id)
            if req is None or req.job_id != job.job_id:
                raise ApiError(ErrorCode.REQUEST_NOT_FOUND, f"request {request_id!r} not found in job {job.public_id}")
            return req

    # --- execution ------------------------------------------------------------------------

    def execute(self, req: RequestRec) -> None:
        """Run the request's work (on its job's executor thread), record the outcome (none for
        a request cancelled before it started), then wake whoever waits for it: its done
        event and the pollers' futures."""
        with self.lock:
            work, req.work = req.work, None
            runs = not req.cancelled and work is not None
            if runs:
                req.started = True
                req.updated_at = self.clock.time()
        outcome: Outcome | None = None
        if runs and work is not None:
            outcome = self._run(req, work)
            if req.request_id in self._run_twice:  # bend crowded-step-twice
                with self.lock:
                    self._run_twice.discard(req.request_id)
                    self.executed_by_op[req.op] += 1
                outcome = self._run(req, work)
        del work
        with self.lock:
            if outcome is not None:
                error, delivered, events, nbytes = outcome
                req.executed = True
                self.executed_by_op[req.op] += 1
                req.updated_at = self.clock.time()
                if not req.cancelled:
                    req.error = error
                    if delivered is not None:
                        req.result_raw, req.events_raw = delivered.raw, delivered.events
                        req.result_form, req.result_bytes = delivered.form, nbytes
                    req.stream_events.extend(events)
                job = self._jobs.get(req.job_id)
                if job is not None:
                    if delivered is not None and not req.cancelled and job.status not in JOB_TERMINAL:
                        result_retention.stored(self.settings, self.rules, job, req, self.clock.monotonic())
                    job.log(f"request {req.request_id} ({req.op}) {RequestState.FAILED if error else RequestState.DONE}")
            req.done_event.set()
            waiters, req.waiters = req.waiters, []
            for loop, fut in waiters:
                try:
                    loop.call_soon_threadsafe(_resolve, fut)
                except RuntimeError:  # loop closed: nobody is waiting any more
                    pass

    def _run(self, req: RequestRec, work: Callable[[], Any]) -> Outcome:
        """Call ``work`` outside the lock; an error becomes the request's error body."""
        try:
            result = work()
            outward, key = self.outward, req.request_id
            if req.stream:
                return None, None, [outward.result(f"{key}/{i}", e) for i, e in enumerate(result)], 0
            s = self.settings
            mode = outward.delivery(s.result_delivery, key)
            delivered = delivery.prepare(outward.result(key, result), force_frame=req.force_frame,
                                         mode=mode, chunk_bytes=s.result_chunk_bytes)
            return None, delivered, [], delivered.nbytes
        except ApiError as exc:
            return exc.body(), None, [], 0
        except INPUT_ERRORS as exc:
            log.info("request %s (%s) failed: %s", req.request_id, req.op, exc)
            return error_body(ErrorCode.INVALID_ARGUMENT, f"{req.op} failed: {exc}"[:2000]), None, [], 0
        except Exception as exc:
            log.exception("request %s (%s) crashed", req.request_id, req.op)
            with self.lock:
                self.internal_errors += 1
            return error_body(ErrorCode.INTERNAL, f"{req.op} crashed: {type(exc).__name__}: {exc}"[:2000]), None, [], 0

    def waiter(self, req: RequestRec) -> asyncio.Future[None] | None:
        """A future resolved when ``req`` executes, or None if it already has."""
        with self.lock:
            if req.executed:
                return None
            loop = asyncio.get_running_loop()
            fut: asyncio.Future[None] = loop.create_future()
            req.waiters.append((loop, fut))
            return fut

    # --- what a poll shows ----------------------------------------------------------------

    def gate_passed(self, req: RequestRec) -> bool:
        """Has the configured latency elapsed for this request (execution aside)?"""
        timing = self.settings.latency
        if timing.kind == "instant":
            return True
        if timing.kind == "polls":
            return req.polls >= int(timing.amount)
        return self.clock.time() - req.created_at >= timing.amount

    def status(self, req: RequestRec) -> str:
        """The status a poll shows before draining stream events (the one place it is
        computed); terminal ones are fixed by the poll that first shows them."""
        if req.final_status is not None:
            return req.final_status
        if not req.executed:
            return (RequestState.RUNNING if req.started else RequestState.PENDING).value
        if not self.gate_passed(req):
            return RequestState.RUNNING.value
        if req.error is not None:
            return RequestState.FAILED.value
        return (RequestState.STREAMING if req.stream else RequestState.DONE).value

    # --- polling (spec §6.8, §9.4) ---------------------------------------------------------

    def begin_poll(self, req: RequestRec) -> asyncio.Future[None] | None:
        """Count a poll of ``req``; a future resolved when it executes, if it is due but has
        not run yet (the poll waits for it briefly, so an ``instant`` request is terminal
        on the first poll after it completes)."""
        with self.lock:
            req.polls += 1
            due = req.final_status is None and not req.executed and self.gate_passed(req)
        return self.waiter(req) if due else None

    def poll(self, job: JobRec, req: RequestRec, offset: int, max_events: int) -> Page:
        """What this poll shows: a terminal status is fixed by the poll that first shows it;
        a done result read to its end is freed after its grace (``result_retention``)."""
        with self.lock:
            status = self.status(req)
            result, error, events, cursor = b"null", None, [], None
            inflight_empty = self.rules.inflight_result_empty
            if inflight_empty and status == RequestState.DONE and req.polls <= 1 and not req.stream:
                status = RequestState.RUNNING  # its first poll shows it in flight, whatever its pace
            if status == RequestState.STREAMING:
                events = self._drain_stream(req, max_events)
                if not req.stream_events:
                    status = RequestState.DONE
            elif status == RequestState.DONE:
                status, result, events, cursor = self._done(job, req, offset, max_events)
            elif status == RequestState.FAILED:
                error = req.error
            elif status in REQUEST_IN_FLIGHT and (inflight_empty or self.outward.empty_while_in_flight()):
                result = b"{}"  # spec §6.8's own empty form, on a page of a request still in flight
            if status in REQUEST_TERMINAL and req.final_status is None:
                req.final_status = status
                req.updated_at = max(req.updated_at, req.created_at)
            return Page(req.request_id, status, result, events, cursor, error, req.created_at, req.updated_at)

    def _page(self, req: RequestRec, offset: int, max_events: int) -> tuple[list[bytes], str | None]:
        events = req.events_raw or []
        if self.rules.cursor_shifts:
            reads = req.cursor_reads[offset] = req.cursor_reads.get(offset, 0) + 1
            offset = min(len(events), offset + reads - 1)
        if self.rules.cursor_page_consumed:
            reads = req.cursor_reads[offset] = req.cursor_reads.get(offset, 0) + 1
            if reads > 1:
                return [], None
        size = self.outward.page_size(req.request_id, offset, max_events, len(events) - offset)
        page = events[offset : offset + size]
        end = offset + len(page)
        return page, delivery.encode_cursor(req.request_id, end) if end < len(events) else None

    def _drain_stream(self, req: RequestRec, max_events: int) -> list[bytes]:
        count = min(max_events, len(req.stream_events))
        if self.rules.stream_events_repeated and not req.cursor_reads.get(-1):
            req.cursor_reads[-1] = 1
            return [dumps(e) for e in list(req.stream_events)[:count]]
        return [dumps(req.stream_events.popleft()) for _ in range(count)]

    def _done(self, job: JobRec, req: RequestRec, offset: int, max_events: int
              ) -> tuple[str, bytes, list[bytes], str | None]:
        """A done request's (status, result JSON, events, cursor); frees it once read to the end."""
        if req.expired:
            raise ApiError(ErrorCode.RESULT_EXPIRED,
                           f"the result of request {req.request_id} was freed (read to the end, or the job's "
                           "unread results passed their cap); it cannot be polled again")
        if req.events_raw is not None:
            events, cursor = self._page(req, offset, max_events)
            if cursor is None:
                result_retention.read_to_end(self.settings, self.rules, job, req, self.clock.monotonic())
            return RequestState.DONE, b"null", events, cursor
        if req.stream:
            return RequestState.DONE, b"null", self._drain_stream(req, max_events), None
        raw = req.result_raw if req.result_raw is not None else b"{}"
        if raw == b"{}" and self.outward.null_for_empty(req.request_id):
            raw = b"null"  # spec §6.8: a successful request with no result (the client reads {})
        result_retention.read_to_end(self.settings, self.rules, job, req, self.clock.monotonic())
        return RequestState.DONE, raw, [], None

    # --- cancellation ---------------------------------------------------------------------

    def cancel_request(self, req: RequestRec) -> tuple[bool, str]:
        """cancel-request (spec §7.7): a request that has not started is cancelled and never
        runs; one running or done is not (cancelled false, with its visible status)."""
        with self.lock:
            if req.final_status is not None:
                return False, req.final_status
            status = self.status(req)
            if status == RequestState.STREAMING:  # events still to drain: not over yet
                status = (RequestState.RUNNING if req.stream_events else RequestState.DONE).value
            if req.started and self.rules.cancel_request_truthful \
                    or status in (RequestState.DONE, RequestState.FAILED):
                return False, status
            self.cancel(req)
            return True, RequestState.CANCELLED.value

    def cancel(self, req: RequestRec) -> None:
        """Mark ``req`` cancelled and free whatever result it holds."""
        req.cancelled = True
        req.final_status = RequestState.CANCELLED.value
        req.updated_at = self.clock.time()
        req.result_raw = req.events_raw = None
        req.stream_events.clear()
        job = self._jobs.get(req.job_id)
        if job is not None and req.request_id in job.results:
            result_retention.free(job, req)

    def drop_job(self, job: JobRec) -> None:
        """The job ended: cancel its queued work, free its results and forget its records
        (unreachable now: polls need a running job; a running executor keeps its own
        reference), so ended jobs hold no memory."""
        with self.lock:
            self.executors.close_job(job.job_id)
            for req in self.requests.values():
                if req.job_id == job.job_id and req.final_status is None and not req.executed:
                    self.cancel(req)
            for rid in [rid for rid, req in self.requests.items() if req.job_id == job.job_id]:
                req = self.requests.pop(rid)
                req.result_raw = req.events_raw = None
                req.stream_events.clear()
            result_retention.forget(job)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
