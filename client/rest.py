"""The low-level REST client: one method per route of both profiles, plus waiting helpers.

Paths, methods and content types come from ``contract.routes``; this module only decides
what goes in each body. Data-plane methods return the route's own answer (usually
``{"request_id", "job_id"}``); :meth:`CortexRestClient.wait` and :meth:`result` turn that
into the decoded result.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from typing import Any, Unpack

from client.calls.polling import iter_stream_events, wait_job_running, wait_request
from client.calls.session import HttpSession, HttpSettings, ReadAnswer, Seams
from client.calls.upload import split_frame, upload
from client.config import ClientConfig, check_chunk_bytes
from client.errors import ConfigError, CortexError, PayloadTooLarge, ProtocolError
from client.logs import fetch_execution_logs as _fetch_execution_logs
from client.transports.base import given
from contract.limits import MAX_BODY_BYTES
from contract.models import ASYNC_OPERATIONS, OPERATION_ANSWERS, SubmitResponse
from contract.routes import OCTET, Route, prefix, route

Payload = bytes | Mapping[str, Any]


def encode_frame(payload: Payload) -> bytes:
    """A DSSST1 frame for ``payload`` (bytes are taken to be a frame already)."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    from contract import wire

    return wire.dumps(dict(payload), metadata=wire.standard_request_metadata())


