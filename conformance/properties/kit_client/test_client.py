"""CLIENT: the kit's client, driven against the target (and fault-injecting fakes): retries,
chunk envelopes and replays, cursor draining with sha checks, state normalisation, typed
errors, prompt checks, and results that agree with the shape rules in every dialect."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import requests

from client.errors import CortexError
from conformance.drivers.kit_client import ClientDriver, ClientOps
from conformance.fake_admin import faults_fake
from conformance.fixtures import Variant
from conformance.inputs.strategies import tensor
from conformance.jobs import SharedJob
from conformance.judging.variants import CHUNK_BYTES
from conformance.options import GsOptions
from conformance.reporting.violations import Soft, expect
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.shapes import check_forward_result, check_generate_result, check_loss
from contract.wire import CHUNK_HEADER_ALLOWANCE, chunk_descriptor
from fake_gs.testing.admin_api import AdminApi

#: Client-subject clauses judge the client, so the fakes they use never carry the mutant
#: under test (a broken server would make a correct client look wrong).
CLEAN = {"mutant": None}


class Sleeps:
    """An injected sleep: records every wait instead of blocking (or blocks briefly)."""

    def __init__(self, real: bool = False) -> None:
        self.calls: list[float] = []
        self.real = real

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if self.real:
            time.sleep(min(seconds, 0.05))


def _client(
    target: Target, gs_opts: GsOptions, job_id: str | None=None, **config: Any
) -> ClientDriver:
    return ClientDriver(target, job_id, model=gs_opts.model, **config)


@pytest.fixture
def faulty(gs_variant: Variant) -> Iterator[tuple[Target, AdminApi]]:
    """A clean fake reserved for fault rules, faults cleared after each test."""
    yield from faults_fake(gs_variant, "client-faults", 4242)


def _fired(admin: AdminApi) -> list[dict]:
    return admin.faults()


STATUSES = [404, 409, 429, 500, 502, 503, 504]


@checks("CLIENT-RETRY-1")
@pytest.mark.parametrize("fault", [*map(str, STATUSES), "drop", "timeout"])
def test_client_retries_transient_failures(
    faulty: tuple[Target, AdminApi], gs_opts: GsOptions, fault: str
) -> None:
    """Transient statuses, dropped connections and time-outs are retried until success."""
    target, admin = faulty
    sleeps = Sleeps()
    client = _client(target, gs_opts, open_job=False, sleep=sleeps, read_timeout_s=0.5)
    rule: dict[str, Any]  # a fault rule of the fake's admin API (JSON)
    if fault == "drop":
        rule = {"route": "get_capacity", "drop": True, "times": 2}
    elif fault == "timeout":
        rule = {"route": "get_capacity", "delay_s": 1.0, "times": 1}
    else:
        status = int(fault)
        rule = {
            "route": "get_capacity",
            "status": status,
            "times": 2,
            "code": {404: ErrorCode.JOB_NOT_FOUND, 409: "busy"}.get(status),
        }
    admin.set_faults([{k: v for k, v in rule.items() if v is not None}])
    try:
        cap = client.rest.get_capacity()
    except Exception as exc:
        expect("CLIENT-RETRY-1", False, f"client gave up on a transient {fault}: {exc!r}")
    rules = _fired(admin)
    expect(
        "CLIENT-RETRY-1",
        isinstance(cap, dict) and rules[0].get("fired") == rule["times"],
        f"fault fired {rules[0].get('fired')} times, capacity {cap!r}",
    )
    expect(
        "CLIENT-RETRY-1",
        len(sleeps.calls) >= rule["times"] if fault != "timeout" else True,
        f"no back-off between retries: {sleeps.calls}",
    )
    client.close()


@checks("CLIENT-RETRY-2")
@pytest.mark.parametrize("fault", ["503", "drop"])
def test_create_not_retried_when_it_may_have_landed(
    faulty: tuple[Target, AdminApi], gs_opts: GsOptions, fault: str
) -> None:
    """A create-job that reached the server (an answer, or a cut after sending) is not retried."""
    target, admin = faulty
    rule = {
        "route": "create_job",
        "times": 1,
        **({"status": 503} if fault == "503" else {"drop": True}),
    }
    admin.set_faults([rule])
    client = _client(target, gs_opts, open_job=False, sleep=Sleeps())
    from conformance.inputs import valid_bodies as bodies

    with pytest.raises(CortexError) as info:
        client.rest.create_job(bodies.small_job(gs_opts.model))
    fired = _fired(admin)[0]
    expect(
        "CLIENT-RETRY-2",
        fired.get("seen") == 1,
        f"create-job reached the server {fired.get('seen')} times ({info.value!r})",
    )
    client.close()


@checks("CLIENT-RETRY-2")
def test_create_retried_when_never_sent(gs_opts: GsOptions, gs_target: Target) -> None:
    """A create-job whose connection was never established is retried."""
    from dataclasses import replace

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    dead = replace(gs_target, base_url=f"http://127.0.0.1:{port}")
    client = _client(dead, gs_opts, open_job=False, sleep=Sleeps(), retries=3)
    attempts = []
    original = client.session.request

    def counting(*args: Any, **kwargs: Any) -> requests.Response:
        attempts.append(1)
        return original(*args, **kwargs)

    client.session.request = counting  # type: ignore[method-assign]
    from conformance.inputs import valid_bodies as bodies

    with pytest.raises(CortexError):
        client.rest.create_job(bodies.small_job(gs_opts.model))
    expect(
        "CLIENT-RETRY-2",
        len(attempts) == 4,
        f"{len(attempts)} attempts to a closed port, want 1 + 3 retries",
    )


@checks("CLIENT-RETRY-3")
@pytest.mark.parametrize("cap", [6.0, 0.2])
def test_retry_after_honoured(
    faulty: tuple[Target, AdminApi], gs_opts: GsOptions, cap: float
) -> None:
    """Retry-After (1 s here) is waited for, bounded by the back-off cap."""
    target, admin = faulty
    admin.set_faults([{"route": "get_capacity", "status": 429, "times": 1}])
    sleeps = Sleeps()
    client = _client(
        target, gs_opts, open_job=False, sleep=sleeps, backoff_cap_s=cap, backoff_first_s=0.01
    )
    client.rest.get_capacity()
    expect(
        "CLIENT-RETRY-3",
        sleeps.calls and abs(sleeps.calls[0] - min(1.0, cap)) < 1e-6,
        f"slept {sleeps.calls} after a 429 with Retry-After: 1 (cap {cap})",
    )
    client.close()


@checks("CLIENT-CHUNK-1")
def test_single_chunk_envelope(gs_client: ClientDriver, gs_client_ops: ClientOps) -> None:
    """forward-backward sends the chunk envelope even when one chunk would do."""
    from contract import wire

    before = len(gs_client.sent)
    gs_client_ops.fwd_bwd({"input_ids": tensor((1, 3), "int64", 2)})
    posts = [s for s in gs_client.sent[before:] if s.calls("forward_backward")]
    expect(
        "CLIENT-CHUNK-1", len(posts) == 1, f"{len(posts)} forward-backward posts for a tiny frame"
    )
    found = wire.chunk_descriptor(posts[0].body)
    expect(
        "CLIENT-CHUNK-1",
        found is not None
        and found[0] == "request"
        and found[1].get("total_chunks") == 1
        and found[1].get("chunk_group_id"),
        f"the single post is not a request chunk: {found!r}",
    )


def _descriptor(body: bytes) -> dict[str, Any]:
    """The descriptor of a chunk the client sent (its chunk POSTs carry nothing else)."""
    found = chunk_descriptor(body)
    assert found is not None, f"the client posted a plain frame as a chunk: {body[:40]!r}"
    return found[1]


@checks("CLIENT-CHUNK-2")
def test_restart_replays_whole_group(faulty: tuple[Target, AdminApi], gs_opts: GsOptions) -> None:
    """On chunk_group_restart_required the client replays the whole group once from chunk 0."""

    target, admin = faulty
    client = _client(target, gs_opts, max_chunk_bytes=CHUNK_HEADER_ALLOWANCE + 512)
    admin.set_faults(
        [
            {
                "route": "forward_backward",
                "nth": 2,
                "times": 1,
                "status": 409,
                "code": ErrorCode.CHUNK_GROUP_RESTART_REQUIRED,
            }
        ]
    )
    before = len(client.sent)
    result = client.call("fwd-bwd", {"input_ids": tensor((2, 200), "int64", 9)})
    posts = [s for s in client.sent[before:] if s.calls("forward_backward")]
    descriptors = [_descriptor(p.body) for p in posts]
    idx = [d["chunk_idx"] for d in descriptors]
    groups = {d["chunk_group_id"] for d in descriptors}
    total = descriptors[0]["total_chunks"]
    expect(
        "CLIENT-CHUNK-2",
        idx == [0, 1] + list(range(total)) and len(groups) == 1,
        f"chunk order {idx} over {len(groups)} group id(s), want [0, 1] then 0..{total - 1} once",
    )
    expect("CLIENT-CHUNK-2", not check_loss(result.get("avg_loss")), f"result {result!r}")
    client.close()


@checks("CLIENT-CHUNK-3")
def test_nonfinal_request_id_is_protocol_error(gs_variant: Variant, gs_opts: GsOptions) -> None:
    """A non-final chunk answered with a request_id makes the client fail (ProtocolError)."""
    from client.errors import ProtocolError

    target = gs_variant("client-bad-acks", mutant="nonfinal-chunk-request-id")
    client = _client(target, gs_opts, max_chunk_bytes=CHUNK_HEADER_ALLOWANCE + 512)
    with pytest.raises(ProtocolError):
        client.call("fwd-bwd", {"input_ids": tensor((2, 200), "int64", 9)})
    client.close()


def _chunked_target(gs_variant: Variant, **extra: Any) -> Target:
    return gs_variant(
        "client-chunks", result_delivery="chunks", result_chunk_bytes=CHUNK_BYTES, **CLEAN, **extra
    )


@checks("CLIENT-POLL-1")
def test_cursor_drain_without_backoff(gs_variant: Variant, gs_opts: GsOptions) -> None:
    """Result pages are fetched back to back (no sleeps), and a bad chunk sha256 is refused."""
    from client.errors import ProtocolError
    from conformance.drivers import tamper

    sleeps = Sleeps()
    client = _client(_chunked_target(gs_variant), gs_opts, sleep=sleeps, max_events=2)
    body = {"args": [], "kwargs": {"input_ids": tensor((2, 300), "int64", 1)}}
    before = len(client.sent)
    result = client.call("fwd-no-grad", body)
    polls = [s for s in client.sent[before:] if s.calls("get_request")]
    expect(
        "CLIENT-POLL-1", not check_forward_result(body, result), "chunked result decoded wrongly"
    )
    expect(
        "CLIENT-POLL-1",
        len(polls) > 2 and not sleeps.calls,
        f"{len(polls)} polls with sleeps {sleeps.calls[:5]} while draining pages",
    )
    adapter = tamper.install(client.session, tamper.corrupt_first_chunk_sha)
    with pytest.raises(ProtocolError) as info:
        client.call("fwd-no-grad", body)
    expect(
        "CLIENT-POLL-1",
        adapter.tampered and "sha256" in str(info.value),
        f"corrupted digest not reported as such: {info.value}",
    )
    client.close()


@checks("CLIENT-STATE-1")
def test_enum_dialect_normalised(gs_variant: Variant, gs_opts: GsOptions) -> None:
    """Against the enum dialect (JOB_STATE_RUNNING, REQUEST_STATE_DONE) the client still works."""
    client = _client(gs_variant("client-enum", status_style="enum", **CLEAN), gs_opts)
    soft = Soft()
    step = client.call("step", {})
    soft.expect("CLIENT-STATE-1", isinstance(step.get("global_steps"), int), f"step {step!r}")
    save = client.call("save-checkpoint", {})
    soft.expect("CLIENT-STATE-1", bool(save.get("checkpoint_id")), f"save {save!r}")
    client.close()
    soft.check()


@checks("CLIENT-ERR-1")
def test_typed_errors(gs_client: ClientDriver, gs_job: SharedJob) -> None:
    """Failures are typed errors naming route, status, code and the x-snowflake-request-id
    the answer carried (spec §2.4: an answer may carry none)."""
    from client.errors import CortexError

    soft = Soft()
    for call, route, code in (
        (lambda: gs_client.rest.get_job("00000000-0000-4000-8000-0000000000aa"), "get_job",
         ErrorCode.JOB_NOT_FOUND),
        (lambda: gs_client.rest.step(gs_job.job_id, learning_rate=-1.0), "step", None),
    ):
        try:
            call()
        except CortexError as exc:
            answer = gs_client.sent[-1]
            soft.expect(
                "CLIENT-ERR-1",
                exc.route == route and exc.status == answer.status,
                f"error names route {exc.route!r} status {exc.status!r}; the answer was {answer.status}",
            )
            soft.expect(
                "CLIENT-ERR-1",
                # The kit's string code, the integer status a spec-form body carries, or the
                # type of a bare detail list's first entry.
                exc.code and (code is None or exc.code in (code, str(answer.status))),
                f"code {exc.code!r}",
            )
            header = answer.request_id_header
            soft.expect(
                "CLIENT-ERR-1",
                exc.snowflake_request_id == header and (header is None or header in str(exc)),
                f"the answer's x-snowflake-request-id {header!r}, the error names "
                f"{exc.snowflake_request_id!r}: {exc}",
            )
        else:
            soft.expect("CLIENT-ERR-1", False, f"{route} did not fail")
    soft.check()


@checks("CLIENT-POLL-2")
def test_poll_defaults(gs_variant: Variant, gs_opts: GsOptions) -> None:
    """By default the client polls at 0.5 s, x1.25 each time up to 6 s, for 1800 s (spec
    §3.4): its config's defaults, and the waits between polls of a slow request."""
    from client.config import ClientConfig

    names = ("poll_first_s", "poll_factor", "poll_cap_s", "poll_timeout_s")
    defaults = {n: ClientConfig.model_fields[n].default for n in names}
    expect("CLIENT-POLL-2", defaults == dict(zip(names, (0.5, 1.25, 6.0, 1800.0), strict=True)),
           f"the client's poll defaults are {defaults}")
    sleeps = Sleeps()
    target = gs_variant("client-slow-polls", latency="polls:16", **CLEAN)
    client = _client(target, gs_opts, sleep=sleeps, **defaults)
    before = len(sleeps.calls)
    client.call("step", {})
    waits = sleeps.calls[before:]
    want = [min(6.0, 0.5 * 1.25**i) for i in range(len(waits))]
    expect("CLIENT-POLL-2", len(waits) >= 10 and all(abs(a - b) < 1e-9 for a, b in zip(waits, want, strict=True)),
           f"waits between polls {waits}, want {want}")
    client.close()


