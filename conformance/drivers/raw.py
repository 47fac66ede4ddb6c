"""The raw HTTP driver: requests built from ``contract.routes``, answers kept whole.

It checks the server to the byte, so it never retries, never normalises and never hides
a bad answer: every call returns an :class:`Answer` (status, headers, raw bytes, parsed
body). Helpers cover what properties repeat: create a job and wait for it, submit and
poll to a terminal state while following cursors, upload request chunks, decode results
in whichever form they came.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import requests

from client.calls.bounded_read import AnswerTooBig
from conformance.drivers.answer_bounds import OverlongAnswer, mount_route_bounds
from conformance.drivers.raw_answers import Answer, Settled, answer_of
from conformance.reporting.cost import COST, gpus_of
from conformance.reporting.recorder import RECORDER, Recorder
from conformance.target import Target
from contract.limits import MAX_ANSWER_BYTES, MAX_RESULT_BYTES, MAX_RESULT_PAGES
from contract.routes import JSON, OCTET, route
from contract.states import (
    JOB_TERMINAL,
    REQUEST_TERMINAL,
    JobState,
    normalize_job_state,
    normalize_request_state,
)

_UNSET: Any = object()
class RawDriver:
    """Speaks HTTP to one :class:`Target` with one token (or none)."""

    def __init__(
        self,
        target: Target,
        token: str | None | Literal[False] = None,
        recorder: Recorder = RECORDER,
        timeout_s: float = 600.0,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self.target = target
        self.token = token
        self.timeout_s = timeout_s
        # Every answer under what its route can legitimately answer (at most the byte cap),
        # and its read timeout as a total time bound: a server streaming an endless body
        # cannot keep the suite reading (conformance.drivers.answer_bounds).
        self.session = COST.attach(recorder.attach(mount_route_bounds(requests.Session(), max_answer_bytes)))
        self.session.headers.update(target.auth_headers(token))
        self.session.headers["User-Agent"] = "gs-conformance/0.1"
        self.fast = target.embedded

    def close(self) -> None:
        self.session.close()

    # --- plumbing -------------------------------------------------------------------------

    def url(self, name: str, **params: str) -> str:
        return self.target.service_url + route(name).render(**params)

    def send(
        self,
        method: str,
        url: str,
        *,
        name: str = "raw",
        data: bytes | str | None = None,
        content_type: str | None = None,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Answer:
        hdrs = dict(headers or {})
        if content_type is not None:
            hdrs["Content-Type"] = content_type
        started = time.monotonic()
        try:
            resp = self.session.request(
                method,
                url,
                data=data,
                params=dict(query) if query else None,
                headers=hdrs,
                timeout=(10.0, timeout_s or self.timeout_s),
                allow_redirects=False,
            )
        except AnswerTooBig as exc:
            raise OverlongAnswer(f"{method} {url}: {exc}") from None
        return answer_of(name, method, resp, time.monotonic() - started)

    def call(
        self,
        name: str,
        *,
        json_body: Any = _UNSET,
        data: bytes | str | None = None,
        content_type: str | None = _UNSET,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        **params: str,
    ) -> Answer:
        """Call a route by name; ``json_body`` is serialised, ``data`` sent as is."""
        r = route(name)
        if json_body is not _UNSET:
            data = json.dumps(json_body).encode()
            ctype = JSON if content_type is _UNSET else content_type
        else:
            ctype = r.content_type if content_type is _UNSET else content_type
            if data is None and r.body == "none":
                ctype = None if content_type is _UNSET else content_type
        return self.send(
            r.method,
            self.url(name, **params),
            name=name,
            data=data,
            content_type=ctype,
            query=query,
            headers=headers,
        )

    def under_prefix(self, method: str, path: str, **kw: Any) -> Answer:
        """Any path under the prefix, routed or not."""
        return self.send(method, self.target.service_url + path, **kw)

    # --- jobs ------------------------------------------------------------------------------

    def create_job(self, body: Any) -> Answer:
        ans = self.call("create_job", json_body=body)
        job_id = ans.field("job_id") if ans.ok else None
        if isinstance(job_id, str):
            COST.job_created(job_id, gpus_of(body))
        return ans

    def get_job(self, job_id: str) -> Answer:
        return self.call("get_job", job_id=job_id)

    def wait_job(
        self,
        job_id: str,
        until: Sequence[str] = (JobState.RUNNING,),
        timeout_s: float = 1800.0,
        on_status: Callable[[str], None] | None = None,
    ) -> tuple[Answer, list[str]]:
        """Poll a job until its normalised status is in ``until`` or terminal.

        Returns the last answer and every distinct status seen (raw spelling, in order).
        """
        seen: list[str] = []
        deadline = time.monotonic() + timeout_s
        delay = 0.01 if self.fast else 0.2
        while True:
            ans = self.get_job(job_id)
            if not ans.ok:
                return ans, seen
            raw = str(ans.field("status"))
            if not seen or seen[-1] != raw:
                seen.append(raw)
                if on_status is not None:
                    on_status(raw)
            state = normalize_job_state(raw)
            if state in until or state in JOB_TERMINAL:
                return ans, seen
            if time.monotonic() > deadline:
                return ans, seen
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25 if self.fast else 10.0)

    def cancel(self, job_id: str) -> Answer:
        ans = self.call("cancel_job", job_id=job_id)
        if ans.ok:
            COST.job_ended(job_id)
        return ans

    # --- asynchronous requests -------------------------------------------------------------

    def poll(
        self, job_id: str, request_id: str, cursor: str | None = None, max_events: Any = None
    ) -> Answer:
        query: dict[str, Any] = {}
        if cursor is not None:
            query["cursor"] = cursor
        if max_events is not None:
            query["max_events"] = max_events
        return self.call("get_request", job_id=job_id, request_id=request_id, query=query)

    def settle(
        self,
        job_id: str,
        request_id: str,
        timeout_s: float | None = None,
        max_events: Any = None,
    ) -> Settled:
        """Poll to a terminal state, then drain cursor pages; never retries an error.

        Bounded like the client's reader: past ``timeout_s``, cursor pages included, it
        returns what it has; more than ``MAX_RESULT_PAGES`` pages or ``MAX_RESULT_BYTES`` of
        them is an :class:`OverlongAnswer` (a server handing out cursors without end)."""
        out = Settled(job_id, request_id)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        received = 0
        cursor: str | None = None
        # Start fast even against a real server (most requests finish in well under a
        # second there too), then back off like a client would (x1.5 up to 6 s).
        delay = 0.005 if self.fast else 0.02
        while True:
            ans = self.poll(job_id, request_id, cursor=cursor, max_events=max_events)
            out.pages.append(ans)
            received += len(ans.raw)
            if len(out.pages) > MAX_RESULT_PAGES or received > MAX_RESULT_BYTES:
                raise OverlongAnswer(
                    f"request {request_id}: {len(out.pages)} poll pages, {received} bytes, past the "
                    f"{MAX_RESULT_PAGES} pages or {MAX_RESULT_BYTES} bytes one request's results may "
                    "take (contract.limits); not polled further")
            if not ans.ok or not isinstance(ans.body, Mapping):
                return out
            out.events.extend(e for e in ans.body.get("events") or [] if isinstance(e, dict))
            status = str(ans.body.get("status"))
            out.statuses.append(status)
            next_cursor = ans.body.get("next_cursor")
            terminal = normalize_request_state(status) in REQUEST_TERMINAL
            if time.monotonic() > deadline:
                return out
            if next_cursor:
                cursor = str(next_cursor)
                continue
            if terminal:
                return out
            time.sleep(delay)
            delay = min(delay * (1.25 if self.fast else 1.5), 0.1 if self.fast else 6.0)

    def submit_json(self, name: str, job_id: str, body: Any) -> Answer:
        return self.call(name, json_body=body, job_id=job_id)

    def run_json(self, name: str, job_id: str, body: Any) -> tuple[Answer, Settled | None]:
        """Submit a JSON call and settle it when it was accepted."""
        ans = self.submit_json(name, job_id, body)
        rid = ans.field("request_id")
        if not ans.ok or not isinstance(rid, str):
            return ans, None
        return ans, self.settle(job_id, rid)

    def operation(self, job_id: str, envelope: Any) -> Answer:
        return self.call("operation", json_body=envelope, job_id=job_id)

    # --- frames and chunks -----------------------------------------------------------------

    def send_chunks(self, name: str, job_id: str, chunks: Sequence[bytes]) -> list[Answer]:
        """POST chunks in order; stops at the first refusal."""
        answers: list[Answer] = []
        for chunk in chunks:
            ans = self.call(name, data=chunk, job_id=job_id)
            answers.append(ans)
            if not ans.ok:
                break
        return answers

    def finish_group(self, name: str, job_id: str, chunks: Sequence[bytes]) -> None:
        """Send ``chunks`` (the rest of a group a property left open) and wait for the result,
        so open groups never pile up against the job's cap; answers are not judged."""
        last = None
        for chunk in chunks:
            last = self.call(name, data=chunk, job_id=job_id)
        rid = last.field("request_id") if last is not None else None
        if isinstance(rid, str):
            self.settle(job_id, rid)

    def run_frame(
        self,
        name: str,
        job_id: str,
        obj: Any,
        *,
        chunk_bytes: int | None = None,
        force_chunk: bool = True,
        group_id: str | None = None,
    ) -> tuple[list[Answer], Settled | None]:
        """Encode ``obj`` as DSSST1, send it (chunked unless told not to) and settle it."""
        chunks = request_chunks(
            obj, name, chunk_bytes=chunk_bytes, force_chunk=force_chunk, group_id=group_id
        )
        answers = self.send_chunks(name, job_id, chunks)
        final = answers[-1]
        rid = final.field("request_id")
        if not final.ok or len(answers) != len(chunks) or not isinstance(rid, str):
            return answers, None
        return answers, self.settle(job_id, rid)


def encode(obj: Any) -> bytes:
    """A request frame with the standard request metadata."""
    from contract import wire

    return wire.dumps(obj, metadata=wire.standard_request_metadata())


def request_chunks(
    obj_or_frame: Any,
    operation: str,
    *,
    chunk_bytes: int | None = None,
    force_chunk: bool = True,
    group_id: str | None = None,
) -> list[bytes]:
    """Split a frame (or an object, encoded first) into request chunks."""
    from contract import wire

    frame = obj_or_frame if isinstance(obj_or_frame, (bytes, bytearray)) else encode(obj_or_frame)
    return wire.encode_byte_chunks(
        bytes(frame),
        "request",
        operation=operation.replace("_", "-"),
        max_bytes=chunk_bytes or 0,
        chunk_group_id=group_id,
        force_chunk=force_chunk,
    )


def chunk_bytes_for(frame_size: int, n_chunks: int) -> int:
    """The ``max_bytes`` that cuts a frame of ``frame_size`` into about ``n_chunks`` chunks."""
    from contract.wire import CHUNK_HEADER_ALLOWANCE

    per = max(1, -(-frame_size // max(1, n_chunks)))
    return per + CHUNK_HEADER_ALLOWANCE


OCTET_STREAM = OCTET
