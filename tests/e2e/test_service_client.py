"""The service's own client, unchanged, against the fake: its CLI's README steps
(``dss_neutrino_cli``) and its notebooks' flows (``NeutrinoClient``: create, wait, generate;
five SFT steps; an SFT job multiplexed onto a created one).

Only what a user changes is changed: the host, the PAT, the CA bundle (``REQUESTS_CA_BUNDLE``),
the multiplex notebook's source job, and the log stage's endpoint (``AWS_ENDPOINT_URL_S3``,
what ``fake-gs --env-file`` exports). The client is not on the package index: PyPI's
``arctic-platform`` (0.1.2) ships ``arctic_platform.rl`` only and pulls deepspeed, CUDA torch
and transformers<5; the CLI, TUI and notebooks are the ``dss-client`` package of
Arctic-Platform's ``cortex-client`` directory. So these tests run with a checkout of that
directory named by ``GS_SERVICE_CLIENT_DIR`` (its dependencies importable: requests,
tenacity, boto3, torch, safetensors, textual) and skip with that reason otherwise. Nothing
of it is copied here. The CLI's ``fwd-bwd`` step is left out: its example loads the model's
tokenizer from the Hugging Face hub, which an offline machine cannot reach.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contract.errors import is_error_envelope
from contract.states import normalize_job_state
from fake_gs import FakeSettings
from fake_gs.cli import stage_exports
from fake_gs.server import FakeServer, start_in_background

PAT = "service-client-pat"
DIR_VAR = "GS_SERVICE_CLIENT_DIR"
SKIP_REASON = (f"the service's client (dss-client, Arctic-Platform's cortex-client) is not installed: it is "
               f"not on PyPI (arctic-platform 0.1.2 ships arctic_platform.rl only); set {DIR_VAR} to a "
               "checkout of cortex-client with its dependencies (tenacity, textual, boto3, safetensors)")
TRAINING = "Qwen/Qwen3-8B"
SAMPLING = "Qwen/Qwen3-1.7B"


def _client_dir() -> Path:
    where = os.environ.get(DIR_VAR)
    if not where or not (Path(where) / "dss_neutrino_cli.py").is_file():
        pytest.skip(SKIP_REASON)
    return Path(where)


@pytest.fixture(scope="module")
def service_dir() -> Iterator[Path]:
    """The checkout, importable (``dss_client``, ``dss_neutrino_cli``) for this module."""
    import sys

    where = _client_dir()
    sys.path.insert(0, str(where))
    try:
        for name in ("dss_client", "dss_neutrino_cli", "tenacity", "textual", "boto3", "safetensors"):
            try:
                importlib.import_module(name)
            except ImportError as exc:
                pytest.skip(f"{SKIP_REASON} ({name}: {exc})")
        yield where
    finally:
        sys.path.remove(str(where))


#: The fake's configurations a recipe author runs: the shape and tiny engines, ``--dialect spec``
#: and ``--dialect any`` with seeds 0 to 5 (the assertions accept every form the spec allows).
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "shape": {},
    "tiny": {"engine": "tiny", "allow_any_model": True},
    "spec": {"dialect": "spec"},
    **{f"any-{seed}": {"dialect": "any", "seed": seed} for seed in range(6)},
}


#: A create refused for its body: 400, or 422 with a ``detail`` list (spec §3.6).
REFUSED_STATUSES = (400, 422)


def _error_text(body: Any) -> str:
    """An error body's words in any form spec §3.6 allows: its ``message`` (the kit's
    envelope, ``{message, code: <status>}``) and each ``detail`` entry's ``loc`` and ``msg``."""
    assert is_error_envelope(body), body
    words = [str(body.get("message") or "")]
    words += [f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in body.get("detail") or ()]
    return " ".join(words)


@pytest.fixture(scope="module", params=sorted(CONFIGURATIONS))
def fake(request: pytest.FixtureRequest, service_dir: Path) -> Iterator[FakeServer]:
    server = start_in_background(FakeSettings(tls=True, tokens=(PAT,), profile="current", max_total_gpus=64,
                                              **CONFIGURATIONS[request.param]))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture()
