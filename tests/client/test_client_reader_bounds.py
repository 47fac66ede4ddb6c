"""The client's reader bounds are knobs like the others: config fields,
environment variables, rows of the generated client-config page, and what the session and the poll loop are built with.
(The bounds against a hostile server: ``tests/stress/test_bounded_readers.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from client.calls.bounded_read import BoundedAdapter
from client.calls.session import HttpSession, HttpSettings
from client.config import ClientConfig
from client.env import apply_env_override

ROOT = Path(__file__).resolve().parents[2]
ENV = {"ARCTIC_RL_BACKEND": "cortex", "CORTEX_BASE_URL": "http://127.0.0.1:9",
       "CORTEX_MAX_ANSWER_INFLATION": "8.5", "CORTEX_MAX_RESULT_BYTES": "1048576",
       "CORTEX_MAX_RESULT_PAGES": "12"}


def test_every_bound_variable_reaches_its_field() -> None:
    out = apply_env_override(ClientConfig(backend="onprem"), ENV)
    assert (out.max_answer_inflation, out.max_result_bytes, out.max_result_pages) == (8.5, 1048576, 12)
    policy = out.poll_policy()
    assert (policy.max_result_bytes, policy.max_result_pages) == (1048576, 12)


def test_a_bad_bound_variable_is_warned_about_and_dropped() -> None:
    with pytest.warns(RuntimeWarning, match="CORTEX_MAX_RESULT_PAGES"):
        out = apply_env_override(ClientConfig(backend="onprem"), {**ENV, "CORTEX_MAX_RESULT_PAGES": "many"})
    assert out.max_result_pages == ClientConfig().max_result_pages


def test_explicit_bounds_win_over_the_environment() -> None:
    out = apply_env_override(ClientConfig(backend="onprem", max_result_pages=3), ENV)
    assert out.max_result_pages == 3


def test_the_reference_documents_every_bound_variable() -> None:
    text = (ROOT / "docs" / "reference" / "client-config.md").read_text()
    for var in ("CORTEX_MAX_ANSWER_INFLATION", "CORTEX_MAX_RESULT_BYTES", "CORTEX_MAX_RESULT_PAGES"):
        assert f"`{var}`" in text, var


def test_the_clients_own_session_reads_under_its_bounds() -> None:
    config = ClientConfig(base_url="http://127.0.0.1:9", max_answer_bytes=1234, max_answer_inflation=7.0)
    session = HttpSession(HttpSettings.from_config(config, "http://127.0.0.1:9", "/p")).session
    adapter = session.get_adapter("https://example.invalid")
    assert isinstance(adapter, BoundedAdapter) and (adapter.max_bytes, adapter.max_inflation) == (1234, 7.0)
