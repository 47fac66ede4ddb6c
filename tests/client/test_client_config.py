"""ClientConfig: legacy aliases, dropped fields, kept on-prem knobs, clear validation errors."""

from __future__ import annotations

import warnings

import pytest
from pydantic import ValidationError

from client.config import (
    DROPPED_FIELDS,
    LEGACY_FIELDS,
    MIN_CHUNK_PAYLOAD_BYTES,
    ONPREM_FIELDS,
    ClientConfig,
)
from client.errors import ConfigError
from client.jobspec import create_job_body, plan_job
from client.rest import CortexRestClient
from contract.limits import DEFAULT_CHUNK_BYTES, MAX_BODY_BYTES, PollPolicy, RetryPolicy
from contract.routes import DEFAULT_ENDPOINT
from contract.wire import CHUNK_HEADER_ALLOWANCE

#: The smallest chunk size a client accepts: one chunk header plus a sane share of frame.
FLOOR = CHUNK_HEADER_ALLOWANCE + MIN_CHUNK_PAYLOAD_BYTES


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("local", "onprem"), ("dss-platform", "onprem"), ("neutrino", "cortex")],
)
def test_legacy_backend_collapses_with_deprecation_warning(raw: str, expected: str) -> None:
    with pytest.warns(DeprecationWarning, match=raw):
        cfg = ClientConfig(backend=raw, base_url="http://h")
    assert cfg.backend == expected


@pytest.mark.parametrize("backend", ["cortex", "onprem"])
def test_canonical_backend_does_not_warn(backend: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ClientConfig(backend=backend, base_url="http://h").backend == backend


def test_unknown_backend_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="backend"):
        ClientConfig(backend="ray")


def test_sample_gpus_is_an_alias_of_sampling_gpus() -> None:
    cfg = ClientConfig(sample_gpus=3)
    assert cfg.sampling_gpus == 3
    assert "sampling_gpus" in cfg.model_fields_set


def test_canonical_name_wins_over_alias() -> None:
    assert ClientConfig(sample_gpus=3, sampling_gpus=5).sampling_gpus == 5


def test_unknown_fields_are_ignored() -> None:
    cfg = ClientConfig.model_validate({"no_such_knob": 1, "another": {"x": 2}})
    assert not hasattr(cfg, "no_such_knob")


@pytest.mark.parametrize("name", sorted(DROPPED_FIELDS))
def test_legacy_fields_are_dropped_silently(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = ClientConfig.model_validate({name: "x"})
    assert name not in cfg.model_fields_set
    assert name not in cfg.model_dump()


def test_legacy_and_onprem_knobs_survive_and_are_mapped_or_reported() -> None:
    """Nothing set is dropped silently: engine knobs reach the create body where Cortex has a
    field and are named otherwise; deployment knobs are named as not applicable."""
    knobs = {
        "ds_config": {"zero_optimization": {"stage": 3}},
        "log_prob_ds_config": {"zero": 1},
        "ds_worker_config": {"use_liger": True, "zorro_train_enable": True},
        "arctic_inference_config": {"speculative": True},
        "full_determinism": True,
        "vllm_config": {"enforce_eager": True},
        "training_config": {"micro_batch": 2},
        "checkpoint_path": "/ckpt",
    }
    deployment = {"colocate": True, "port": 9000, "comm_protocol": "ray"}
    assert set(knobs) == set(LEGACY_FIELDS)
    assert set(deployment) <= set(ONPREM_FIELDS)
    cfg = ClientConfig(base_url="http://h", **knobs, **deployment)
    for name, value in {**knobs, **deployment}.items():
        assert getattr(cfg, name) == value
    assert cfg.onprem_settings() == {**knobs, **deployment}
    plan = plan_job(cfg)
    training, sampling = plan.body["sub_job_configs"]
    assert training["training_config"]["ds_config"] == {"zero_optimization": {"stage": 3}}
    assert training["training_config"]["model_provider"] == "liger"
    assert sampling["inference_config"]["vllm_config"] == {"enforce_eager": True}
    assert set(plan.not_sent) == {"log_prob_ds_config", "arctic_inference_config", "checkpoint_path",
                                  "full_determinism", "ds_worker_config.zorro_train_enable",
                                  "training_config.micro_batch"}
    assert set(plan.not_applicable) == set(deployment)
    text = plan.message() or ""
    for name in (*plan.not_sent, *deployment):
        assert name in text


def test_cortex_addressing_aliases_from_the_legacy_rl_config() -> None:
    cfg = ClientConfig(cortex_base_url="http://b", cortex_database="D", cortex_schema="S",
                       cortex_endpoint="cortex-post-training", cortex_pat_env_var="MY_PAT",
                       model_name="Qwen/Qwen3-1.7B")
    assert (cfg.base_url, cfg.database, cfg.schema_name, cfg.endpoint, cfg.pat_env_var, cfg.model) == (
        "http://b", "D", "S", "cortex-post-training", "MY_PAT", "Qwen/Qwen3-1.7B")


def test_schema_is_accepted_under_its_natural_name() -> None:
    assert ClientConfig(schema="ML").schema_name == "ML"


def test_host_without_a_pat_source_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match=r"host='acct.example.com' needs a PAT.*\$CORTEX_PAT"):
        ClientConfig(host="acct.example.com")
    with pytest.raises(ValidationError, match=r"\$OTHER_PAT"):
        ClientConfig(host="acct.example.com", pat_env_var="OTHER_PAT")


