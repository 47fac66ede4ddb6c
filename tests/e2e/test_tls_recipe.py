"""Recipe-style addressing over TLS: ``host=127.0.0.1:PORT`` plus a PAT, against ``--tls``.

The service's recipes build ``https://{host}`` and send a PAT; the fake started with
``tls=True`` serves HTTPS with a throwaway CA, and the kit's client, trusting that CA
through ``REQUESTS_CA_BUNDLE`` as a recipe would, runs a full RL step through it:
generate, forward-no-grad, forward-backward (ArcticTraining layout), step, weight-sync.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

pytest.importorskip("trustme")
torch = pytest.importorskip("torch")

from e2e_fake import FAST  # noqa: E402

from client import ClientConfig, create_client  # noqa: E402
from client.errors import CortexConnectionError, CortexHTTPError  # noqa: E402
from client.rest import CortexRestClient  # noqa: E402
from fake_gs import FakeSettings  # noqa: E402
from fake_gs.server import FakeServer, start_in_background  # noqa: E402

PAT = "pat-for-tls-tests"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tls_fake() -> Iterator[FakeServer]:
    server = start_in_background(FakeSettings(engine="tiny", tls=True, tokens=(PAT,)))
    try:
        yield server
    finally:
        server.stop()


def recipe_config(server: FakeServer, **extra: Any) -> ClientConfig:
    """What a recipe has: a host name and (from the environment) a PAT; nothing else."""
    return ClientConfig(host=server.host_port, max_seq_len=256, lr=5e-3,
                        **{**FAST, "retries": 0, **extra})


def test_fake_serves_https_with_its_own_ca(tls_fake: FakeServer) -> None:
    assert tls_fake.base_url.startswith("https://127.0.0.1:")
    assert tls_fake.ca_path and Path(tls_fake.ca_path).read_text().startswith("-----BEGIN CERTIFICATE")
    ok = requests.get(f"{tls_fake.base_url}/_fake/health", verify=tls_fake.ca_path,
                      headers={"Authorization": f"Bearer {tls_fake.admin_token}"}, timeout=10)
    assert ok.status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{tls_fake.base_url}/_fake/health", timeout=10)  # system store: untrusted


def test_full_rl_step_with_host_and_pat_over_tls(
    tls_fake: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_PAT", PAT)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tls_fake.ca_path))
    config = recipe_config(tls_fake)
    assert config.service_base() == f"https://{tls_fake.host_port}"
    client = create_client(config)
    try:
        run_rl_step(client)
    finally:
        client.shutdown()


def run_rl_step(client: Any) -> None:
    prompt = [257, *b"Say a:"]
    params = {"max_tokens": 8, "temperature": 1.0, "seed": 5, "logprobs": 0}
    before = client.generate([prompt] * 4, [params] * 4)
    responses = [[int(t) for t in r["token_ids"]] for r in before]
    width = max(len(r) for r in responses)
    ids = torch.full((4, len(prompt) + width), 256)
    mask = torch.zeros_like(ids)
    for i, resp in enumerate(responses):
        ids[i, : len(prompt) + len(resp)] = torch.tensor(prompt + resp)
        mask[i, len(prompt) : len(prompt) + len(resp)] = 1
    kwargs = {"input_ids": ids, "attention_mask": (ids != 256).long()}
    old = client.fwd_no_grad({"batch": kwargs})["batch"]["logprobs"]
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])[:, None] * mask
    answer = client.fwd_bwd({
        "args": [], "kwargs": kwargs,
        "context": {"advantages": adv, "loss_mask": mask, "old_log_probs_shifted": old,
                    "eps_clip": 0.2},
        "processing": {"loss_fn": "grpo"},
    })
    assert answer["metrics"]["ppo_kl"] == pytest.approx(0.0, abs=1e-5)
    assert answer["grad_norm"] > 0
    assert client.step()["global_steps"] == 1
    client.sync_weights(cuda_ipc=False, low_memory=False)
    after = client.generate([prompt] * 4, [params] * 4)
    assert [r["logprobs"][0] for r in after] != [r["logprobs"][0] for r in before]


def test_ca_bundle_field_and_refusals(tls_fake: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    trusted = CortexRestClient(recipe_config(tls_fake, pat=PAT, ca_bundle=tls_fake.ca_path))
    assert "available_gpus" in trusted.get_capacity()
    untrusted = CortexRestClient(recipe_config(tls_fake, pat=PAT))
    with pytest.raises(CortexConnectionError, match="SSL"):
        untrusted.get_capacity()
    wrong_pat = CortexRestClient(recipe_config(tls_fake, pat="not-the-pat", ca_bundle=tls_fake.ca_path))
    with pytest.raises(CortexHTTPError) as err:
        wrong_pat.get_capacity()
    assert err.value.status == 401


def _read_until_env(proc: subprocess.Popen[str], env_file: Path, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while not env_file.exists():
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline, "fake-gs --tls wrote no env file"
        time.sleep(0.05)
    return env_file.read_text()


@pytest.mark.slow
@pytest.mark.heavy
def test_cli_tls_prints_base_ca_and_exports_and_gs_conformance_passes(tmp_path: Path) -> None:
    env_file = tmp_path / "fake.env"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fake_gs", "--tls", "--port", "0", "--token", PAT,
         "--token", PAT + "-2", "--env-file", str(env_file)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
    )
    try:
        exports = dict(re.findall(r"export (\w+)=(\S+)", _read_until_env(proc, env_file)))
        # the log stage's endpoint and region too, with the logs extra (tests/fake_gs/test_start_up.py)
        assert set(exports) - {"AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION"} == {"CORTEX_HOST", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"}
        env = {**os.environ, **exports}
        conformance = subprocess.run(
            [sys.executable, "-m", "conformance.cli", "--url", f"https://{exports['CORTEX_HOST']}",
             "--token", PAT, "--token2", PAT + "-2", "--examples", "2",
             "--clauses", "ADDR-*,AUTH-REQUIRED-*,AUTH-HEADERS-1,AUTH-ISOLATION-*,JOB-CREATE-1,GEN-COUNT-1"],
            env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )
        assert conformance.returncode == 0, conformance.stdout[-3000:] + conformance.stderr[-2000:]
        assert "CONFORMS" in conformance.stdout and " 0 red" in conformance.stdout
    finally:
        proc.terminate()
        out = proc.communicate(timeout=20)[0]
    base = re.search(r"serving on (https://127\.0\.0\.1:\d+)", out)
    assert base and base.group(1) == f"https://{exports['CORTEX_HOST']}", out
    assert f"ca:       {exports['REQUESTS_CA_BUNDLE']}" in out
    assert f"export CORTEX_HOST={exports['CORTEX_HOST']}" in out
    assert not env_file.exists() and not Path(exports["REQUESTS_CA_BUNDLE"]).exists()  # cleaned up


def test_tls_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from fake_gs.cli import main

    monkeypatch.setitem(sys.modules, "trustme", None)  # as if the tls extra were missing
    assert main(["--tls", "--port", "0"]) == 2
    assert "[tls]" in capsys.readouterr().err
