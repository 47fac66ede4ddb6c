"""The fake's choice of answer form (fake_gs.answers.forms.Forms): none in the kit dialect, the
spec rows always in the spec dialect, a seeded and reproducible choice in the any dialect;
and the any dialect's answers, served, are answers the contract's models describe."""

from __future__ import annotations

import pytest
import requests

from contract.forms import FORMS, SPEC_FORMS
from contract.routes import prefix
from fake_gs import FakeSettings, serve_in_background
from fake_gs.answers.forms import Forms, page_size, request_state


def test_kit_and_spec_dialects_choose_fixed_forms() -> None:
    kit, spec = Forms("kit", 1), Forms("spec", 1)
    assert not any(kit.use(name) for name in FORMS)
    assert {name for name in FORMS if spec.use(name)} == SPEC_FORMS
    with pytest.raises(KeyError):
        kit.use("no-such-form")


def test_the_any_dialect_is_seeded_and_bound_to_its_key() -> None:
    a, b, other = Forms("any", 3), Forms("any", 3), Forms("any", 4)
    keys = [f"req-{i}" for i in range(64)]
    assert [a.use("short-pages", k) for k in keys] == [b.use("short-pages", k) for k in keys]
    assert [a.use("short-pages", k) for k in keys] != [other.use("short-pages", k) for k in keys]
    for name in FORMS:  # every row is taken sometimes, and sometimes not
        assert {a.use(name, k) for k in keys} == {True, False}, name
    seen = {request_state(a, "done", False) for _ in range(64)}
    assert seen == {"done", "completed", "succeeded", "REQUEST_STATE_DONE"}


def test_a_short_page_is_the_same_page_every_time() -> None:
    forms = Forms("any", 9)
    sizes = {page_size(forms, "r1", offset, 16, 40) for offset in range(20)}
    assert sizes <= set(range(1, 17)) and len(sizes) > 1
    assert all(page_size(forms, "r1", 5, 16, 40) == page_size(forms, "r1", 5, 16, 40) for _ in range(5))
    assert page_size(Forms("kit", 9), "r1", 5, 16, 40) == 16


def test_any_dialect_answers_validate_against_the_contract() -> None:
    """With the answer check on (the test environment), every form the fake chose is one its
    models describe: no answer turned into a 500."""
    settings = FakeSettings(port=0, dialect="any", seed=2, log_level="warning")
    assert settings.validate_answers
    with serve_in_background(settings) as base, requests.Session() as s:
        url = base + prefix("DB", "S")
        body = {"sub_job_configs": [{"job_type": "training", "model_name": "Qwen/Qwen3-0.6B", "training_config": {
            "optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 64, "train_batch_size": 2, "n_gpus": 1}}]}
        statuses = []
        for _ in range(8):
            job = s.post(url + "/", json=body, timeout=30).json()["job_id"]
            for answer in (s.get(f"{url}/{job}"), s.get(url + "/"), s.get(url + "/capacity"),
                           s.post(url + "/", json={"sub_job_configs": []}), s.post(f"{url}/{job}:cancel")):
                statuses.append(answer.status_code)
        # The validation form is drawn per answer from a counter other answers share (a
        # sweep's among them), so which of the eight got 422 varies: ask until both forms came.
        for _ in range(64):
            if {400, 422} <= set(statuses):
                break
            statuses.append(s.post(url + "/", json={"sub_job_configs": []}, timeout=30).status_code)
        assert 500 not in statuses and {400, 422} <= set(statuses), statuses