def test_host_with_a_pat_value_or_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = ClientConfig(host="acct.example.com", pat="secret")
    assert cfg.service_base() == "https://acct.example.com"
    assert cfg.pat_value() == "secret"
    assert "secret" not in repr(cfg)
    monkeypatch.setenv("CORTEX_PAT", "from-env")
    assert ClientConfig(host="acct.example.com").pat_value() == "from-env"


def test_base_url_sends_no_pat_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_PAT", "from-env")
    assert ClientConfig(base_url="http://127.0.0.1:1/").pat_value() is None
    assert ClientConfig(base_url="http://127.0.0.1:1/").service_base() == "http://127.0.0.1:1"
    assert ClientConfig(base_url="http://h", pat="tok").pat_value() == "tok"


def test_onprem_host_needs_no_pat() -> None:
    with pytest.warns(DeprecationWarning):
        cfg = ClientConfig(backend="local", host="127.0.0.1", port=8000)
    assert cfg.host == "127.0.0.1"


def test_defaults_come_from_contract_limits() -> None:
    cfg = ClientConfig()
    assert cfg.retry_policy() == RetryPolicy()
    assert cfg.poll_policy() == PollPolicy()
    assert cfg.max_chunk_bytes == DEFAULT_CHUNK_BYTES
    assert cfg.endpoint == DEFAULT_ENDPOINT
    assert cfg.forward_no_grad_route == cfg.log_probs_route == "auto"


@pytest.mark.parametrize("size", [-1, 0, 1, CHUNK_HEADER_ALLOWANCE, FLOOR - 1])
def test_a_chunk_size_below_the_floor_is_refused(size: int) -> None:
    """0 or a few bytes would cut a frame into one call per byte (or never finish)."""
    with pytest.raises(ValidationError, match=f"max_chunk_bytes must be an int of at least {FLOOR}"):
        ClientConfig(max_chunk_bytes=size)


def test_the_chunk_size_floor_and_the_body_cap_are_accepted() -> None:
    assert ClientConfig(max_chunk_bytes=FLOOR).max_chunk_bytes == FLOOR
    assert ClientConfig(max_chunk_bytes=MAX_BODY_BYTES).max_chunk_bytes == MAX_BODY_BYTES
    with pytest.raises(ValidationError):
        ClientConfig(max_chunk_bytes=MAX_BODY_BYTES + 1)


@pytest.mark.parametrize("size", [0, FLOOR - 1])
def test_a_per_call_chunk_size_below_the_floor_is_a_config_error(size: int) -> None:
    """The per-call override meets the same floor, before anything is sent."""
    rest = CortexRestClient(ClientConfig(base_url="http://127.0.0.1:1"))
    with pytest.raises(ConfigError, match=f"at least {FLOOR}") as info:
        rest.forward_backward("j1", b"frame", max_chunk_bytes=size)
    assert info.value.route == "forward_backward"


def test_forward_no_grad_route_choices() -> None:
    assert ClientConfig(forward_no_grad_route="operation").forward_no_grad_route == "operation"
    with pytest.raises(ValidationError):
        ClientConfig(forward_no_grad_route="nope")


def test_job_body_sub_jobs_follow_gpu_counts() -> None:
    cfg = ClientConfig(training_gpus=2, sampling_gpus=1, log_prob_gpus=1, max_seq_len=1024,
                       lr=2e-5, train_batch_size=8, training_extra={"gradient_clipping": 1.0},
                       sampling_extra={"gpu_memory_utilization": 0.5})
    subs = create_job_body(cfg)["sub_job_configs"]
    assert [s["job_type"] for s in subs] == ["training", "sampling", "log_probability"]
    tc = subs[0]["training_config"]
    assert tc == {"optimizer": {"name": "AdamW", "lr": 2e-5}, "max_seq_len": 1024,
                  "train_batch_size": 8, "n_gpus": 2, "gradient_clipping": 1.0}
    assert subs[1]["inference_config"] == {"max_seq_len": 1024, "n_gpus": 1,
                                           "gpu_memory_utilization": 0.5}
    assert all(s["model_name"] == cfg.model for s in subs)


def test_job_body_without_gpus_is_a_config_error() -> None:
    from client.errors import ConfigError

    with pytest.raises(ConfigError, match="no sub-jobs"):
        create_job_body(ClientConfig(training_gpus=0, sampling_gpus=0))


def test_pat_never_travels_in_json() -> None:
    cfg = ClientConfig(base_url="http://h", pat="secret")
    text = cfg.model_dump_json()
    assert "secret" not in text and "*****" not in text
    assert ClientConfig.model_validate_json(text).pat is None
    assert cfg.model_dump()["pat"].get_secret_value() == "secret"  # python mode (pickle, copies) keeps it


@pytest.mark.parametrize("extra,where", [
    ({"sp_size": 3}, "sp_size"),
    ({"ac_config": {"mode": "selective", "offload_config": {"enabled": True}}}, "ac_config.mode"),
    ({"multiplex_job_id": "abc"}, "multiplex_job_id"),
])
def test_job_body_breaking_a_service_rule_fails_locally(extra: dict, where: str) -> None:
    """The service refuses these configs at create (spec §8.2/§8.3): the client says so
    before sending."""
    from client.errors import ConfigError

    with pytest.raises(ConfigError, match=where):
        create_job_body(ClientConfig(training_gpus=4, training_extra=extra))
    ok = {"sp_size": 2} if "sp_size" in extra else {}
    assert create_job_body(ClientConfig(training_gpus=4, training_extra=ok))
