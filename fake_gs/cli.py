"""``fake-gs``: run the fake from the command line (also ``python -m fake_gs``).

Imports stay lean (no torch) so the server answers its health route within a second or
two of launch; the engine loads on the first job.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shlex
import signal
import socket
import sys
import tempfile
import typing
from collections.abc import Sequence
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

from contract.routes import DEFAULT_ENDPOINT, PREFIX_TEMPLATE
from fake_gs.engines import start_up_notes
from fake_gs.options import Flag, bound_of, flag_of
from fake_gs.settings import FLAG_GROUPS, RECIPE_GROUP, FakeSettings, Timing, literal_choices


def _timing(text: str) -> Timing:
    try:
        return Timing.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


#: How a flag's text parses, by the type of its field (str needs nothing).
_PARSE: dict[Any, Any] = {int: int, float: _seconds, Timing: _timing}


def build_parser() -> argparse.ArgumentParser:
    """``fake-gs``'s parser: one flag per ``FakeSettings`` option (``fake_gs.options``)."""
    p = argparse.ArgumentParser(
        prog="fake-gs",
        description="A fake Cortex Training server: every route of the contract, shape-aware results, "
                    "chunk groups, dialects, auth, variations. Serves on loopback by default.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    groups = {title: p.add_argument_group(title, about) for title, about in FLAG_GROUPS.items()}
    defaults, hints = FakeSettings(), typing.get_type_hints(FakeSettings)
    for f in fields(FakeSettings):
        flag = flag_of(f)
        if flag is not None:
            where = groups[flag.group] if flag.group else p
            how = _argument(f, flag, hints[f.name], getattr(defaults, f.name))
            where.add_argument(flag.name, **how)
            for alias in flag.aliases:
                where.add_argument(alias, **{**how, "dest": flag.dest, "help": argparse.SUPPRESS,
                                             "default": argparse.SUPPRESS, "action": _deprecated(flag.name)})
    # Not a setting of the server: where this process writes the exports once serving.
    groups[RECIPE_GROUP].add_argument(
        "--env-file", type=Path, default=None, metavar="PATH",
        help="once serving, write the exports (CORTEX_HOST or CORTEX_BASE_URL, the CA "
             "variables with --tls, and AWS_ENDPOINT_URL_S3 and AWS_DEFAULT_REGION of the "
             "execution-log stage with the logs extra) to PATH for `source`; removed when the "
             "fake stops")
    return p


def _deprecated(name: str) -> type[argparse.Action]:
    """An older spelling of the flag ``name``: stores as it does, and warns."""

    class Deprecated(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                     values: Any, option_string: str | None = None) -> None:
            print(f"{parser.prog}: {option_string} is deprecated; use {name}", file=sys.stderr)
            setattr(namespace, self.dest, values)

    return Deprecated


def _argument(f: Field[Any], flag: Flag, hint: Any, default: Any) -> dict[str, Any]:
    """``add_argument`` keywords for one option: its parsing follows the field's type."""
    kw: dict[str, Any] = {"help": flag.help}
    if flag.metavar is not None:
        kw["metavar"] = flag.metavar
    if hint is bool:
        return {**kw, "action": "store_true"}
    if typing.get_origin(hint) is tuple:
        return {**kw, "action": "append", "default": []}
    choices = flag.choices or literal_choices().get(f.name)
    if choices is not None:
        kw["choices"] = choices
    parse = _positive if bound_of(f) == "positive" else _PARSE.get(hint)
    if parse is not None:
        kw["type"] = parse
    return {**kw, "default": default // flag.unit if flag.unit != 1 else default}


def settings_from_args(args: argparse.Namespace) -> FakeSettings:
    """The settings the parsed flags name; a flag counted in units is scaled back."""
    values = {}
    for f in fields(FakeSettings):
        flag = flag_of(f)
        if flag is not None:
            value = getattr(args, flag.dest)
            values[f.name] = value * flag.unit if flag.unit != 1 else value
    return FakeSettings(**values)


def client_exports(base: str, host_port: str, tls: Any) -> dict[str, str]:
    """The environment a client needs: host-style addressing plus the CA under TLS."""
    if tls is None:
        return {"CORTEX_BASE_URL": base}
    return {"CORTEX_HOST": host_port, **tls.env()}


def export_line(env: dict[str, str]) -> str:
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())


def write_env_file(path: Path, env: dict[str, str]) -> None:
    """Written whole or not at all (a script may poll for it while the fake starts): into a
    fresh file of a random name beside it, created exclusively and never through a link
    (``mkstemp``: a planted ``PATH.tmp`` or symlink is not followed), then renamed over
    ``path`` (a symlink there is replaced, not written through)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write("".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def tls_lines(base: str, host_port: str, tls: Any) -> list[str]:
    if tls is None:
        return []
    return [
        f"  host:     {host_port}  (recipes: host={host_port} with a PAT -> {base})",
        f"  ca:       {tls.ca_path}  (throwaway test CA; deleted when the fake stops)",
        f"  {export_line(client_exports(base, host_port, tls))}",
    ]


#: The variables a plain boto3 client reads: the endpoint of its S3 calls (botocore >= 1.31)
#: and its region. The service's reference client ignores the endpoint a statement answer
#: names, so only these keep its download on the fake's stage instead of real AWS.
STAGE_ENDPOINT_VAR = "AWS_ENDPOINT_URL_S3"
STAGE_REGION_VAR = "AWS_DEFAULT_REGION"


def stage_exports(stage: tuple[str, str] | None) -> dict[str, str]:
    """The exports that point an unchanged S3 client at the stage (none without one)."""
    if stage is None:
        return {}
    endpoint, region = stage
    return {STAGE_ENDPOINT_VAR: endpoint, STAGE_REGION_VAR: region}


def stage_lines(stage: tuple[str, str] | None) -> list[str]:
    """Where the execution-log stage listens and the export that sends a plain boto3 client
    there (its own default is real AWS); why there is none without the extra."""
    if stage is None:
        return ["  logs:     no execution-log stage (download-log needs the 'logs' extra: moto[server], boto3)"]
    return [f"  logs:     S3 stage {stage[0]} (loopback; region {stage[1]})",
            f"  {export_line(stage_exports(stage))}  (for a plain boto3 client, e.g. the reference CLI's download-log)"]


def announcement(settings: FakeSettings, base: str, host_port: str, tls: Any,
                 admin_token: str | None = None) -> list[str]:
    """What the fake prints once it accepts connections: where to point a client (and the
    admin token when tokens are set and none was given: it is random) and what the engine
    does to a caller's batches."""
    extras = [f"profile={settings.profile}", f"dialect={settings.dialect}", f"engine={settings.engine}",
              f"auth={'on' if settings.tokens else 'off'}", f"tls={'on' if tls else 'off'}"]
    if settings.variation:
        extras.append(f"VARIATION={settings.variation}")
    if settings.record:
        extras.append(f"recording to {settings.record}")
    return [
        f"fake-gs serving on {base}",
        f"  base_url: {base}",
        f"  prefix:   {PREFIX_TEMPLATE} (any names; e.g. /api/v2/databases/DB/schemas/PUBLIC/{DEFAULT_ENDPOINT})",
        f"  admin:    {base}/_fake/health  state: {base}/_fake/state",
        *([f"  admin token (random; set one with --admin-token): {admin_token}"]
          if settings.tokens and settings.admin_token is None and admin_token else []),
        "  " + " ".join(extras),
        *(f"  note:     {note}" for note in start_up_notes(settings.engine)),
        *tls_lines(base, host_port, tls),
    ]


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def _tokenizer_main(argv: Sequence[str]) -> int:
    from fake_gs.engines.tiny.tokenizer_dir import main as tokenizer_main

    return tokenizer_main(argv)


class _Refused(Exception):
    """A start-up problem: printed as ``fake-gs: ...``, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["tokenizer"]:  # ``fake-gs tokenizer DIR``: same as python -m fake_gs.engines.tiny.tokenizer_dir
        return _tokenizer_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        try:
            settings = settings_from_args(args)
        except (ValueError, OSError) as exc:
            raise _Refused(str(exc)) from None
        logging.basicConfig(level=settings.log_level.upper(), stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        app, sock, tls = _open(settings)
    except _Refused as exc:
        print(f"fake-gs: {exc}", file=sys.stderr)
        return 2
    _serve(settings, app, sock, tls, args.env_file)
    return 0


def _open(settings: FakeSettings) -> tuple[Any, socket.socket, Any]:
    """The app, the listening socket and the TLS material (None without --tls)."""
    from fake_gs.http.app import create_app
    from fake_gs.server import bind_socket
    from fake_gs.tls import TlsUnavailable, make_material

    try:
        app = create_app(settings)
    except (ValueError, OSError) as exc:
        raise _Refused(str(exc)) from None
    try:
        sock = bind_socket(settings.host, settings.port)
    except OSError as exc:
        raise _Refused(f"cannot listen on {settings.host}:{settings.port}: {exc}") from None
    try:
        tls = make_material(settings.host) if settings.tls else None
    except TlsUnavailable as exc:
        sock.close()
        raise _Refused(str(exc)) from None
    return app, sock, tls


async def stage_up(state: Any, server: Any, exports: dict[str, str], env_file: Path | None) -> None:
    """The log stage starts with the fake, not on the first statement: its endpoint is
    printed and goes into the env file with the client's ``exports``, for clients that do
    not read it from the statement answer. Its moto import takes seconds, so it comes after
    the banner and after the engine's warm-up (calls need that first; on two cores the two
    imports would slow each other)."""
    from fake_gs.server import start_log_stage

    await asyncio.to_thread(state.warmed_up.wait)
    if server.should_exit:
        return
    try:
        stage = await asyncio.to_thread(start_log_stage, state)
        lines = stage_lines(stage)
    except Exception as exc:  # the fake serves on; only the download is missing
        if server.should_exit:
            return  # stopped while the stage started: nothing to announce
        stage, lines = None, [f"  logs:     the execution-log stage did not start: {exc}"]
    for line in lines:
        print(line, flush=True)
    if env_file is not None:
        write_env_file(env_file, {**exports, **stage_exports(stage)})


def _serve(settings: FakeSettings, app: Any, sock: socket.socket, tls: Any,
           env_file: Path | None) -> None:
    """Serve until stopped; announce once accepting, clean up (CA, env file) however it ends."""
    from fake_gs.server import _Server, base_url_of, host_port_of, uvicorn_config
    from fake_gs.tls import uvicorn_ssl_options

    port = sock.getsockname()[1]
    base = base_url_of(settings.host, port, "https" if tls else "http")
    host_port = host_port_of(settings.host, port)
    server = _Server(uvicorn_config(app, settings, **uvicorn_ssl_options(tls)))
    original = server.startup

    async def startup(sockets: list[socket.socket] | None = None) -> None:
        await original(sockets=sockets)
        for line in announcement(settings, base, host_port, tls, app.state.fake.admin_token):
            print(line, flush=True)
        exports = client_exports(base, host_port, tls)
        background.append(asyncio.get_running_loop().create_task(stage_up(app.state.fake, server, exports, env_file)))

    background: list[asyncio.Task[None]] = []

    server.startup = startup  # type: ignore[method-assign]
    # uvicorn re-raises SIGTERM once shut down; turning it into SystemExit lets the cleanup
    # below (CA directory, env file) run instead of the process dying mid-way.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        if tls is not None:
            tls.cleanup()
        if env_file is not None:
            with contextlib.suppress(OSError):
                env_file.unlink()


if __name__ == "__main__":
    raise SystemExit(main())
