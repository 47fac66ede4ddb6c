"""``fake-gs``: run the fake from the command line (also ``python -m fake_gs``).

Imports stay lean (no torch) so the server answers its health route within a second or
two of launch; the engine loads on the first job.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contract.limits import MiB
from contract.routes import DEFAULT_ENDPOINT, PREFIX_TEMPLATE
from fake_gs.engines import ENGINES
from fake_gs.mutants import MUTANTS
from fake_gs.settings import FakeSettings, Timing


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


def build_parser() -> argparse.ArgumentParser:
    d = FakeSettings()
    p = argparse.ArgumentParser(
        prog="fake-gs",
        description="A fake Cortex Training server: every route of the contract, shape-aware results, "
                    "chunk groups, dialects, auth, mutants. Serves on loopback by default.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--host", default=d.host, help="interface to bind (loopback by default)")
    p.add_argument("--port", type=int, default=d.port, help="port to listen on; 0 picks a free one (printed)")
    p.add_argument("--profile", choices=("current", "proposed"), default=d.profile,
                   help="current: today's documented surface (proposed routes answer 404); proposed: everything")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of every synthesised value")
    p.add_argument("--token", action="append", default=[], metavar="TOKEN",
                   help="accept this bearer token (repeatable); enables auth and per-token job isolation")
    p.add_argument("--strict", action="store_true",
                   help="refuse unknown JSON fields with 400 unknown_field naming the field")
    p.add_argument("--dialect", choices=("kit", "spec"), default=d.dialect,
                   help="answer forms: kit (string error codes, null for empty poll fields, ...) or spec "
                        "(the other forms the published spec allows: integer codes and detail lists, '' "
                        "for empty poll fields, omitted zero capacity fields, last_lr lists, server-chosen "
                        "checkpoint ids, 204 deletes, empty log pages while placing, a visible cancelling)")
    p.add_argument("--status-style", choices=("short", "enum"), default=d.status_style,
                   help="spell statuses 'running'/'done' or 'JOB_STATE_RUNNING'/'REQUEST_STATE_DONE'")
    p.add_argument("--startup", type=_timing, default=d.startup, metavar="instant|polls:N|seconds:T",
                   help="job start-up: running at once, after N GETs of the job, or T seconds after placement")
    p.add_argument("--latency", type=_timing, default=d.latency, metavar="instant|polls:N|seconds:T",
                   help="async request latency: done on the first poll, on the N-th poll, or T seconds after submit")
    p.add_argument("--result-delivery", choices=("auto", "inline", "chunks"), default=d.result_delivery,
                   help="tensor results: inline base64 frames, result-chunk events, or auto by size")
    p.add_argument("--result-chunk-bytes", type=int, default=d.result_chunk_bytes,
                   help="result chunk size, and the auto-mode inline threshold (any size that holds a "
                        "chunk header plus one payload byte)")
    p.add_argument("--max-total-gpus", type=int, default=d.max_total_gpus,
                   help="account GPU capacity; jobs that do not fit stay pending")
    p.add_argument("--allow-any-model", action="store_true",
                   help="accept any model name (default: only the models the real service caches)")
    p.add_argument("--engine", choices=sorted(ENGINES), default=d.engine,
                   help="shape: seeded synthetic results; tiny: a small real causal LM on CPU")
    p.add_argument("--mutant", choices=sorted(MUTANTS), default=None, metavar="NAME",
                   help="run with a deliberate contract violation (for conformance self-tests): "
                        + ", ".join(sorted(MUTANTS)))
    p.add_argument("--faults", default=None, metavar="FILE",
                   help="fault rules file (JSON or YAML); also set at run time via /_fake/faults")
    p.add_argument("--max-body-mib", type=_positive, default=d.max_body_bytes // MiB,
                   help="largest accepted request body in MiB (the contract says 60)")
    lim = p.add_argument_group("limits", "bounds so no client can exhaust the fake (LIMIT-* clauses)")
    lim.add_argument("--max-open-groups", type=_positive, default=d.max_open_groups_per_job,
                     help="open chunk groups per job; one more answers 429 chunk_group_limit")
    lim.add_argument("--max-buffered-mib", type=_positive, default=d.max_buffered_bytes_per_job // MiB,
                     help="chunk bytes buffered per job; more answers 413 buffer_limit")
    lim.add_argument("--max-total-buffered-mib", type=_positive, default=d.max_buffered_bytes_total // MiB,
                     help="chunk bytes buffered by all jobs together; more answers 429 chunk_group_limit")
    lim.add_argument("--chunk-group-idle-s", type=_seconds, default=d.chunk_group_idle_s,
                     help="an unfinished chunk group idle this long is forgotten and its bytes freed")
    lim.add_argument("--max-frame-header-bytes", type=_positive, default=d.max_frame_header_bytes,
                     help="largest safetensors header of a request frame (checked before parsing)")
    lim.add_argument("--max-tree-depth", type=_positive, default=d.max_tree_depth,
                     help="deepest d/l/u nesting of a request frame's tree")
    lim.add_argument("--max-tensors", type=_positive, default=d.max_tensors,
                     help="most tensors in one request frame")
    lim.add_argument("--max-frame-json-bytes", type=_positive, default=d.max_frame_json_bytes,
                     help="largest dss/op JSON metadata string in a request frame")
    lim.add_argument("--max-json-containers", type=_positive, default=d.max_json_containers,
                     help="JSON arrays/objects allowed in one JSON body or frame header")
    lim.add_argument("--max-events-cap", type=_positive, default=d.max_events_cap,
                     help="max_events on a poll is clamped to this (the contract says 512)")
    hard = p.add_argument_group("hardening", "bounds on what a hostile or buggy client can hold (issue 12)")
    hard.add_argument("--body-idle-s", type=_seconds, default=d.body_idle_s,
                      help="a request body with no new bytes this long answers 408 and is freed (0: never)")
    hard.add_argument("--max-inflight-mib", type=_positive, default=d.max_inflight_bytes // MiB,
                      help="bytes of all request bodies being received at once; more answers 503 + Retry-After")
    hard.add_argument("--max-results-mib", type=_positive, default=d.max_results_bytes // MiB,
                      help="unread results one job keeps; beyond it the oldest are freed (polls get 410)")
    hard.add_argument("--max-open-groups-per-account", type=_positive, default=d.max_open_groups_per_account,
                      help="open chunk groups of one account (token) over all its jobs")
    hard.add_argument("--max-account-buffered-mib", type=_positive,
                      default=d.max_buffered_bytes_per_account // MiB,
                      help="chunk bytes one account (token) may buffer over all its jobs")
    hard.add_argument("--admin-token", default=None, metavar="TOKEN",
                      help="the admin API's only credential when --token is set (service tokens get 403)")
    lim.add_argument("--idempotency-window-s", type=_seconds, default=d.idempotency_window_s,
                     help="proposed profile: how long an Idempotency-Key and its answer are kept")
    lim.add_argument("--max-idempotency-keys", type=_positive, default=d.max_idempotency_keys,
                     help="Idempotency-Keys kept per account (the oldest go first)")
    net = p.add_argument_group("TLS and recipes", "what a recipe needs to reach the fake as it reaches the service")
    net.add_argument("--tls", action="store_true",
                     help="serve HTTPS with a certificate from a throwaway CA made now (needs the tls "
                          "extra); prints the CA bundle and the exports a client needs")
    net.add_argument("--env-file", type=Path, default=None, metavar="PATH",
                     help="once serving, write the exports (CORTEX_HOST or CORTEX_BASE_URL, and the CA "
                          "variables with --tls) to PATH for `source`; removed when the fake stops")
    p.add_argument("--traffic", type=int, default=d.traffic, metavar="N",
                   help="keep the last N exchanges per account for GET /_fake/traffic (0: off); "
                        "unknown JSON fields are then reported there instead of refused (unless --strict)")
    p.add_argument("--record", default=None, metavar="FILE",
                   help="write a parity tape (JSON lines) of every exchange served, for gs-parity")
    p.add_argument("--log-level", default=d.log_level,
                   choices=("critical", "error", "warning", "info", "debug"), help="log verbosity")
    return p


def settings_from_args(args: argparse.Namespace) -> FakeSettings:
    return FakeSettings(
        host=args.host,
        port=args.port,
        profile=args.profile,
        seed=args.seed,
        tokens=tuple(args.token),
        strict=args.strict,
        status_style=args.status_style,
        dialect=args.dialect,
        startup=args.startup,
        latency=args.latency,
        result_delivery=args.result_delivery,
        result_chunk_bytes=args.result_chunk_bytes,
        max_total_gpus=args.max_total_gpus,
        allow_any_model=args.allow_any_model,
        engine=args.engine,
        mutant=args.mutant,
        faults=args.faults,
        max_body_bytes=args.max_body_mib * MiB,
        max_open_groups_per_job=args.max_open_groups,
        max_buffered_bytes_per_job=args.max_buffered_mib * MiB,
        max_buffered_bytes_total=args.max_total_buffered_mib * MiB,
        chunk_group_idle_s=args.chunk_group_idle_s,
        max_frame_header_bytes=args.max_frame_header_bytes,
        max_tree_depth=args.max_tree_depth,
        max_tensors=args.max_tensors,
        max_frame_json_bytes=args.max_frame_json_bytes,
        max_json_containers=args.max_json_containers,
        max_events_cap=args.max_events_cap,
        idempotency_window_s=args.idempotency_window_s,
        max_idempotency_keys=args.max_idempotency_keys,
        log_level=args.log_level,
        body_idle_s=args.body_idle_s,
        max_inflight_bytes=args.max_inflight_mib * MiB,
        max_results_bytes=args.max_results_mib * MiB,
        max_open_groups_per_account=args.max_open_groups_per_account,
        max_buffered_bytes_per_account=args.max_account_buffered_mib * MiB,
        admin_token=args.admin_token,
        tls=args.tls,
        traffic=args.traffic,
        record=args.record,
    )


def client_exports(base: str, host_port: str, tls: Any) -> dict[str, str]:
    """The environment a client needs: host-style addressing plus the CA under TLS."""
    if tls is None:
        return {"CORTEX_BASE_URL": base}
    return {"CORTEX_HOST": host_port, **tls.env()}


def export_line(env: dict[str, str]) -> str:
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())


def write_env_file(path: Path, env: dict[str, str]) -> None:
    """Written whole or not at all (a script may poll for it while the fake starts)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()))
    os.replace(tmp, path)