def user_env(fake: FakeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """What a user sources from ``fake-gs --env-file``: the CA and the log stage's endpoint."""
    assert fake.ca_path is not None
    env = {"REQUESTS_CA_BUNDLE": fake.ca_path, **stage_exports(fake.start_log_stage())}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    return env


def _client(host: str) -> Any:
    """The notebooks' client of the service at ``host`` (``host:port``)."""
    from dss_client import NeutrinoClient

    return NeutrinoClient.from_pat(host=host, pat=PAT, database="DB", schema="PUBLIC",
                                   endpoint="cortex-training", poll_interval=0.02, poll_timeout=120.0,
                                   verify_ssl=True)


def _training(n_gpus: int = 8, **extra: Any) -> dict[str, Any]:
    return {"job_type": "training", "model_name": TRAINING, "dtype": "bfloat16", "seed": 42,
            "training_config": {"model_provider": "huggingface", "n_gpus": n_gpus, "max_seq_len": 128,
                                "train_batch_size": 8, **extra,
                                "optimizer": {"name": "AdamW", "lr": 0.0001, "weight_decay": 0.0}}}


def _sft_steps(client: Any, job_id: str, steps: int = 5) -> list[float]:
    """The SFT notebooks' loop: random ids below 1000, causal labels, fwd-bwd then step."""
    import torch
    from dss_client import serialize_forward_backward_args

    torch.manual_seed(42)
    losses = []
    for _ in range(steps):
        input_ids = torch.randint(0, 1000, (8, 128))
        labels = torch.roll(input_ids, shifts=-1, dims=1)
        labels[:, -1] = -100
        batch = {"input_ids": input_ids, "position_ids": torch.arange(128).expand(8, -1).contiguous(),
                 "labels": labels}
        result = client.poll_request(job_id, client.forward_backward(
            job_id, serialize_forward_backward_args(args=(), kwargs=batch)))
        client.poll_request(job_id, client.step(job_id, learning_rate=0.0001))
        losses.append(float(result["avg_loss"]))
    return losses


# --- the notebooks ---------------------------------------------------------------------------


def sampling_walkthrough(host: str) -> None:
    client = _client(host)
    body = {"sub_job_configs": [{"job_type": "sampling", "model_name": SAMPLING,
                                 "inference_config": {"max_seq_len": 256, "n_gpus": 1}}]}
    job_id = client.create_job_from_body(body)["job_id"]
    client.wait_for_job(job_id)
    request_id = client.generate(job_id, ["What is 2 + 2?", [1, 2, 3]], sampling_params={"max_tokens": 8})
    results = client.poll_request(job_id, request_id)["results"]
    assert len(results) == 2 and all("token_ids" in r and "text" in r for r in results)
    client.cancel_job(job_id)


def sft_training_five_steps(host: str) -> None:
    client = _client(host)
    job_id = client.create_job_from_body({"sub_job_configs": [_training()]})["job_id"]
    client.wait_for_job(job_id)
    losses = _sft_steps(client, job_id)
    assert len(losses) == 5 and all(loss == loss for loss in losses)
    assert normalize_job_state(client.get_job(job_id)["status"]) == "running"  # or JOB_STATE_RUNNING (spec §3.2)
    client.cancel_job(job_id)


def sft_multiplexed_onto_a_created_job(host: str) -> None:
    """The multiplex notebook with its source job replaced by one created here; the guest's
    GPUs are the host's (counted once), and a cancelled host is refused."""
    client = _client(host)
    source = client.create_job_from_body({"sub_job_configs": [_training()]})["job_id"]
    client.wait_for_job(source)
    before = client.get_capacity()["in_use_gpus"]
    body = {"sub_job_configs": [_training(multiplex_job_id=f"{source}:training:0")]}
    job_id = client.create_job_from_body(body)["job_id"]
    client.wait_for_job(job_id)
    assert client.get_capacity()["in_use_gpus"] == before
    assert len(_sft_steps(client, job_id)) == 5
    client.cancel_job(job_id)
    client.cancel_job(source)
    import requests

    with pytest.raises(requests.HTTPError) as refused:
        client.create_job_from_body(body)
    answer = refused.value.response
    assert answer is not None and answer.status_code in REFUSED_STATUSES, answer.status_code
    said = _error_text(answer.json())
    assert "multiplex_job_id" in said and "not running" in said, said


def test_sampling_walkthrough(fake: FakeServer, user_env: dict[str, str]) -> None:
    sampling_walkthrough(fake.host_port)


def test_sft_training_five_steps(fake: FakeServer, user_env: dict[str, str]) -> None:
    sft_training_five_steps(fake.host_port)


def test_sft_multiplexed_onto_a_created_job(fake: FakeServer, user_env: dict[str, str]) -> None:
    sft_multiplexed_onto_a_created_job(fake.host_port)


# --- the CLI's README steps --------------------------------------------------------------------


def _cli(*argv: str) -> tuple[int, str]:
    import dss_neutrino_cli

    out, err = io.StringIO(), io.StringIO()
    code = dss_neutrino_cli.main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue() + err.getvalue()


def cli_readme_steps(host: str, service_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"host": host, "pat": PAT, "database": "DB", "schema": "PUBLIC",
                                  "endpoint": "cortex-training", "poll_interval": 0.02, "poll_timeout": 120}))
    examples = service_dir / "examples"

    def ok(*argv: str) -> str:
        code, text = _cli(*argv)
        assert code == 0, (argv, text[-2000:])
        return text

    ok("login", "--config", str(config))
    ok("list")
    ok("list", "--status", "running")
    assert "available_gpus" in ok("capacity")
    before = {j["job_id"] for j in json.loads(ok("list"))["jobs"]}
    ok("submit", str(examples / "rl.json"), "--wait")
    (job,) = [j["job_id"] for j in json.loads(ok("list"))["jobs"] if j["job_id"] not in before]  # any list order
    assert json.loads(ok("get", job))["job_id"] == job
    ok("checkpoints", job)
    ok("wait", job)
    assert json.loads(ok("--job-id", job, "step", "--lr", "1e-4"))["result"]["global_steps"] == 1
    # An unknown checkpoint: accepted, and the poll reports the failure (no 404 retried).
    code, text = _cli("--job-id", job, "load", "no-such-checkpoint")
    # (the any dialect may name the failure by its message alone: "... not found ...")
    assert code != 0 and re.search("checkpoint_not_found|not found", text) and "no-such-checkpoint" in text, text
    assert len(json.loads(ok("--job-id", job, "generate", str(examples / "generate.json")))["result"]["results"]) == 2
    ok("--job-id", job, "weight-sync")
    saved = json.loads(ok("download-log", job, "--output-dir", str(tmp_path / "logs")))["logs"]
    assert sorted(entry["sub_job_id"] for entry in saved) == sorted(f"{job}:{t}:0" for t in ("training", "sampling"))
    for entry in saved:
        assert "job created" in Path(entry["saved_path"]).read_text()
    ok("--compact", "list")
    ok("cancel", job)