def frame_source(payload: Payload) -> Any:
    """What an upload sends ``payload`` from, with nothing copied: a frame given as bytes as
    is, a batch as its frame's parts (the header, then the tensors' own bytes)."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return payload
    from contract import wire

    return wire.dumps_parts(dict(payload), metadata=wire.standard_request_metadata())


#: Routes whose successful answer may be something other than a JSON object.
_ANY_JSON = frozenset({"operation", "delete_checkpoint"})


#: Fields of the inline operation answers (contract.models.OPERATION_ANSWERS) a submission
#: answer never carries.
_INLINE_FIELDS = frozenset(
    name for model in OPERATION_ANSWERS.values() for name in model.model_fields
) - frozenset(SubmitResponse.model_fields)


def is_submission(answer: Any) -> bool:
    """``{request_id, job_id}`` to poll (spec §3.1), whatever unknown fields ride along."""
    return (isinstance(answer, Mapping) and isinstance(answer.get("request_id"), str)
            and "job_id" in answer and not _INLINE_FIELDS & set(answer))


def _operation_name(r: Route) -> str:
    """The chunk descriptor's ``operation``: the route's last path segment."""
    return r.path.rsplit("/", 1)[-1]


def _quote_last_answer(exc: CortexError, answer: ReadAnswer | None) -> None:
    """A failure found in a poll answer (failed, cancelled, undecodable) names that poll's
    status and x-snowflake-request-id, so an operator can find it (CLIENT-ERR-1)."""
    if answer is None or exc.snowflake_request_id is not None:
        return
    exc.snowflake_request_id = answer.snowflake_request_id
    if exc.status is None:
        exc.status = answer.status
    exc.args = (exc._render(),)


class CortexRestClient:
    """Speaks the Cortex Training REST surface for one configured service."""

    def __init__(self, config: ClientConfig, **seams: Unpack[Seams]) -> None:
        """``seams`` (session, sleep, clock, rng) go to the HTTP session; tests inject them."""
        base = config.service_base()
        if base is None:
            raise ConfigError(
                "no Cortex target: set `base_url` (or CORTEX_BASE_URL) or `host` (or CORTEX_HOST)"
            )
        self.config = config
        self._last_answer: ReadAnswer | None = None
        where = prefix(config.database, config.schema_name, config.endpoint)
        self.http = HttpSession(HttpSettings.from_config(config, base, where), **seams)
        self.sleep = self.http.sleep
        self.clock = self.http.clock

    def close(self) -> None:
        self.http.close()

    def _json(self, name: str, *, body: Any = None, query: Mapping[str, Any] | None = None,
              deadline: float | None = None, operation_type: str | None = None,
              **path: str) -> Any:
        answer = self.http.call(route(name), path_params=path, json_body=body, query=query,
                                deadline=deadline, operation_type=operation_type)
        if name not in _ANY_JSON and not isinstance(answer.body, Mapping):
            r = route(name)
            raise ProtocolError(
                f"{name} answered {type(answer.body).__name__} where the contract has a JSON object: "
                f"{answer.body!r}"[:300],
                route=name, method=r.method, status=answer.status,
                snowflake_request_id=answer.snowflake_request_id, job_id=path.get("job_id"),
            )
        self._last_answer = answer
        return answer.body

    # --- control plane ------------------------------------------------------------------
    def create_job(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self._json("create_job", body=dict(body)))

    def list_jobs(self, status: str | None = None) -> dict[str, Any]:
        return dict(self._json("list_jobs", query={"status": status}))

    def get_capacity(self) -> dict[str, Any]:
        return dict(self._json("get_capacity"))

    def get_job(self, job_id: str, *, deadline: float | None = None) -> dict[str, Any]:
        return dict(self._json("get_job", job_id=job_id, deadline=deadline))

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        return dict(self._json("cancel_job", job_id=job_id) or {})

    def get_experiment_run(self, job_id: str) -> dict[str, Any]:
        return dict(self._json("get_experiment_run", job_id=job_id))

    def list_checkpoints(self, job_id: str) -> dict[str, Any]:
        return dict(self._json("list_checkpoints", job_id=job_id))

    def export_checkpoint(self, job_id: str, checkpoint_id: str) -> dict[str, Any]:
        return dict(self._json("export_checkpoint", job_id=job_id, checkpoint_id=checkpoint_id))

    def fetch_execution_logs(self, job_id: str) -> list[dict[str, str]]:
        """Every log file of the job's run: experiment-run, stage credentials, S3 (spec §12.2)."""
        return _fetch_execution_logs(self, job_id)

    def delete_checkpoint(self, job_id: str, checkpoint_id: str) -> dict[str, Any]:
        answer = self._json("delete_checkpoint", job_id=job_id, checkpoint_id=checkpoint_id)
        return dict(answer) if isinstance(answer, Mapping) else {}

    # --- data plane: octet uploads ---------------------------------------------------------
    def _upload(self, name: str, job_id: str, payload: Payload, *, force_chunk: bool,
                chunk_group_id: str | None, max_chunk_bytes: int | None) -> dict[str, Any]:
        r = route(name)
        try:
            max_bytes = check_chunk_bytes(
                self.config.max_chunk_bytes if max_chunk_bytes is None else max_chunk_bytes)
        except ValueError as exc:
            raise ConfigError(str(exc), route=name, job_id=job_id) from None
        chunks = split_frame(
            frame_source(payload),
            max_bytes=max_bytes,
            operation=_operation_name(r),
            force_chunk=force_chunk,
            chunk_group_id=chunk_group_id,
        )
        # One deadline for the whole group (every chunk, retries and a restart replay).
        deadline = self.clock() + self.config.call_timeout_s
        # Request chunks carry a group id: resending them resolves to one execution.
        chunked = force_chunk or len(chunks) > 1
        return upload(self.http, r, chunks, path_params={"job_id": job_id}, deadline=deadline,
                      idempotency="group" if chunked else None)

    def forward_backward(self, job_id: str, payload: Payload, *, chunk_group_id: str | None = None,
                         max_chunk_bytes: int | None = None) -> dict[str, Any]:
        """Always the chunk envelope, even for one chunk: the group id is the call's identity."""
        return self._upload("forward_backward", job_id, payload, force_chunk=True,
                            chunk_group_id=chunk_group_id, max_chunk_bytes=max_chunk_bytes)

    def forward_no_grad(self, job_id: str, payload: Payload, *, chunk_group_id: str | None = None,
                        max_chunk_bytes: int | None = None) -> dict[str, Any]:
        """Proposed profile: request chunks like forward-backward."""
        return self._upload("forward_no_grad", job_id, payload, force_chunk=True,
                            chunk_group_id=chunk_group_id, max_chunk_bytes=max_chunk_bytes)

    def generate(self, job_id: str, payload: Payload, *,
                 max_chunk_bytes: int | None = None) -> dict[str, Any]:
        """The plain frame when it fits, request chunks otherwise."""
        return self._upload("generate", job_id, payload, force_chunk=False,
                            chunk_group_id=None, max_chunk_bytes=max_chunk_bytes)

    def generate_stream(self, job_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """UTF-8 JSON bytes sent as octet-stream, never chunked."""
        import json

        data = json.dumps(dict(body)).encode("utf-8")
        return dict(self.http.call(route("generate_stream"), path_params={"job_id": job_id},
                                   data=data).body)

    # --- data plane: JSON ----------------------------------------------------------------
    def step(self, job_id: str, learning_rate: float | None = None) -> dict[str, Any]:
        return dict(self._json("step", body=given(learning_rate=learning_rate), job_id=job_id))

    def save(self, job_id: str, checkpoint_id: str | None = None,
             checkpoint_type: str | None = None) -> dict[str, Any]:
        body = given(checkpoint_id=checkpoint_id, checkpoint_type=checkpoint_type)
        return dict(self._json("save", body=body, job_id=job_id))

    def load(self, job_id: str, checkpoint_id: str, source_job_id: str | None = None,
             target_sub_job_id: str | None = None) -> dict[str, Any]:
        body = {"checkpoint_id": checkpoint_id,
                **given(source_job_id=source_job_id, target_sub_job_id=target_sub_job_id)}
        return dict(self._json("load", body=body, job_id=job_id))

    def log_probs(self, job_id: str, prompts: list[Any], completions: list[Any] | None = None,
                  top_k: int | None = None) -> dict[str, Any]:
        body = {"prompts": prompts, **given(completions=completions, top_k=top_k)}
        return dict(self._json("log_probs", body=body, job_id=job_id))

    def operation(self, job_id: str, operation_type: str, payload: Mapping[str, Any] | None = None,
                  *, sub_job_id: str | None = None, sub_job_type: str | None = None) -> Any:
        """The answer as is: an inline result, or ``{"request_id", ...}`` to wait on."""
        body = {"operation_type": operation_type, "payload": dict(payload or {}),
                **given(sub_job_id=sub_job_id, sub_job_type=sub_job_type)}
        return self._json("operation", body=body, job_id=job_id, operation_type=operation_type)

    def forward_operation(self, job_id: str, payload: Payload, *,
                          sub_job_id: str | None = None) -> Any:
        """Current-profile forward: a plain frame, base64, in the ``operation`` envelope."""
        frame = encode_frame(payload)
        if len(frame) > MAX_BODY_BYTES:
            raise PayloadTooLarge(
                f"forward operation frame is {len(frame)} bytes; the operation route takes at "
                f"most {MAX_BODY_BYTES} and is not chunked (use the proposed forward-no-grad route)",
                route="operation", job_id=job_id,
            )
        encoded = {"payload_b64": base64.b64encode(frame).decode("ascii"), "content_type": OCTET}
        return self.operation(job_id, "forward", encoded, sub_job_id=sub_job_id)

    def get_request(self, job_id: str, request_id: str, *, cursor: str | None = None,
                    max_events: int | None = None, deadline: float | None = None) -> dict[str, Any]:
        query = {"cursor": cursor, "max_events": max_events or self.config.max_events}
        return dict(self._json("get_request", query=query, deadline=deadline,
                               job_id=job_id, request_id=request_id))

    # --- waiting -----------------------------------------------------------------------------
    def wait(self, job_id: str, request_id: str, *, route_name: str = "get_request") -> Any:
        """Poll a request to its end and return the decoded result (``{}`` when none)."""
        def fetch(cursor: str | None, deadline: float) -> dict[str, Any]:
            return self.get_request(job_id, request_id, cursor=cursor, deadline=deadline)

        self._last_answer = None
        try:
            return wait_request(fetch, route=route_name, job_id=job_id, request_id=request_id,
                                policy=self.config.poll_policy(), sleep=self.sleep, clock=self.clock)
        except CortexError as exc:
            _quote_last_answer(exc, self._last_answer)
            raise

    def result(self, job_id: str, answer: Any, *, route_name: str) -> Any:
        """Wait on an answer holding ``request_id``; anything else is the result itself."""
        if isinstance(answer, Mapping) and answer.get("request_id"):
            return self.wait(job_id, str(answer["request_id"]), route_name=route_name)
        return answer

    def operation_result(self, job_id: str, operation_type: str, answer: Any) -> Any:
        """An operation's result: async types (and submit answers) are waited on.

        Spec §7: an answer holding a request_id is polled. Inline acknowledgements may carry
        a ``request_id`` of their own (cancel-request names the request it cancelled), so
        the id alone does not mean "poll me": a submission also names its job and none of
        an inline answer's fields; fields nobody declares (spec §11) do not hide one.
        """
        if operation_type in ASYNC_OPERATIONS or is_submission(answer):
            return self.result(job_id, answer, route_name="operation")
        return answer

    def stream(self, job_id: str, request_id: str) -> Iterator[dict[str, Any]]:
        """Generate-stream events in arrival order, ending with the ``done`` event."""
        def fetch(cursor: str | None, deadline: float) -> dict[str, Any]:
            return self.get_request(job_id, request_id, deadline=deadline)

        return iter_stream_events(fetch, route="generate_stream", job_id=job_id,
                                  request_id=request_id, policy=self.config.poll_policy(),
                                  sleep=self.sleep, clock=self.clock)

    def wait_running(self, job_id: str) -> dict[str, Any]:
        """Poll the job until ``running`` (JobFailed if it ends first)."""
        return wait_job_running(lambda deadline: self.get_job(job_id, deadline=deadline),
                                job_id=job_id, policy=self.config.job_start_policy(),
                                sleep=self.sleep, clock=self.clock)
