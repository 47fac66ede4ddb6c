"""The factory's environment override (what SkyRL's and verl's integration code relies on)."""

from __future__ import annotations

import warnings

import pytest

from client.config import ClientConfig
from client.env import ENV_FIELDS, apply_env_override
from client.errors import ConfigError
from client.factory import create_arctic_rl_client, create_client


def _legacy_local(**extra: object) -> ClientConfig:
    """What both integrations build: a hard-coded backend='local' config."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return ClientConfig(backend="local", **extra)


FULL_ENV = {
    "ARCTIC_RL_BACKEND": "cortex",
    "CORTEX_BASE_URL": "http://127.0.0.1:9",
    "CORTEX_HOST": "acct.example.com",
    "CORTEX_DATABASE": "DB1",
    "CORTEX_SCHEMA": "SC1",
    "CORTEX_ENDPOINT": "cortex-post-training",
    "CORTEX_PAT_ENV_VAR": "MY_PAT",
    "CORTEX_MAX_SEQ_LEN": "2048",
}


def test_unset_is_a_no_op() -> None:
    cfg = _legacy_local()
    assert apply_env_override(cfg, {}) is cfg
    assert apply_env_override(cfg, {"CORTEX_BASE_URL": "http://x"}) is cfg


def test_toggle_flips_local_to_cortex() -> None:
    out = apply_env_override(_legacy_local(), {"ARCTIC_RL_BACKEND": "cortex",
                                               "CORTEX_BASE_URL": "http://127.0.0.1:9"})
    assert out.backend == "cortex"
    assert out.base_url == "http://127.0.0.1:9"


def test_every_variable_reaches_its_field() -> None:
    out = apply_env_override(_legacy_local(), FULL_ENV)
    for var, field in ENV_FIELDS.items():
        assert getattr(out, field) == FULL_ENV[var], var
    assert out.max_seq_len == 2048


def test_explicit_fields_win() -> None:
    cfg = _legacy_local(base_url="http://explicit", database="MINE", schema="S0",
                        endpoint="e0", pat_env_var="P0", max_seq_len=512)
    out = apply_env_override(cfg, FULL_ENV)
    assert (out.base_url, out.database, out.schema_name, out.endpoint, out.pat_env_var,
            out.max_seq_len) == ("http://explicit", "MINE", "S0", "e0", "P0", 512)
    assert out.backend == "cortex"


def test_onprem_host_does_not_count_as_an_explicit_cortex_target() -> None:
    cfg = _legacy_local(host="10.0.0.5", port=8000)
    out = apply_env_override(cfg, {"ARCTIC_RL_BACKEND": "cortex",
                                   "CORTEX_BASE_URL": "http://127.0.0.1:9"})
    assert out.host is None
    assert out.service_base() == "http://127.0.0.1:9"


def test_explicit_cortex_host_wins_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = ClientConfig(host="mine.example.com", pat="t")
    out = apply_env_override(cfg, {"ARCTIC_RL_BACKEND": "cortex", "CORTEX_HOST": "env.example.com"})
    assert out.host == "mine.example.com"


def test_idempotent() -> None:
    cfg = _legacy_local(model="Qwen/Qwen3-1.7B", colocate=True)
    once = apply_env_override(cfg, FULL_ENV)
    twice = apply_env_override(once, FULL_ENV)
    assert twice == once
    assert twice.model_fields_set == once.model_fields_set


@pytest.mark.parametrize("value", ["local", "onprem", "1", "true", "", "cortexx"])
def test_other_toggle_values_are_ignored(value: str) -> None:
    cfg = _legacy_local()
    out = apply_env_override(cfg, {**FULL_ENV, "ARCTIC_RL_BACKEND": value})
    assert out is cfg
    assert out.backend == "onprem"


@pytest.mark.parametrize("bad", ["lots", "-5", "0", "1.5", ""])
def test_bad_max_seq_len_is_warned_about_and_dropped(bad: str, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.warns(RuntimeWarning, match="CORTEX_MAX_SEQ_LEN"):
        out = apply_env_override(_legacy_local(), {**FULL_ENV, "CORTEX_MAX_SEQ_LEN": bad})
    assert out.max_seq_len == ClientConfig().max_seq_len
    assert out.backend == "cortex"
    assert "CORTEX_MAX_SEQ_LEN" in caplog.text


def test_onprem_knobs_survive_the_flip() -> None:
    out = apply_env_override(_legacy_local(colocate=True, ds_config={"z": 3}), FULL_ENV)
    assert out.colocate is True
    assert out.ds_config == {"z": 3}


def test_factory_applies_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTIC_RL_BACKEND", "cortex")
    monkeypatch.setenv("CORTEX_BASE_URL", "http://127.0.0.1:9")
    client = create_client(_legacy_local())
    assert client.config.backend == "cortex"
    assert client.config.base_url == "http://127.0.0.1:9"
    from client.transports.recording import RecordingTransport

    legacy = create_arctic_rl_client(_legacy_local(), None, transport=RecordingTransport())
    assert legacy.config.backend == "cortex"
    legacy.shutdown()


def test_non_cortex_backend_gets_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="Cortex client only.*ARCTIC_RL_BACKEND=cortex"):
        create_arctic_rl_client(_legacy_local(), None)


def test_cortex_without_target_gets_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="no Cortex target"):
        create_client(ClientConfig())


def test_factory_accepts_mappings_and_foreign_pydantic_configs(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import BaseModel

    class LegacyConfig(BaseModel):
        backend: str = "local"
        sample_gpus: int = 1
        job_name: str = "x"
        colocate: bool = False

    monkeypatch.setenv("ARCTIC_RL_BACKEND", "cortex")
    monkeypatch.setenv("CORTEX_BASE_URL", "http://127.0.0.1:9")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        a = create_client(LegacyConfig(sample_gpus=2, colocate=True))
        b = create_client({"backend": "local", "sample_gpus": 2})
    assert a.config.sampling_gpus == 2 and a.config.colocate is True
    assert b.config.sampling_gpus == 2 and b.config.backend == "cortex"
