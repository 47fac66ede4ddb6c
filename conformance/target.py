"""What the suite is pointed at: a URL and credentials, or an embedded fake it starts.

:class:`GsOptions` is the parsed command line (made by the option table in
``conformance.options``, re-exported here); :class:`Target` is one server to talk to (the
main one, or an extra embedded fake in another dialect); :class:`EmbeddedFakes` starts
fakes lazily and stops them at the end, so a pytest session that never asks for a target
starts nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import requests

from client.calls.bounded_read import mount_bounds
from conformance.options import GsOptions, SuiteProfile
from contract.auth import AUTHORIZATION_HEADER
from contract.auth import auth_headers as contract_auth_headers
from contract.routes import Profile, prefix, route

#: Tokens the embedded fake is configured with, so auth and isolation clauses can run.
EMBEDDED_TOKENS = ("gs-conformance-token-a", "gs-conformance-token-b")
#: The embedded fake's admin API credential (service tokens get 403 there).
EMBEDDED_ADMIN_TOKEN = "gs-conformance-admin"


@dataclass(frozen=True)
class Target:
    """One server: where it is, how to authenticate, and what kind it is."""

    base_url: str
    database: str
    schema: str
    endpoint: str
    profile: SuiteProfile
    token: str | None = field(default=None, repr=False)
    token2: str | None = field(default=None, repr=False)
    embedded: bool = False
    #: The embedded fake's engine (its settings'), ``remote`` for a server at a URL.
    engine: str = "remote"
    fake_settings: Any = None
    name: str = "target"
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        return prefix(self.database, self.schema, self.endpoint)

    @property
    def service_url(self) -> str:
        return self.base_url.rstrip("/") + self.prefix

    @property
    def server_profile(self) -> Profile:
        """The route profile the server is expected to serve (semantic runs need proposed)."""
        return "current" if self.profile == "current" else "proposed"

    def auth_headers(self, token: str | None | Literal[False] = None) -> dict[str, str]:
        """Headers for ``token`` (default: the main token; False: none at all)."""
        value = self.token if token is None else token
        if not value:
            return {}
        return contract_auth_headers(value)

    def admin_headers(self) -> dict[str, str]:
        """The embedded fake's admin credential (its admin token; none when it has no tokens)."""
        token = getattr(self.fake_settings, "admin_token", None) if self.fake_settings is not None else None
        return {AUTHORIZATION_HEADER: f"Bearer {token}"} if token else {}

    def admin_url(self, path: str) -> str:
        """The embedded fake's admin API (``/_fake/...``); never used against a real server."""
        if not self.embedded:
            raise RuntimeError("the admin API exists only on the embedded fake")
        return self.base_url.rstrip("/") + "/_fake/" + path.lstrip("/")


#: The most of a capacity answer the probe reads (a capacity object is a few hundred bytes).
PROBE_ANSWER_BYTES = 1024 * 1024


class ProbeError(RuntimeError):
    """Nothing usable answers at the URL."""


def probe(url: str, timeout_s: float = 5.0) -> None:
    """Fail fast, in seconds, when no HTTP server answers at ``url``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ProbeError(f"no server answering at {url}: not an http(s) URL")
    try:
        with mount_bounds(requests.Session()) as session:  # the head is the answer: no body read
            session.get(url, timeout=(timeout_s, timeout_s), allow_redirects=False, stream=True).close()
    except requests.exceptions.ConnectTimeout:
        raise ProbeError(
            f"no server answering at {url}: connect timed out after {timeout_s:g}s"
        ) from None
    except requests.exceptions.ConnectionError as exc:
        reason = _root_reason(exc)
        raise ProbeError(f"no server answering at {url}: {reason}") from None
    except requests.exceptions.ReadTimeout:
        raise ProbeError(
            f"no server answering at {url}: connected but no answer in {timeout_s:g}s"
        ) from None
    except requests.exceptions.RequestException as exc:
        raise ProbeError(f"no server answering at {url}: {exc}") from None


def probe_service(
    url: str, service_prefix: str, headers: dict[str, str], timeout_s: float = 10.0
) -> None:
    """Something answers at ``url``; check it speaks the API (JSON from GET /capacity)."""
    target = url.rstrip("/") + service_prefix + route("get_capacity").render()
    try:
        with mount_bounds(requests.Session(), PROBE_ANSWER_BYTES) as session:
            resp = session.get(target, headers=headers, timeout=(timeout_s, timeout_s))
    except requests.exceptions.RequestException as exc:
        raise ProbeError(f"no server answering at {url}: {_root_reason(exc)}") from None
    ctype = resp.headers.get("content-type", "")
    if "json" not in ctype:
        body = resp.text[:120].strip() or "an empty body"
        raise ProbeError(
            f"no Cortex Training service at {url}: GET {service_prefix}/capacity answered "
            f"{resp.status_code} with {body!r} ({ctype or 'no content type'})"
        )


def _root_reason(exc: BaseException) -> str:
    seen = exc
    while (reason := seen.__cause__ or seen.__context__) is not None:
        seen = reason
    text = str(seen) or type(seen).__name__
    for marker in (
        "Connection refused",
        "Name or service not known",
        "No route to host",
        "Temporary failure in name resolution",
        "timed out",
    ):
        if marker in str(exc):
            return marker
    return text.split(": ", 1)[-1][:200]


def run_secrets(options: GsOptions) -> tuple[str, ...]:
    """Every credential this run sends: its tokens and the embedded fake's."""
    found = (options.with_env("token"), options.with_env("token2"), *EMBEDDED_TOKENS, EMBEDDED_ADMIN_TOKEN)
    return tuple(t for t in found if t)


