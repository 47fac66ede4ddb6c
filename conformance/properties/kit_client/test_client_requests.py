"""CLIENT: what the kit's client sends, and what it refuses to send: the chunk envelope
even for one chunk, a whole group replayed on restart, cancel and export without a body;
before anything is sent, a job config the service cannot run and a prompt too long for
the sampler."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.drivers.kit_client import ClientDriver, ClientOps
from conformance.fixtures import Variant
from conformance.inputs.strategies import tensor
from conformance.jobs import SharedJob
from conformance.options import GsOptions
from conformance.properties.kit_client import CLEAN, client_for
from conformance.reporting.violations import expect
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.shapes import check_loss
from contract.wire import CHUNK_HEADER_ALLOWANCE, chunk_descriptor
from fake_gs.testing.admin_api import AdminApi


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
    client = client_for(target, gs_opts, max_chunk_bytes=CHUNK_HEADER_ALLOWANCE + 512)
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


@checks("CLIENT-NOBODY-1")
@pytest.mark.gs_fake_optional
def test_cancel_and_export_send_no_body(
    gs_target: Target, gs_variant: Variant, gs_client: ClientDriver, gs_opts: GsOptions
) -> None:
    """The client's cancel and export carry no body (spec §5.5, §5.8)."""
    client = client_for(gs_variant("client-nobody", **CLEAN), gs_opts) if gs_target.embedded else gs_client
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


@checks("CLIENT-CONFIG-1")
@pytest.mark.parametrize("prime", [{"fp32_lm_head": True}, {"fused_cross_entropy": True,
                                   "fused_lm_head_token_chunk_size": 2048}])
def test_fused_lm_head_refused_locally(gs_opts: GsOptions, prime: dict[str, object]) -> None:
    """A PrimeRL config with fused cross-entropy and an fp32 or chunked LM head fails in
    the client, before anything is sent (spec §8.2)."""
    from client.config import ClientConfig
    from client.errors import ConfigError
    from client.jobspec import create_job_body

    config = ClientConfig(base_url="http://127.0.0.1:9", model=gs_opts.model, training_gpus=1,
                          training_extra={"prime_rl": prime})
    with pytest.raises(ConfigError):
        create_job_body(config)
    fine = ClientConfig(base_url="http://127.0.0.1:9", model=gs_opts.model, training_gpus=1,
                        training_extra={"prime_rl": {**prime, "fused_cross_entropy": False}})
    expect("CLIENT-CONFIG-1", create_job_body(fine)["sub_job_configs"], "the unfused config was refused")


@checks("CLIENT-PROMPT-1")
def test_long_prompt_fails_locally(gs_client: ClientDriver, gs_job: SharedJob) -> None:
    """A token prompt too long for the sampler fails before anything is sent."""
    from client.errors import PromptTooLong

    ids = gs_client.ids
    limit = (ids.sampling_max_seq_len if ids is not None else None) or gs_job.sampling_max_seq_len
    if limit is None:
        pytest.skip("the job names no sampling max_seq_len: no prompt is too long for it")
    before = len(gs_client.sent)
    with pytest.raises(PromptTooLong):
        gs_client.call("generate", {"prompts": [[1] * limit]})
    expect(
        "CLIENT-PROMPT-1",
        len(gs_client.sent) == before,
        f"{len(gs_client.sent) - before} request(s) sent for a prompt the client must refuse",
    )
