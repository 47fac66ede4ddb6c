"""CLIENT: what the kit's client refuses on its own, before anything is sent: a job config
the service cannot run, and a prompt too long for the sampler."""

from __future__ import annotations

import pytest

from conformance.drivers.kit_client import ClientDriver
from conformance.jobs import SharedJob
from conformance.options import GsOptions
from conformance.reporting.violations import expect
from contract.clauses import checks


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