def main_token(options: GsOptions) -> str | None:
    """``--gs-token``, else ``GS_TOKEN``; the embedded fake gets a built-in one."""
    result: str | None = options.with_env("token")
    return result


#: The embedded fake's per-account GPU ceiling (see ``EmbeddedFakes.base_settings``).
EMBEDDED_MAX_GPUS = 100_000


class EmbeddedFakes:
    """Starts embedded fakes on demand (each variation once) and stops them all at the end."""

    def __init__(self, options: GsOptions) -> None:
        self.options = options
        self._stack = contextlib.ExitStack()
        self._targets: dict[tuple[tuple[str, Any], ...], Target] = {}

    def base_settings(self) -> dict[str, Any]:
        """The fake's settings for the run's options (None: an option not given, which
        leaves the fake's own default)."""
        o = self.options
        token = main_token(o) or EMBEDDED_TOKENS[0]
        token2 = o.token2 or EMBEDDED_TOKENS[1]
        return {
            "port": 0,
            "profile": "current" if o.profile == "current" else "proposed",
            "tokens": (token, token2),
            "admin_token": EMBEDDED_ADMIN_TOKEN,
            "status_style": o.status_style,
            "result_delivery": o.delivery,
            "dialect": o.dialect,
            "seed": o.fake_seed,
            "engine": o.engine,
            "variation": o.mutant,
            "log_level": "warning",
            # The run's jobs are cancelled only at its end, all on one account (capacity is
            # per account): a ceiling no run reaches keeps late jobs from queueing pending.
            # The capacity properties use variants with small ceilings of their own.
            "max_total_gpus": EMBEDDED_MAX_GPUS,
        }

    def start(self, name: str = "target", **overrides: Any) -> Target:
        """The embedded fake for these overrides (started on first use)."""
        key = tuple(sorted(overrides.items()))
        if key in self._targets:
            return self._targets[key]
        from fake_gs import FakeSettings, serve_in_background

        values = self.base_settings() | overrides
        settings = FakeSettings(**_settings_kwargs({k: v for k, v in values.items() if v is not None}))
        import_engine_modules()
        base_url = self._stack.enter_context(serve_in_background(settings))
        tokens = tuple(settings.tokens)
        target = Target(
            base_url=str(base_url),
            database=self.options.database,
            schema=self.options.schema,
            endpoint=self.options.endpoint,
            profile=self.options.profile,
            token=tokens[0] if tokens else None,
            token2=tokens[1] if len(tokens) > 1 else None,
            embedded=True,
            engine=settings.engine,
            fake_settings=settings,
            name=name,
            overrides=dict(overrides),
        )
        self._targets[key] = target
        _describe_to_tape(target, {k: getattr(settings, k, v) for k, v in values.items()})
        return target

    def close(self) -> None:
        self._stack.close()
        self._targets.clear()

    def __iter__(self) -> Iterator[Target]:
        return iter(list(self._targets.values()))


def _settings_kwargs(values: dict[str, Any]) -> dict[str, Any]:
    """Drop keys the installed fake does not know (so old/new fakes both start)."""
    from dataclasses import fields as dc_fields

    from fake_gs import FakeSettings

    known = {f.name for f in dc_fields(FakeSettings)}
    return {k: v for k, v in values.items() if k in known}


def _describe_to_tape(target: Target, values: dict[str, Any]) -> None:
    """Name an embedded fake in the parity tape being recorded (``--gs-record``), with the
    settings a replay needs to start the same fake (never its tokens)."""
    from conformance.reporting.recorder import RECORDER

    if RECORDER.tape is None:
        return
    name = target.name + "".join(f" {k}={v}" for k, v in sorted(target.overrides.items()))
    settings = {k: v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
                for k, v in values.items() if k not in ("tokens", "port", "log_level")}
    settings["token_count"] = len(tuple(values.get("tokens") or ()))
    RECORDER.tape_server(target.base_url, name, {"embedded": True, "settings": settings},
                         (target.token, target.token2), values.get("admin_token"))


def remote_target(options: GsOptions) -> Target:
    assert options.url
    target = Target(
        base_url=options.url.rstrip("/"),
        database=options.database,
        schema=options.schema,
        endpoint=options.endpoint,
        profile=options.profile,
        token=main_token(options),
        token2=options.with_env("token2"),
        embedded=False,
        engine="remote",
        name="target",
    )
    from conformance.reporting.recorder import RECORDER

    RECORDER.tape_server(target.base_url, "target", {"embedded": False, "url": target.base_url},
                         (target.token, target.token2))
    return target


def import_engine_modules() -> None:
    """Import numpy and torch in this thread before an embedded fake serves. Its engine
    imports them lazily in a worker thread; hypothesis, drawing in this thread, probes
    ``sys.modules`` for numpy and fails on a half-imported one (``partially initialized
    module 'numpy'``), which surfaces as a red ERR-SCHEMA-1 or a FlakyStrategyDefinition."""
    import importlib
    import importlib.util

    for name in ("numpy", "torch"):
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