def tls_lines(base: str, host_port: str, tls: Any) -> list[str]:
    if tls is None:
        return []
    return [
        f"  host:     {host_port}  (recipes: host={host_port} with a PAT -> {base})",
        f"  ca:       {tls.ca_path}  (throwaway test CA; deleted when the fake stops)",
        f"  {export_line(client_exports(base, host_port, tls))}",
    ]


def announcement(settings: FakeSettings, base: str, host_port: str, tls: Any,
                 admin_token: str | None = None) -> list[str]:
    """What the fake prints once it accepts connections: where to point a client (and the
    admin token when tokens are set and none was given: it is random)."""
    extras = [f"profile={settings.profile}", f"dialect={settings.dialect}", f"engine={settings.engine}",
              f"auth={'on' if settings.tokens else 'off'}", f"tls={'on' if tls else 'off'}"]
    if settings.mutant:
        extras.append(f"MUTANT={settings.mutant}")
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
        *tls_lines(base, host_port, tls),
    ]


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def _tokenizer_main(argv: Sequence[str]) -> int:
    from fake_gs.tokenizer import main as tokenizer_main

    return tokenizer_main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["tokenizer"]:  # ``fake-gs tokenizer DIR``: same as python -m fake_gs.tokenizer
        return _tokenizer_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
    except (ValueError, OSError) as exc:
        print(f"fake-gs: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from fake_gs.app import create_app
    from fake_gs.server import _Server, base_url_of, bind_socket, host_port_of, uvicorn_config
    from fake_gs.tls import TlsUnavailable, make_material, uvicorn_ssl_options

    try:
        app = create_app(settings)
    except (ValueError, OSError) as exc:
        print(f"fake-gs: {exc}", file=sys.stderr)
        return 2
    try:
        sock = bind_socket(settings.host, settings.port)
    except OSError as exc:
        print(f"fake-gs: cannot listen on {settings.host}:{settings.port}: {exc}", file=sys.stderr)
        return 2
    try:
        tls = make_material(settings.host) if settings.tls else None
    except TlsUnavailable as exc:
        sock.close()
        print(f"fake-gs: {exc}", file=sys.stderr)
        return 2
    port = sock.getsockname()[1]
    base = base_url_of(settings.host, port, "https" if tls else "http")
    host_port = host_port_of(settings.host, port)
    server = _Server(uvicorn_config(app, settings, **uvicorn_ssl_options(tls)))

    async def announce() -> None:
        for line in announcement(settings, base, host_port, tls, app.state.fake.admin_token):
            print(line, flush=True)
        if args.env_file is not None:
            write_env_file(args.env_file, client_exports(base, host_port, tls))

    original = server.startup

    async def startup(sockets: list[socket.socket] | None = None) -> None:
        await original(sockets=sockets)
        await announce()

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
        if args.env_file is not None:
            with contextlib.suppress(OSError):
                args.env_file.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
