"""The SkyRL and verl call patterns of ``tests/client/test_integration_*`` through gs-proxy:
the same test functions, launched as against the service (``CORTEX_HOST`` and a PAT over
HTTPS, the proxy's CA trusted) with the proxy's host in front of each fake, and no red."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from proxy_support import TOKEN, ProxyRun, proxy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))
pytest.importorskip("torch")

import test_integration_skyrl as skyrl  # noqa: E402
import test_integration_verl as verl  # noqa: E402
from integration_support import LAUNCHER_ENV, Fakes  # noqa: E402

from client import exit_guard  # noqa: E402
from contract.routes import Profile  # noqa: E402


class ProxiedFakes(Fakes):
    """Fakes whose URL is a gs-proxy in front of each (its admin API is relayed unjudged)."""

    def __init__(self, stack: ExitStack, tmp: Path) -> None:
        super().__init__(stack)
        self.tmp = tmp
        self.runs: list[ProxyRun] = []
        self.bundles: dict[str, str] = {}

    def url(self, engine: str, profile: Profile) -> str:
        key = (engine, profile)
        if key not in self._urls:
            from fake_gs import FakeSettings, serve_in_background

            fake = self._stack.enter_context(serve_in_background(FakeSettings(engine=engine, profile=profile)))
            where = self.tmp / f"{engine}-{profile}"
            where.mkdir()
            run = self._stack.enter_context(proxy(fake, where, "--profile", profile, "--tls"))
            assert run.process.stdout is not None
            bundle = re.search(r"REQUESTS_CA_BUNDLE=(\S+)", run.process.stdout.readline())
            assert bundle is not None
            self.runs.append(run)
            self._urls[key] = run.base_url
            self.bundles[run.base_url] = bundle.group(1)
        return self._urls[key]

    def launch(self, monkeypatch: pytest.MonkeyPatch, engine: str, profile: Profile) -> tuple[str, set[str]]:
        """The launcher's variables as for the service: the proxy's host, a PAT, its CA."""
        url = self.url(engine, profile)
        for name, value in {**LAUNCHER_ENV, "CORTEX_HOST": url.removeprefix("https://"), "CORTEX_PAT": TOKEN,
                            "REQUESTS_CA_BUNDLE": self.bundles[url], "SSL_CERT_FILE": self.bundles[url]}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("CORTEX_BASE_URL", raising=False)
        return url, set(self.jobs(url))


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[ProxiedFakes]:
    with ExitStack() as stack:
        yield ProxiedFakes(stack, tmp_path)
    exit_guard.cancel_guarded()


CASES: list[tuple[str, Any]] = [
    ("skyrl", skyrl.test_skyrl_driver_and_worker_loop),
    ("verl", verl.test_verl_driver_worker_loop),
]


@pytest.mark.long  # two recipe loops through a proxy, judged; CI's slow tier proxies grpo_toy's verl and arctic loops
@pytest.mark.parametrize(("name", "loop"), CASES, ids=[c[0] for c in CASES])
def test_integration_call_patterns_through_the_proxy_are_green(
        proxied: ProxiedFakes, monkeypatch: pytest.MonkeyPatch, name: str, loop: Any) -> None:
    loop(proxied, monkeypatch, "shape", "current")
    for run in proxied.runs:
        run.stop()
        assert run.rc == 0 and run.red() == {}, (run.red(), run.err[-3000:])
        for cid in ("AUTH-HEADERS-1", "CLIENT-CHUNK-1", "FB-RESULT-1", "STEP-RESULT-1"):
            assert run.status(cid) == "green", (name, cid, run.verdicts[cid])
