"""A tiny raw-HTTP helper for the fake's tests: URLs, jobs, frames, polling, decoding.

Deliberately not the kit's client: these tests check the server byte for byte.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import requests

from contract import wire
from contract.errors import REQUEST_ID_HEADER
from contract.routes import prefix
from contract.states import normalize_job_state, normalize_request_state
from fake_gs.testing.admin_api import AdminApi

if TYPE_CHECKING:
    from fake_gs import FakeServer

OCTET = {"Content-Type": "application/octet-stream"}
MODEL = "Qwen/Qwen3-0.6B"


#: Long enough for every frame the tests send (the fake refuses longer ones, FB-SEQLEN-1).
TRAIN_MAX_SEQ_LEN = 65_536


def training_config(n_gpus: int = 1, **extra: Any) -> dict[str, Any]:
    return {"job_type": "training", "model_name": MODEL,
            "training_config": {"optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": TRAIN_MAX_SEQ_LEN,
                                "train_batch_size": 2, "n_gpus": n_gpus, **extra}}


def sampling_config(n_gpus: int = 1, max_seq_len: int = 64) -> dict[str, Any]:
    return {"job_type": "sampling", "model_name": MODEL,
            "inference_config": {"max_seq_len": max_seq_len, "n_gpus": n_gpus}}


def batch(b: int = 2, s: int = 5, **extra: Any) -> dict[str, Any]:
    import torch

    return {"args": [], "kwargs": {"input_ids": torch.arange(b * s).reshape(b, s),
                                   "labels": torch.arange(b * s).reshape(b, s)}, **extra}


def eventually(predicate: Callable[[], bool], timeout_s: float = 10.0, every_s: float = 0.005) -> bool:
    """Has ``predicate`` become true within ``timeout_s`` (checked every ``every_s``)?"""
    pause = threading.Event()  # never set: its wait is the pause between checks
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        pause.wait(every_s)
    return True


class Api:
    """Raw calls against one fake; every answer is checked for the request-id header."""

    def __init__(self, base_url: str, token: str | None = None, database: str = "DB", schema: str = "PUBLIC",
                 endpoint: str = "cortex-training", server: FakeServer | None = None) -> None:
        self.base_url = base_url
        #: The fake in this process, when the test started it (None: only its URL is known).
        self.server = server
        self.prefix = base_url + prefix(database, schema, endpoint)
        self.session = requests.Session()
        #: The fake's admin API under this token (the admin token, in the tests that use it).
        self.admin = AdminApi(base_url, token)
        if token is not None:
            self.session.headers["Authorization"] = f"Bearer {token}"
            self.session.headers["X-Snowflake-Authorization-Token-Type"] = "PROGRAMMATIC_ACCESS_TOKEN"

    def call(self, method: str, path: str, *, check_id: bool = True, **kw: Any) -> requests.Response:
        url = path if path.startswith("http") else (self.base_url + path if path.startswith("/_fake") else self.prefix + path)
        r = self.session.request(method, url, timeout=60, **kw)
        if check_id:
            assert REQUEST_ID_HEADER in r.headers, (method, path, r.status_code)
        return r

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.call("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> requests.Response:
        return self.call("POST", path, **kw)

    # --- jobs -----------------------------------------------------------------------------

    def create_job(self, *configs: dict[str, Any], **body: Any) -> str:
        r = self.post("/", json={"sub_job_configs": list(configs or (training_config(), sampling_config())), **body})
        assert 200 <= r.status_code < 300, r.text  # any 2xx: the any dialect answers 201 too
        return str(r.json()["job_id"])

    def job(self, job_id: str) -> dict[str, Any]:
        r = self.get(f"/{job_id}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    def wait_running(self, job_id: str, limit: int = 50) -> dict[str, Any]:
        for _ in range(limit):
            job = self.job(job_id)
            if normalize_job_state(job["status"]) == "running":
                return job
        raise AssertionError(f"job {job_id} never ran: {job}")

    def running_job(self, *configs: dict[str, Any]) -> str:
        job_id = self.create_job(*configs)
        self.wait_running(job_id)
        return job_id

    def state(self) -> dict[str, Any]:
        """The fake's state dump (``AdminApi.state``)."""
        return self.admin.state()

    # --- data plane -----------------------------------------------------------------------

    def submit_json(self, job_id: str, route: str, body: Any = None) -> str:
        r = self.post(f"/{job_id}/{route}", json=body if body is not None else {})
        assert 200 <= r.status_code < 300, r.text  # the any dialect answers 202 too
        return str(r.json()["request_id"])

    def send_frame(self, job_id: str, route: str, obj: Any, *, max_bytes: int = 0, force_chunk: bool = True,
                   group: str | None = None) -> requests.Response:
        """Send a frame as request chunks (or plain when ``force_chunk`` is False and it fits)."""
        frame = wire.dumps(obj, metadata=wire.standard_request_metadata())
        chunks = wire.encode_byte_chunks(frame, "request", operation=route, max_bytes=max_bytes,
                                         chunk_group_id=group or str(uuid.uuid4()), force_chunk=force_chunk)
        r = None
        for i, chunk in enumerate(chunks):
            r = self.post(f"/{job_id}/{route}", data=chunk, headers=OCTET)
            if i < len(chunks) - 1:
                assert r.status_code in (200, 202), r.text
                assert "request_id" not in r.json()
        assert r is not None
        return r

    def submit_frame(self, job_id: str, route: str, obj: Any, **kw: Any) -> str:
        r = self.send_frame(job_id, route, obj, **kw)
        assert 200 <= r.status_code < 300, r.text
        return str(r.json()["request_id"])

    def poll(self, job_id: str, request_id: str, **params: Any) -> dict[str, Any]:
        r = self.get(f"/{job_id}/requests/{request_id}", params=params)
        assert r.status_code == 200, r.text
        return dict(r.json())

    def wait(self, job_id: str, request_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Poll until terminal; returns the terminal poll answer (events of all pages merged).

        No pause between polls: a poll of a request that is due but still executing waits
        on the server for it (``poll_wait_s``), and ``polls:N`` latency advances per poll."""
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ans = self.poll(job_id, request_id)
            events.extend(ans["events"])
            if normalize_request_state(ans["status"]) in ("done", "failed", "cancelled"):
                cursor = ans["next_cursor"]
                while cursor:
                    page = self.poll(job_id, request_id, cursor=cursor)
                    events.extend(page["events"])
                    cursor = page["next_cursor"]
                ans["events"] = events
                return ans
        raise AssertionError(f"request {request_id} never finished")

    def result(self, job_id: str, request_id: str) -> Any:
        """The decoded result of a request that must succeed, whatever its delivery form."""
        ans = self.wait(job_id, request_id)
        assert normalize_request_state(ans["status"]) == "done", ans
        return decode_result(ans)


def decode_result(ans: dict[str, Any]) -> Any:
    chunk_events = [e for e in ans["events"] if e.get("type") == "result_chunk"]
    if chunk_events:
        return wire.loads(wire.decode_result_chunk_events(chunk_events))
    result = ans["result"]
    if wire.is_inline_frame(result):
        return wire.loads(wire.decode_inline(result))
    return {} if result is None else result


def zero_frame_chunks(frame_size: int, max_bytes: int, route: str = "forward-backward") -> list[bytes]:
    """The chunks of a forward-backward frame of about ``frame_size`` bytes of zero ids,
    without holding the frame: its tensor is zero pages of a fresh map."""
    import mmap

    import torch

    cols = 1024
    rows = max(1, frame_size // (cols * 8))
    ids = torch.frombuffer(mmap.mmap(-1, rows * cols * 8), dtype=torch.int64).reshape(rows, cols)
    parts = wire.dumps_parts({"args": [], "kwargs": {"input_ids": ids}}, metadata=wire.standard_request_metadata())
    plan = wire.plan_chunks(parts, "request", route, max_bytes, str(uuid.uuid4()), True)
    return [plan.chunk(i) for i in range(len(plan))]