def test_cli_readme_steps(fake: FakeServer, user_env: dict[str, str], service_dir: Path, tmp_path: Path) -> None:
    cli_readme_steps(fake.host_port, service_dir, tmp_path)


# --- through gs-proxy -------------------------------------------------------------------------


@pytest.mark.parametrize(("engine", "dialect"), [("shape", "kit"), ("shape", "any"), ("tiny", "kit")])
def test_the_client_through_gs_proxy_is_green_on_both_sides(
        service_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, engine: str, dialect: str) -> None:
    """The notebooks' flows and the CLI's README steps, unchanged, through gs-proxy (TLS on
    both sides) in front of the fake: only the host and the CA bundle change. The proxy
    judges every exchange on the client's side and the server's, and finds nothing red."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "conformance"))
    from proxy_support import proxy  # gs-proxy as the conformance tests run it

    settings: dict[str, Any] = {"engine": engine, "dialect": dialect}
    fake = start_in_background(FakeSettings(tls=True, tokens=(PAT,), profile="current", max_total_gpus=64, **settings))
    try:
        assert fake.ca_path is not None
        for name, value in stage_exports(fake.start_log_stage()).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
        monkeypatch.chdir(tmp_path)
        with proxy(fake.base_url, tmp_path, "--tls", "--upstream-ca", fake.ca_path, "--dialect", dialect) as run:
            assert run.process.stdout is not None
            bundle = re.search(r"REQUESTS_CA_BUNDLE=(\S+)", run.process.stdout.readline())
            assert bundle
            monkeypatch.setenv("REQUESTS_CA_BUNDLE", bundle.group(1))
            host = run.base_url.removeprefix("https://")
            sampling_walkthrough(host)
            sft_training_five_steps(host)
            sft_multiplexed_onto_a_created_job(host)
            cli_readme_steps(host, service_dir, tmp_path)
            run.stop()
    finally:
        fake.stop()
    assert run.rc == 0 and run.red() == {}, (run.red(), run.err[-3000:])
    for cid in ("AUTH-HEADERS-1", "CLIENT-CHUNK-1", "CHUNK-FORMAT-1", "CHUNK-VERIFY-1", "FB-RESULT-1",
                "STEP-RESULT-1", "GEN-RESULT-1", "POLL-FIELDS-1", "JOB-OBJECT-1", "CAP-FIELDS-1"):
        assert run.status(cid) == "green", (cid, run.verdicts[cid])