@checks("CLIENT-NOBODY-1")
@pytest.mark.gs_fake_optional
def test_cancel_and_export_send_no_body(
    gs_target: Target, gs_variant: Variant, gs_client: ClientDriver, gs_opts: GsOptions
) -> None:
    """The client's cancel and export carry no body (spec §5.5, §5.8)."""
    client = _client(gs_variant("client-nobody", **CLEAN), gs_opts) if gs_target.embedded else gs_client
    ckpt = str(client.call("save-checkpoint", {}).get("checkpoint_id"))
    before = len(client.sent)
    client.rest.export_checkpoint(client.job_id, ckpt)
    if gs_target.embedded:  # against a URL the session job is cancelled at the end, raw
        client.rest.cancel_job(client.job_id)
    sent = [s for s in client.sent[before:] if s.calls("export_checkpoint") or s.calls("cancel_job")]
    expect("CLIENT-NOBODY-1", sent, "no export or cancel was sent")
    for s in sent:
        expect("CLIENT-NOBODY-1", not s.body and not s.content_type,
               f"{s.method} {s.url} carried a body {s.body[:80]!r} ({s.content_type or 'no content type'})")
    if client is not gs_client:
        client.close()


DIALECTS = [
    ("short", "auto"),
    ("short", "inline"),
    ("short", "chunks"),
    ("enum", "auto"),
    ("enum", "inline"),
    ("enum", "chunks"),
]


