"""``gs-proxy``: judge real traffic between any client and any server.

A reverse proxy on loopback in front of one upstream URL. Point a client at it instead of
the server (only the host changes): every exchange is relayed unchanged, judged live by
the passive judge (:mod:`conformance.judge`) on both sides, each violation printed as it
happens, optionally recorded to a tape (``--record``, scrubbed like every tape). At the end
(SIGINT/SIGTERM, ``--until-idle`` or ``--exit-after``) it writes the report in the suite's
formats and exits 1 on a red MUST clause that binds this upstream (2: nothing observed).

Exit codes: 0 no binding red MUST clause, 1 at least one, 2 no exchange seen or a bad option.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import ssl
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from conformance.judge.exchange import Exchange
from conformance.judge.passive import PassiveJudge, Red
from conformance.judge.report import conclude
from conformance.judge.requests import HASH_UP_TO
from conformance.proxy.relay import Relay, Relayed
from contract.auth import AUTHORIZATION_HEADER, bearer_token
from contract.clauses import CLAUSE_PROFILES, CLAUSES
from contract.forms import DIALECTS
from contract.tape import BodySink, TapeWriter, answer_sink
from contract.tape import Exchange as TapeExchange

#: Violations of one clause printed live; later ones are counted in the report.
PRINTED_PER_CLAUSE = 10
MiB = 1024 * 1024


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gs-proxy", description="A validating reverse proxy: relays every exchange to --upstream "
        "unchanged and judges both sides against the contract.")
    p.add_argument("--upstream", required=True, help="the server's base URL (http:// or https://)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default 0: the OS picks)")
    p.add_argument("--tls", action="store_true",
                   help="serve HTTPS with a throwaway CA (like fake-gs --tls); its path is printed")
    p.add_argument("--upstream-ca", metavar="PEM",
                   help="trust this CA bundle for an https upstream (default: the system's); "
                   "the upstream's certificate is always verified")
    p.add_argument("--record", metavar="TAPE", help="record every exchange to a tape (credentials scrubbed)")
    p.add_argument("--report", action="append", default=[], metavar="PATH",
                   help="write the report (.html, .md, .xml JUnit, .json, else text); repeatable")
    p.add_argument("--profile", default="current", choices=CLAUSE_PROFILES,
                   help="the clause profile judged (default current)")
    p.add_argument("--dialect", choices=DIALECTS,
                   help="the upstream is the fake in this answer dialect (default: a server the kit did "
                   "not build: it may answer in every form the spec allows, so the kit's own forms "
                   "are not judged)")
    p.add_argument("--kit-decisions", action="store_true",
                   help="let a red 'decided' clause fail the run (in front of the fake; against a "
                   "real server only the spec's clauses fail it)")
    p.add_argument("--until-idle", type=float, metavar="S",
                   help="stop once no exchange has been in flight for S seconds (after the first)")
    p.add_argument("--exit-after", type=float, metavar="S", help="stop after S seconds")
    p.add_argument("--hash-frames-up-to", type=float, default=HASH_UP_TO / MiB, metavar="MIB",
                   help="hash the chunks of frames up to this size as they pass, to judge each group's "
                   f"frame_sha256 (default {HASH_UP_TO // MiB}; a bigger frame passes socket to socket, unhashed)")
    p.add_argument("--quiet", action="store_true", help="print no live violation lines")
    return p


class Session:
    """One proxy run: the judge, the tape, the live lines."""

    def __init__(self, args: argparse.Namespace, out: TextIO) -> None:
        self.args = args
        self.out = out
        self.judge = PassiveJudge(self._red, hash_up_to=int(args.hash_frames_up_to * MiB))
        self.printed: Counter[str] = Counter()
        self.tape = TapeWriter(args.record, source="gs-proxy", meta={"upstream": args.upstream}) if args.record else None
        self.started = time.time()

    def _red(self, red: Red) -> None:
        if self.args.quiet:
            return
        self.printed[red.clause_id] += 1
        n = self.printed[red.clause_id]
        if n > PRINTED_PER_CLAUSE:
            return
        clause = CLAUSES.get(red.clause_id)
        level = f"{clause.level}, {clause.source}" if clause else "?"
        more = " (further ones are counted in the report)" if n == PRINTED_PER_CLAUSE else ""
        print(f"gs-proxy: RED {red.side} {red.clause_id} ({level}): {red.example[:300]}{more}",
              file=self.out, flush=True)

    def sinks(self, headers: Mapping[str, str]) -> tuple[BodySink, BodySink]:
        """A tape's body sinks for one exchange; its credential is scrubbed from them (held
        in memory only, for this run)."""
        assert self.tape is not None
        self.tape.add_secret(bearer_token(headers.get(AUTHORIZATION_HEADER)))
        return self.tape.request_sink(), answer_sink()

    def exchange(self, ex: Exchange, relayed: Relayed) -> None:
        self.judge.observe(ex)
        if self.tape is not None and relayed.request_sink is not None and relayed.response_sink is not None:
            self.tape.record(TapeExchange(
                ex.method, relayed.path, relayed.query, relayed.request_headers, relayed.request_sink,
                ex.status if ex.status is not None else -1, relayed.response_headers, relayed.response_sink,
                ex.started, relayed.seconds, error=relayed.error))

    def finish(self) -> int:
        """Write the report; the exit code."""
        if self.tape is not None:
            self.tape.close({"judged_by": "gs-proxy"})
        return conclude(self.judge, profile=self.args.profile, target=self.args.upstream,
                        url=not self.args.kit_decisions, duration_s=time.time() - self.started,
                        reports=self.args.report, source="gs-proxy", dialect=self.args.dialect)


def _upstream_ssl(args: argparse.Namespace) -> ssl.SSLContext | None:
    if not args.upstream.startswith("https://"):
        return None
    return ssl.create_default_context(cafile=args.upstream_ca)


async def run(args: argparse.Namespace, out: TextIO) -> int:
    session = Session(args, out)
    relay = Relay(args.upstream, session.exchange, upstream_ssl=_upstream_ssl(args),
                  sinks=session.sinks if session.tape is not None else None,
                  group_hash=session.judge.requests.group_hash)
    material = None
    server_ssl: ssl.SSLContext | None = None
    if args.tls:
        from fake_gs.tls import make_material

        material = make_material(args.host)
        server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ssl.load_cert_chain(str(material.cert_path), str(material.key_path))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    server = await relay.start_server(args.host, args.port, server_ssl)
    try:
        port = server.sockets[0].getsockname()[1]
        scheme = "https" if args.tls else "http"
        print(f"gs-proxy: listening on {scheme}://{args.host}:{port} -> {args.upstream}", flush=True)
        if material is not None:
            print(f"gs-proxy: CA {material.ca_path} (export REQUESTS_CA_BUNDLE={material.ca_path} "
                  f"SSL_CERT_FILE={material.ca_path})", flush=True)
        await _wait(stop, relay, session, args)
    finally:
        server.close()
        await relay.close_all()
        with contextlib.suppress(Exception):
            await server.wait_closed()
        if material is not None:
            material.cleanup()
    return session.finish()


async def _wait(stop: asyncio.Event, relay: Relay, session: Session, args: argparse.Namespace) -> None:
    """Until a signal, ``--exit-after`` or ``--until-idle`` says to stop."""
    began = time.monotonic()
    while not stop.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)
        now = time.monotonic()
        if args.exit_after is not None and now - began >= args.exit_after:
            return
        idle = relay.in_flight == 0 and now - relay.last_activity >= (args.until_idle or 0)
        if args.until_idle is not None and session.judge.exchanges and idle:
            return


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.record:
        Path(args.record).parent.mkdir(parents=True, exist_ok=True)
    try:
        return asyncio.run(run(args, sys.stderr))
    except ValueError as exc:
        print(f"gs-proxy: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
