"""Replay a tape's requests, in order, against another target and compare every answer.

Ids the new target chooses (jobs, requests, checkpoints, cursors, export URLs) are learned
from its answers by walking them alongside the recorded ones, and substituted into later
paths, queries and JSON bodies. Where the recording polled a job or a request into a
state, the replay polls until it reaches that state too (or a terminal one, or the poll
deadline). Each answer is outlined exactly as the recorder outlines, then compared.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import requests

from client.calls.bounded_read import mount_bounds
from conformance.parity.compare import Divergence, compare
from conformance.parity.depends import Dependencies, refused
from conformance.parity.loops import poll_runs
from conformance.parity.rebuild import Bodies
from conformance.parity.resend import learn, request_bytes, request_headers, rewrite_path
from conformance.parity.targets import EmbeddedTargets, ReplayTarget, Skip, nowhere
from contract import tape
from contract.forms import DEFAULT_DIALECT, forms_of
from contract.redact import scrub_value
from contract.states import (
    is_job_terminal,
    is_request_terminal,
    normalize_job_state,
    normalize_request_state,
)
from contract.tape import bounds

_POLLED = {"get_job": (normalize_job_state, is_job_terminal),
           "get_request": (normalize_request_state, is_request_terminal)}
#: Settings under which the fake's answers depend on the clock: their servers are replayed
#: at the recorded pace (never faster), so idle expiry and timed start-up match.
_TIMED = ("chunk_group_idle_s", "startup", "latency")


@dataclass
class ExchangeResult:
    """One recorded exchange and what its replay answered."""

    seq: int
    group: str
    server: str
    route: str
    method: str
    path: str
    recorded: dict[str, Any]
    new: dict[str, Any] | None = None
    divergences: list[Divergence] = field(default_factory=list)
    skipped: str | None = None
    #: Why it was skipped, in one word (``Skip.kind``: target, bytes, after, loop).
    skip_kind: str | None = None
    polls: int = 0
    #: Wall time of the replayed call (its polls included), milliseconds.
    ms: float = 0.0
    note: str | None = None
    #: The last exchange of the loop this one settled early (the rest of the loop is skipped).
    settled_at: int | None = None

    @property
    def diverged(self) -> bool:
        return any(d.accepted is None for d in self.divergences)


@dataclass
class Replay:
    """Everything a replay found, for the reports."""

    tape: str
    target: str
    results: list[ExchangeResult]
    recorded_s: float
    replay_s: float
    notes: list[str] = field(default_factory=list)
    #: The tape's meta line (source, recording date, target) and its server lines.
    meta: dict[str, Any] = field(default_factory=dict)
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Request bodies this replay rebuilt from their skeleton.
    rebuilt: int = 0
    #: ``--only``: the exchanges reported (the rest replayed only to reach them).
    only: tuple[int, ...] = ()
    #: The tape's size on disk and its ``end`` line (exchanges, what the bodies kept), as
    #: recorded: the figures docs/parity/tapes.md states of a run.
    tape_bytes: int = 0
    end: dict[str, Any] = field(default_factory=dict)

    @property
    def divergent(self) -> list[ExchangeResult]:
        return [r for r in self.results if r.diverged]

    @property
    def compared(self) -> int:
        """Exchanges replayed and compared (not skipped)."""
        return sum(r.skipped is None for r in self.results)

    @property
    def ok(self) -> bool:
        """Nothing diverged, and something was compared: a replay that compared nothing is
        no evidence of parity."""
        return not self.divergent and self.compared > 0

    @property
    def ratio(self) -> float:
        return self.replay_s / self.recorded_s if self.recorded_s > 0 else 0.0


class Replayer:
    def __init__(self, targets: Any, poll_timeout_s: float = 60.0, timeout_s: float = 120.0,
                 accept: Callable[[ExchangeResult, list[Divergence]], None] | None = None,
                 stop_at_divergence: bool = False, floats: str = "sign", stop_after: int | None = None) -> None:
        self.targets = targets
        #: ``--only``: the last exchange to replay (the earlier ones create what it uses).
        self.stop_after = stop_after
        self.floats = floats
        self.stop_at_divergence = stop_at_divergence
        self.accept = accept or (lambda ex, found: None)
        self.poll_timeout_s = poll_timeout_s
        self.timeout_s = timeout_s
        self.ids: dict[str, str] = {}
        #: The tape being replayed (named in refusals).
        self.path = ""
        #: The largest recorded answer of each route, bytes (what a replayed answer may cost).
        self.largest: dict[str | None, int] = {}
        self.servers: dict[str, dict[str, Any]] = {}
        self._last: dict[str, tuple[float, float]] = {}
        #: The last exchange of each recorded loop -> the loop's earlier exchanges.
        self.loops: dict[int, list[dict[str, Any]]] = {}
        self.bodies = Bodies(())
        self.deps = Dependencies()
        # Each answer under a byte cap and a total time bound (client.calls.bounded_read).
        self.session = mount_bounds(requests.Session())
        self.session.headers["User-Agent"] = "gs-parity/0.1"

    def run(self, path: str, lines: list[dict[str, Any]]) -> Replay:
        started = time.monotonic()
        self.path = path
        results: list[ExchangeResult] = []
        exchanges = [x for x in lines if x["kind"] == "exchange"]
        ends = [x for x in lines if x["kind"] == "end"]
        settle = poll_runs(exchanges)
        self.loops = {}
        for x in exchanges:
            if x["seq"] in settle:
                self.loops.setdefault(settle[x["seq"]]["seq"], []).append(x)
        self.bodies = Bodies(lines)
        self.deps = Dependencies()
        if isinstance(self.targets, EmbeddedTargets) and lines and lines[0].get("kind") == "meta":
            self.targets.recorded_meta = dict(lines[0])
        self.largest = {}
        for x in exchanges:
            route = x["request"].get("route")
            self.largest[route] = max(self.largest.get(route, 0), bounds.answer_bytes(x["response"]))
        skip_through: int | None = None
        for line in lines:
            if line["kind"] == "server":
                self.servers[line["name"]] = line
            elif line["kind"] == "exchange":
                if skip_through is not None and line["seq"] <= skip_through:
                    results.append(self.skipped(line, "the replay reached this loop's final answer sooner", "loop"))
                    continue
                results.append(self.replay_one(line, settle.get(line["seq"])))
                skip_through = results[-1].settled_at
                if (self.stop_at_divergence and results[-1].diverged) or (
                        self.stop_after is not None and line["seq"] >= self.stop_after):
                    break
        try:
            notes = list(getattr(self.targets, "notes", []))
        finally:
            self.session.close()
        # A conformance tape covers the whole run; a fake's tape also its idle uptime, so
        # there the run is the span of the exchanges.
        by_fake = lines[0].get("source") == "fake-gs"
        recorded = float(ends[-1]["seconds"]) if ends and not by_fake else recorded_span(exchanges)
        return Replay(path, self.targets.describe, results, recorded, time.monotonic() - started, notes,
                      meta=dict(lines[0]), servers=dict(self.servers), rebuilt=self.bodies.rebuilt,
                      tape_bytes=os.path.getsize(path) if os.path.isfile(path) else 0,
                      end=dict(ends[-1]) if ends else {})

    def replay_one(self, ex: dict[str, Any], settled: dict[str, Any] | None = None) -> ExchangeResult:
        """One exchange, unless it depends on one that was not replayed; what it created is
        blocked when it is not replayed or is refused where the recording was answered."""
        hit = self.deps.blocker(ex, self.ids)
        if hit is not None:
            result = self.skipped(ex, f"after #{hit[0]}: {hit[1]}", hit[2])
            self.deps.block(ex, hit, self.ids)
        else:
            result = self.one(ex, settled)
            why = result.skipped if result.skip_kind not in (None, "loop") else (
                refused(ex["response"], result.new) if result.new is not None else None)
            if why:
                self.deps.block(ex, (ex["seq"], why, "after"), self.ids)
            elif result.new is not None and not result.diverged:
                self.deps.block_ended_chain(ex, result.new, self.ids)
        self.deps.note(ex)
        return result

    def skipped(self, ex: dict[str, Any], why: str, kind: str = "target") -> ExchangeResult:
        req = ex["request"]
        return ExchangeResult(ex["seq"], ex.get("group", ""), ex.get("server", "target"),
                              req.get("route") or tape.admin_route(req["path"]) or "-",
                              req["method"], req["path"], ex["response"], skipped=why, skip_kind=kind)

    def one(self, ex: dict[str, Any], settled: dict[str, Any] | None = None) -> ExchangeResult:
        req = ex["request"]
        result = ExchangeResult(ex["seq"], ex.get("group", ""), ex.get("server", "target"),
                                req.get("route") or tape.admin_route(req["path"]) or "-",
                                req["method"], req["path"], ex["response"])
        try:
            target = self.target_of(result.server, ex)
            body = request_bytes(req, self.ids, self.bodies)
        except Skip as exc:
            result.skipped, result.skip_kind = str(exc), exc.kind
            return result
        except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
            # A tape is untrusted: what its body parts cannot be is a refusal naming the line.
            raise bounds.TapeRefused(f"{bounds.where(self.path, ex)}: exchange #{ex.get('seq')}: "
                                     f"its request body cannot be sent: {exc}") from None
        self.pace(result.server, ex)
        started = time.monotonic()
        new = self.send(target, req, body, _read_timeout(ex["response"], ex.get("ms", 0)),
                        streamed=bool(ex["response"].get("streamed")), recorded=ex["response"])
        new = self.poll_until(target, req, body, ex["response"], new, result)
        result.new = new
        result.ms = (time.monotonic() - started) * 1000
        learn(ex["response"].get("body"), new.get("body"), self.ids)
        result.divergences = self.judge(result, ex["response"], new)
        if result.diverged and self.behind(result, ex["seq"], new):
            new = self.finish_loop(target, req, body, ex["response"], result)
        if result.diverged and settled is not None:
            early = self.judge(result, settled["response"], new)
            if not any(d.accepted is None for d in early):
                # A poll loop: the new target got to the loop's final answer sooner.
                result.divergences = early
                result.note = f"reached the answer the recording got at #{settled['seq']} sooner"
                result.settled_at = settled["seq"]
        return result

    def target_of(self, server: str, ex: dict[str, Any]) -> ReplayTarget:
        """Where an exchange goes: its server's replacement, or, for a call the recording
        sent where no server listened, an address where none listens either."""
        if server not in self.servers and _never_connected(ex["response"]):
            return nowhere()
        return self.targets.get(server, self.servers.get(server, {}), ex["request"]["path"])

    def behind(self, result: ExchangeResult, seq: int, new: dict[str, Any]) -> bool:
        """The last call of a recorded loop answered like an earlier, unfinished call of that
        loop: the new target is behind the recording (a slower sweep, a later expiry)."""
        for earlier in self.loops.get(seq, []):
            recorded = earlier["response"]
            if _finished(result.route, recorded):
                continue  # a terminal answer cannot be an earlier stage
            found = compare(recorded, new, self.ids, self.floats, self.forms(result.server))
            self.accept(result, found)
            if not any(d.accepted is None for d in found):
                return True
        return False

    def finish_loop(self, target: ReplayTarget, req: dict[str, Any], body: bytes | None,
                    recorded: dict[str, Any], result: ExchangeResult) -> dict[str, Any]:
        """The recording client repeated this call until this answer, so the replay may too,
        within the poll deadline."""
        deadline = time.monotonic() + self.poll_timeout_s
        delay = 0.02
        new = result.new or {}
        while result.diverged and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)
            new = self.send(target, req, body, recorded=recorded)
            result.polls += 1
            result.new = new
            result.divergences = self.judge(result, recorded, new)
        return new

    def forms(self, server: str) -> frozenset[str] | None:
        """The answer forms (contract.forms) a replayed server may use: a URL any the spec
        allows (None); an embedded fake those of the dialect it is started in."""
        if not isinstance(self.targets, EmbeddedTargets) or not (self.servers.get(server) or {}).get("embedded"):
            return None  # a URL now, or a real service then: any form the spec allows
        recorded = (self.servers.get(server) or {}).get("settings") or {}
        return forms_of(self.targets.overrides.get("dialect") or recorded.get("dialect") or DEFAULT_DIALECT)

    def judge(self, result: ExchangeResult, recorded: dict[str, Any], new: dict[str, Any]) -> list[Divergence]:
        found = compare(recorded, new, self.ids, self.floats, self.forms(result.server))
        self.accept(result, found)
        return found

    def send(self, target: ReplayTarget, req: dict[str, Any], body: bytes | None,
             read_timeout_s: float | None = None, streamed: bool = False,
             recorded: dict[str, Any] | None = None) -> dict[str, Any]:
        """The new answer, outlined. ``streamed``: the recording client streamed this answer
        and the tape does not know whether its body arrived, so a body cut after the
        headers is no transport failure here either (the status and headers still count).
        At most :func:`contract.tape.bounds.answer_cap` bytes of it are read, by the size of
        ``recorded`` (the recorded answer) or of the largest recorded answer of its route,
        whichever is larger (a poll may bring the results sooner); a longer one is a
        transport failure."""
        url = _on_target(target.base_url, target.base_url + rewrite_path(req, target.prefix, self.ids))
        query = [(k, self.ids.get(v, v)) for k, v in req.get("query", [])]
        headers = request_headers(req.get("headers", {}), target.tokens, target.admin_token)
        prepared = self.session.prepare_request(
            requests.Request(req["method"], url, data=body, headers=headers))
        # The path goes out exactly as recorded ("..", "%2F" included): no normalising.
        prepared.url = url + ("?" + urlencode(query) if query else "")
        try:
            timeout = (10.0, read_timeout_s or self.timeout_s)
            resp = self.session.send(prepared, timeout=timeout, allow_redirects=False, stream=True)
        except requests.RequestException as exc:
            return {"status": 0, "headers": {}, "body": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        picked = {k.lower(): v for k, v in resp.headers.items() if k.lower() in tape.RESPONSE_HEADERS}
        cap = bounds.answer_cap(max(bounds.answer_bytes(recorded or {}), self.largest.get(req.get("route"), 0)))
        try:
            content = _read_capped(resp, cap)
        except _OverCap:
            return {"status": 0, "headers": {}, "body": None,
                    "error": f"AnswerTooBig: the answer ran past {cap} bytes (twice the recorded answer's size "
                             f"plus {bounds.ANSWER_MARGIN_BYTES // (1024 * 1024)} MiB); not read further"}
        except requests.RequestException as exc:
            if streamed:
                return {"status": resp.status_code, "headers": picked, "body": None, "streamed": True}
            return {"status": 0, "headers": {}, "body": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            resp.close()
        outline = tape.sink_of(content).describe(resp.headers.get("content-type", ""))
        # A server may echo what it was sent (the token) into its answer: never into a report
        # (credential-looking values are scrubbed when the report is written: ids learnt
        # from this answer, export URLs included, must stay real for the later calls).
        return {"status": resp.status_code, "headers": picked,
                "body": scrub_value(outline, (*target.tokens, target.admin_token), patterns=False)}

    def pace(self, server: str, ex: dict[str, Any]) -> None:
        """Wait, for a server whose answers depend on time, until as much time has passed
        since its previous exchange as in the recording."""
        if not self._timed(server):
            return
        last = self._last.get(server)
        now = time.monotonic()
        if last is not None:
            gap = float(ex["t"]) - last[0]
            wait = gap - (now - last[1])
            if wait > 0:
                time.sleep(min(wait, 30.0))
        self._last[server] = (float(ex["t"]), time.monotonic())

    def _timed(self, server: str) -> bool:
        settings = self.servers.get(server, {}).get("settings") or {}
        idle = settings.get("chunk_group_idle_s")
        clocked = any(str(settings.get(k, "")).startswith("seconds") for k in _TIMED[1:])
        return clocked or (isinstance(idle, (int, float)) and idle < 60)

    def poll_until(self, target: ReplayTarget, req: dict[str, Any], body: bytes | None,
                   recorded: dict[str, Any], new: dict[str, Any], result: ExchangeResult) -> dict[str, Any]:
        """Poll again while the new answer is behind the recorded state (not yet terminal)."""
        route = req.get("route")
        if route not in _POLLED or not (_success(recorded) and _success(new)) or "error" in new:
            return new
        normal, terminal = _POLLED[route]
        want = _state(recorded, normal)
        deadline = time.monotonic() + self.poll_timeout_s
        delay = 0.005
        while want is not None:
            got = _state(new, normal)
            if got is None or got == want or terminal(got) or time.monotonic() > deadline:
                break
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)
            earlier = new
            new = self.send(target, req, body, recorded=recorded)
            result.polls += 1
            if not _success(new):
                break
            new = _carry_events(earlier, new)
        return new


def _success(answer: dict[str, Any]) -> bool:
    """Any 2xx: the spec names no success status for a poll (spec §3.6: non-2xx is an error)."""
    status = answer.get("status")
    return isinstance(status, int) and 200 <= status < 300


class _OverCap(Exception):
    """The answer ran past what the replay reads of it."""


def _read_capped(resp: requests.Response, cap: int) -> bytes:
    """The answer's body, read piece by piece and given up past ``cap`` bytes."""
    parts: list[bytes] = []
    got = 0
    for piece in resp.iter_content(64 * 1024):
        got += len(piece)
        if got > cap:
            raise _OverCap()
        parts.append(piece)
    return b"".join(parts)


