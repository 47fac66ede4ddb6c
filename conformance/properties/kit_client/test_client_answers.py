"""CLIENT: how the kit's client reads the server's answers: a request id on a non-final
chunk refused, result chunks drained by cursor with sha checks, state spellings
normalised, typed errors, the poll schedule, and results that agree with the shape rules
in every delivery form and status dialect."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from client.errors import CortexError
from conformance.drivers.kit_client import ClientDriver
from conformance.fixtures import Variant
from conformance.inputs.strategies import tensor
from conformance.jobs import SharedJob
from conformance.judging.variants import CHUNK_BYTES
from conformance.options import GsOptions
from conformance.properties.kit_client import CLEAN, Sleeps, client_for
from conformance.reporting.violations import Soft, expect
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.shapes import check_forward_result, check_generate_result, check_loss
from contract.wire import CHUNK_HEADER_ALLOWANCE


@checks("CLIENT-CHUNK-3")
def test_nonfinal_request_id_is_protocol_error(gs_variant: Variant, gs_opts: GsOptions) -> None:
    """A non-final chunk answered with a request_id makes the client fail (ProtocolError)."""
    from client.errors import ProtocolError

    target = gs_variant("client-bad-acks", variation="nonfinal-chunk-request-id")
    client = client_for(target, gs_opts, max_chunk_bytes=CHUNK_HEADER_ALLOWANCE + 512)
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
    client = client_for(_chunked_target(gs_variant), gs_opts, sleep=sleeps, max_events=2)
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
    client = client_for(gs_variant("client-enum", status_style="enum", **CLEAN), gs_opts)
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
    client = client_for(target, gs_opts, sleep=sleeps, **defaults)
    before = len(sleeps.calls)
    client.call("step", {})
    waits = sleeps.calls[before:]
    want = [min(6.0, 0.5 * 1.25**i) for i in range(len(waits))]
    expect("CLIENT-POLL-2", len(waits) >= 10 and all(abs(a - b) < 1e-9 for a, b in zip(waits, want, strict=True)),
           f"waits between polls {waits}, want {want}")
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
        client = client_for(target, gs_opts)
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
