"""Running the fake: in a background thread for tests, or in the foreground for the CLI.

The listening socket is bound before uvicorn starts (port 0 = any free port, read back
at once), and start-up is awaited on an event set after uvicorn's own start-up: no sleeps.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from starlette.applications import Starlette

from contract.errors import ErrorCode
from fake_gs.clock import SYSTEM_CLOCK, Clock
from fake_gs.http.app import create_app
from fake_gs.http.app_state import AppState
from fake_gs.http.connections import protocol_factory
from fake_gs.settings import FakeSettings
from fake_gs.tls import TlsMaterial, make_material, uvicorn_ssl_options


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose proto says TCP.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def base_url_of(host: str, port: int, scheme: str = "http") -> str:
    return f"{scheme}://{host_port_of(host, port)}"


def host_port_of(host: str, port: int) -> str:
    """``127.0.0.1:8443`` (``[::1]:8443``): what a recipe passes as its ``host``."""
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}"


class _Server(uvicorn.Server):
    """uvicorn.Server that signals once it accepts connections."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


def uvicorn_config(app: Starlette, settings: FakeSettings, **extra: Any) -> uvicorn.Config:
    """uvicorn's configuration for the fake's app: each connection's protocol reports to the
    app's connection guard (deadlines and the cap, ``fake_gs.http.connections``)."""
    state: AppState = app.state.fake
    return uvicorn.Config(
        app,
        http=protocol_factory(state.connections),
        log_level=settings.log_level.lower() if settings.log_level.lower() != "info" else "warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
        timeout_keep_alive=30,
        h11_max_incomplete_event_size=1024 * 1024,
        **extra,
    )


def start_log_stage(state: AppState) -> tuple[str, str] | None:
    """Start the execution-log stage now (not on the first statement): its endpoint and
    region, for the banner and the env file; None without the ``logs`` extra.

    Refuses an endpoint off loopback: the fake hands out no address of another host."""
    from fake_gs.answers.refusals import ApiError
    from fake_gs.state.execution_logs import REGION

    try:
        stage = state.store.execution_logs.stage()
    except ApiError as exc:
        if exc.code != ErrorCode.LOGS_EXTRA_MISSING:
            raise
        return None
    host = urlsplit(stage.endpoint).hostname or ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise RuntimeError(f"the log stage listens on {stage.endpoint}, not on loopback")
    return stage.endpoint, REGION


@dataclass
class FakeServer:
    """A fake running in a background thread."""

    base_url: str
    app: Starlette
    settings: FakeSettings
    _server: _Server = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _sock: socket.socket = field(repr=False)
    #: The throwaway CA and certificate when started with ``tls=True`` (else None).
    tls: TlsMaterial | None = None

    @property
    def ca_path(self) -> str | None:
        """The CA bundle a client must trust (``REQUESTS_CA_BUNDLE``), with TLS on."""
        return str(self.tls.ca_path) if self.tls is not None else None

    @property
    def host_port(self) -> str:
        """``HOST:PORT`` for host-style addressing (``https://{host}`` with a PAT)."""
        return self.base_url.split("://", 1)[1]

    @property
    def state(self) -> AppState:
        state: AppState = self.app.state.fake
        return state

    def exchanges_in_progress(self) -> list[str]:
        """Paths of the HTTP exchanges whose head the fake has read and that it has not
        answered yet: a test waits on it to know a handler is under way (e.g. waiting for a
        body). Read from uvicorn's connections: each holds its current request cycle."""
        cycles = [getattr(conn, "cycle", None) for conn in list(self._server.server_state.connections)]
        return [str(c.scope["path"]) for c in cycles if c is not None and not c.response_complete]

    @property
    def clock(self) -> Clock:
        """The clock the fake's timed rules read."""
        return self.state.store.clock

    @property
    def admin_token(self) -> str | None:
        """The admin API's credential (None without tokens: the admin API is open)."""
        return self.state.admin_token

    def start_log_stage(self) -> tuple[str, str] | None:
        """Start the execution-log stage: its endpoint and region (:func:`start_log_stage`)."""
        return start_log_stage(self.state)

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        with contextlib.suppress(OSError):
            self._sock.close()
        if self.tls is not None:
            self.tls.cleanup()

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_in_background(settings: FakeSettings | None = None, *, clock: Clock = SYSTEM_CLOCK,
                        **overrides: Any) -> FakeServer:
    """Start a fake on a free port (unless ``port=`` is passed here) and return its handle;
    its timed rules read ``clock`` (a test passes a ManualClock and advances it)."""
    overrides.setdefault("port", 0)
    final = (settings or FakeSettings()).with_overrides(**overrides)
    app = create_app(final, clock=clock)
    tls = make_material(final.host) if final.tls else None
    sock = bind_socket(final.host, final.port)
    port = sock.getsockname()[1]
    server = _Server(uvicorn_config(app, final, **uvicorn_ssl_options(tls)))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # surfaced to the starting thread below
            errors.append(exc)
        finally:
            server.ready.set()

    thread = threading.Thread(target=run, name=f"fake-gs:{port}", daemon=True)
    thread.start()
    server.ready.wait(30)
    if errors or not server.started:
        server.should_exit = True
        thread.join(5)
        sock.close()
        if tls is not None:
            tls.cleanup()
        raise RuntimeError(f"fake-gs failed to start: {errors[0] if errors else 'timeout'}")
    base = base_url_of(final.host, port, "https" if tls else "http")
    return FakeServer(base, app, final, server, thread, sock, tls)


@contextlib.contextmanager
def serve_in_background(settings: FakeSettings | None = None, *, clock: Clock = SYSTEM_CLOCK,
                        **overrides: Any) -> Iterator[str]:
    """Run a fake for the duration of a ``with`` block; yields ``http://127.0.0.1:PORT``
    (``https://`` with ``tls=True``: use :func:`start_in_background` to reach its CA)."""
    server = start_in_background(settings, clock=clock, **overrides)
    try:
        yield server.base_url
    finally:
        server.stop()