def _on_target(base_url: str, url: str) -> str:
    """``url``, when it addresses the host, port and scheme of ``base_url`` (every recorded
    path was checked when the tape was read; this is the last guard before the PAT goes)."""
    from urllib3.util import parse_url

    want, got = parse_url(base_url), parse_url(url)
    if (got.scheme, got.host, got.port, got.auth) != (want.scheme, want.host, want.port, want.auth):
        raise bounds.TapeRefused(f"a replayed request would go to {got.scheme}://{got.host}:{got.port}, not "
                                 f"the target {want.scheme}://{want.host}:{want.port}; refused, not sent")
    return url


def _carry_events(earlier: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Events an extra poll consumed belong to the answer the recording got in one poll."""
    try:
        before, after = earlier["body"]["json"]["events"], new["body"]["json"]["events"]
    except (KeyError, TypeError):
        return new
    if not isinstance(before, list) or not isinstance(after, list) or not before:
        return new
    merged = tape.compact_list([*before, *after])
    body = {**new["body"], "json": {**new["body"]["json"], "events": merged}}
    return {**new, "body": body}


def _never_connected(recorded: dict[str, Any]) -> bool:
    """The recorded call found no server at its address (its connection was refused)."""
    error = str(recorded.get("error", "")).lower()
    return recorded.get("status") == 0 and ("refused" in error or "failed to establish a new connection" in error)


def _finished(route: str, answer: dict[str, Any]) -> bool:
    if route not in _POLLED:
        return False
    normal, terminal = _POLLED[route]
    state = _state(answer, normal)
    return state is not None and bool(terminal(state))


#: How a recorded read time-out reads: requests' own, or the bounded reader's whole-answer
#: bound (client.calls.bounded_read.AnswerTooSlow, a ReadTimeout).
_TIMED_OUT = ("Timeout", "AnswerTooSlow", "timed out")


def _read_timeout(recorded: dict[str, Any], ms: float) -> float | None:
    """The recording client's read timeout, when it ran out: wait as long, not longer."""
    error = str(recorded.get("error", ""))
    return max(ms / 1000, 0.05) if any(mark in error for mark in _TIMED_OUT) else None


def _state(answer: dict[str, Any], normal: Any) -> str | None:
    body = answer.get("body") or {}
    value = body.get("json", {}).get("status") if isinstance(body.get("json"), dict) else None
    return normal(value) if isinstance(value, str) else None


def recorded_span(exchanges: list[dict[str, Any]]) -> float:
    """Wall time of the recorded exchanges: first request sent to last answer received."""
    if not exchanges:
        return 0.0
    first = min(x["t"] for x in exchanges)
    last = max(x["t"] + x.get("ms", 0) / 1000 for x in exchanges)
    return max(last - first, 0.0)