@checks("CLIENT-SHAPE-1")
@pytest.mark.parametrize("style,delivery", DIALECTS)
@pytest.mark.gs_fake_optional
def test_client_agrees_with_shape_rules(
    gs_target: Target,
    gs_variant: Variant,
    gs_client: ClientDriver,
    gs_opts: GsOptions,
    style: str,
    delivery: str,
) -> None:
    """Through every delivery form and status dialect, client results obey the shape rules."""
    if gs_target.embedded:
        target = gs_variant(
            f"client-{style}-{delivery}",
            status_style=style,
            result_delivery=delivery,
            result_chunk_bytes=CHUNK_BYTES,
            **CLEAN,
        )
        client = _client(target, gs_opts)
    elif (style, delivery) == ("short", "auto"):
        client = gs_client
    else:
        pytest.skip("dialect and delivery are settings of the embedded fake")
    soft = Soft()
    fwd = {
        "args": [],
        "kwargs": {"input_ids": tensor((3, 40), "int64", 3)},
        "meta": {"calculate_entropy": True},
    }
    forward = client.call("fwd-no-grad", fwd)
    if isinstance(forward, Mapping) and "model_outputs" in forward:  # spec §11: backend-specific
        soft.extend("CLIENT-SHAPE-1", check_forward_result(fwd, forward))
    gen = {"prompts": ["a", [1, 2, 3]], "sampling_params": {"max_tokens": 5, "logprobs": 1}}
    soft.extend("CLIENT-SHAPE-1", check_generate_result(gen, client.call("generate", gen)))
    fb = client.call("fwd-bwd", {"input_ids": tensor((2, 7), "int64", 5)})
    soft.extend("CLIENT-SHAPE-1", check_loss(fb.get("avg_loss")))
    if client is not gs_client:
        client.close()
    soft.check()
