"""Replay a tape's requests, in order, against another target and compare every answer.

Ids the new target chooses (jobs, requests, checkpoints, cursors, export URLs) are learned
from its answers by walking them alongside the recorded ones, and substituted into later
paths, queries and JSON bodies. Where the recording polled a job or a request into a
state, the replay polls until it reaches that state too (or a terminal one, or the poll
deadline). Each answer is outlined exactly as the recorder outlines, then compared.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlencode

import requests

from conformance.parity.compare import Divergence, compare, is_id_key
from conformance.parity.loops import poll_runs
from conformance.parity.targets import UNKNOWN_TOKEN, EmbeddedTargets, ReplayTarget, Skip
from contract import tape
from contract.auth import AUTHORIZATION_HEADER
from contract.forms import forms_of
from contract.states import (
    is_job_terminal,
    is_request_terminal,
    normalize_job_state,
    normalize_request_state,
)

_POLLED = {"get_job": (normalize_job_state, is_job_terminal),
           "get_request": (normalize_request_state, is_request_terminal)}
_MIN_ID = 6
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

    @property
    def divergent(self) -> list[ExchangeResult]:
        return [r for r in self.results if r.diverged]

    @property
    def ok(self) -> bool:
        return not self.divergent

    @property
    def ratio(self) -> float:
        return self.replay_s / self.recorded_s if self.recorded_s > 0 else 0.0


class Replayer:
    def __init__(self, targets: Any, poll_timeout_s: float = 60.0, timeout_s: float = 120.0,
                 accept: Callable[[ExchangeResult, list[Divergence]], None] | None = None,
                 stop_at_divergence: bool = False, floats: str = "sign") -> None:
        self.targets = targets
        self.floats = floats
        self.stop_at_divergence = stop_at_divergence
        self.accept = accept or (lambda ex, found: None)
        self.poll_timeout_s = poll_timeout_s
        self.timeout_s = timeout_s
        self.ids: dict[str, str] = {}
        self.servers: dict[str, dict[str, Any]] = {}
        self._last: dict[str, tuple[float, float]] = {}
        #: The last exchange of each recorded loop -> the loop's earlier exchanges.
        self.loops: dict[int, list[dict[str, Any]]] = {}
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "gs-parity/0.1"

    def run(self, path: str, lines: list[dict[str, Any]]) -> Replay:
        started = time.monotonic()
        results: list[ExchangeResult] = []
        exchanges = [x for x in lines if x["kind"] == "exchange"]
        ends = [x for x in lines if x["kind"] == "end"]
        settle = poll_runs(exchanges)
        self.loops = {}
        for x in exchanges:
            if x["seq"] in settle:
                self.loops.setdefault(settle[x["seq"]]["seq"], []).append(x)
        skip_through: int | None = None
        for line in lines:
            if line["kind"] == "server":
                self.servers[line["name"]] = line
            elif line["kind"] == "exchange":
                if skip_through is not None and line["seq"] <= skip_through:
                    results.append(self.skipped(line, "the replay reached this loop's final answer sooner"))
                    continue
                results.append(self.one(line, settle.get(line["seq"])))
                skip_through = results[-1].settled_at
                if self.stop_at_divergence and results[-1].diverged:
                    break
        try:
            notes = list(getattr(self.targets, "notes", []))
        finally:
            self.session.close()
        # A conformance tape covers the whole run; a fake's tape also its idle uptime, so
        # there the run is the span of the exchanges.
        by_fake = lines[0].get("source") == "fake-gs"
        recorded = float(ends[-1]["seconds"]) if ends and not by_fake else recorded_span(exchanges)
        return Replay(path, self.targets.describe, results, recorded,
                      time.monotonic() - started, notes)

    def skipped(self, ex: dict[str, Any], why: str) -> ExchangeResult:
        req = ex["request"]
        return ExchangeResult(ex["seq"], ex.get("group", ""), ex.get("server", "target"),
                              req.get("route") or tape.admin_route(req["path"]) or "-",
                              req["method"], req["path"], ex["response"], skipped=why)

    def one(self, ex: dict[str, Any], settled: dict[str, Any] | None = None) -> ExchangeResult:
        req = ex["request"]
        result = ExchangeResult(ex["seq"], ex.get("group", ""), ex.get("server", "target"),
                                req.get("route") or tape.admin_route(req["path"]) or "-",
                                req["method"], req["path"], ex["response"])
        try:
            target = self.targets.get(result.server, self.servers.get(result.server, {}), req["path"])
            body = request_bytes(req, self.ids)
        except Skip as exc:
            result.skipped = str(exc)
            return result
        self.pace(result.server, ex)
        started = time.monotonic()
        new = self.send(target, req, body, _read_timeout(ex["response"], ex.get("ms", 0)),
                        streamed=bool(ex["response"].get("streamed")))
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
            new = self.send(target, req, body)
            result.polls += 1
            result.new = new
            result.divergences = self.judge(result, recorded, new)
        return new

    def forms(self, server: str) -> frozenset[str] | None:
        """The answer forms (contract.forms) a replayed server may use: a URL any the spec
        allows (None); an embedded fake those of the dialect it is started in."""
        if not isinstance(self.targets, EmbeddedTargets):
            return None
        recorded = (self.servers.get(server) or {}).get("settings") or {}
        return forms_of(self.targets.overrides.get("dialect") or recorded.get("dialect") or "kit")

    def judge(self, result: ExchangeResult, recorded: dict[str, Any], new: dict[str, Any]) -> list[Divergence]:
        found = compare(recorded, new, self.ids, self.floats, self.forms(result.server))
        self.accept(result, found)
        return found

    def send(self, target: ReplayTarget, req: dict[str, Any], body: bytes | None,
             read_timeout_s: float | None = None, streamed: bool = False) -> dict[str, Any]:
        """The new answer, outlined. ``streamed``: the recording client streamed this answer
        and the tape does not know whether its body arrived, so a body cut after the
        headers is no transport failure here either (the status and headers still count)."""
        url = target.base_url + rewrite_path(req, target.prefix, self.ids)
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
        try:
            content = resp.content
        except requests.RequestException as exc:
            if streamed:
                return {"status": resp.status_code, "headers": picked, "body": None, "streamed": True}
            return {"status": 0, "headers": {}, "body": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            resp.close()
        return {"status": resp.status_code, "headers": picked,
                "body": tape.sink_of(content).describe(resp.headers.get("content-type", ""))}

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
        if route not in _POLLED or recorded["status"] != 200 or new["status"] != 200 or "error" in new:
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
            new = self.send(target, req, body)
            result.polls += 1
            if new["status"] != 200:
                break
            new = _carry_events(earlier, new)
        return new


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


def _finished(route: str, answer: dict[str, Any]) -> bool:
    if route not in _POLLED:
        return False
    normal, terminal = _POLLED[route]
    state = _state(answer, normal)
    return state is not None and bool(terminal(state))


def _read_timeout(recorded: dict[str, Any], ms: float) -> float | None:
    """The recording client's read timeout, when it ran out: wait as long, not longer."""
    return max(ms / 1000, 0.05) if "Timeout" in str(recorded.get("error", "")) else None


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


def rewrite_path(req: dict[str, Any], prefix: str | None, ids: dict[str, str]) -> str:
    path = req["path"]
    if prefix and req.get("prefix") and path.startswith(req["prefix"]):
        path = prefix + path[len(req["prefix"]):]
    if not ids:
        return path
    out = []
    for segment in path.split("/"):
        head, colon, verb = segment.partition(":")
        for form in (head, unquote(head)):
            if form in ids:
                head = quote(ids[form], safe="")
                break
        out.append(head + colon + verb)
    return "/".join(out)


def request_headers(recorded: dict[str, str], tokens: tuple[str | None, ...],
                    admin_token: str | None = None) -> dict[str, str]:
    """The recorded headers with real credentials: the N-th token for ``<token-N>``, the
    target's admin token for the recorded admin credential."""
    headers = {k: v for k, v in recorded.items() if k != AUTHORIZATION_HEADER.lower()}
    label = recorded.get(AUTHORIZATION_HEADER.lower())
    if label is not None:
        headers[AUTHORIZATION_HEADER] = (f"Bearer {admin_token or UNKNOWN_TOKEN}"
                                    if label == tape.ADMIN_LABEL else _credential(label, tokens))
    if "content-type" not in headers:
        headers["Content-Type"] = ""  # requests would otherwise guess one
    return headers


def _credential(label: str, tokens: tuple[str | None, ...]) -> str:
    scheme, _, value = label.partition(" ")
    if value.startswith("<token-") and value.endswith(">"):
        index = value[len("<token-"):-1]
        token = tokens[int(index) - 1] if index.isdigit() and int(index) <= len(tokens) else None
        return f"{scheme} {token or UNKNOWN_TOKEN}"
    if value == "<credential>":
        return f"{scheme} {UNKNOWN_TOKEN}"
    return label


def request_bytes(req: dict[str, Any], ids: dict[str, str]) -> bytes | None:
    """The body to send: the kept bytes, a one-byte fill, or JSON rebuilt with new ids."""
    body = req.get("body")
    if not body:
        return None
    raw = tape.raw_body(body)
    if raw is not None:
        if "json" in body or "text" in body:
            for old, new in sorted(ids.items(), key=lambda p: -len(p[0])):
                if len(old) >= _MIN_ID and len(old) == len(new):
                    raw = raw.replace(old.encode(), new.encode())
        return raw
    if "fill" in body:
        return bytes([body["fill"]]) * int(body["bytes"])
    if "json" in body and body.get("exact"):
        return json.dumps(_swap(body["json"], ids)).encode()
    raise Skip(f"the request body ({body.get('bytes')} bytes) was not kept in the recording"
               + (f": {body['withheld']}" if "withheld" in body else ""))


def _swap(value: Any, ids: dict[str, str]) -> Any:
    """Learned ids put in place of recorded ones, inside strings too (a SQL statement names
    a run by a name holding the job id)."""
    if isinstance(value, str):
        if value in ids:
            return ids[value]
        for old, new in sorted(ids.items(), key=lambda p: -len(p[0])):
            if len(old) >= _MIN_ID and old in value:
                value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [_swap(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _swap(v, ids) for k, v in value.items()}
    return value


def learn(recorded: Any, new: Any, ids: dict[str, str], key: str = "") -> None:
    """Walk both answers together; an id-like string that differs maps recorded -> new."""
    if isinstance(recorded, dict) and isinstance(new, dict):
        for k, v in recorded.items():
            if k in new:
                learn(v, new[k], ids, k if k not in ("json", "head", "tail") else key)
    elif isinstance(recorded, list) and isinstance(new, list):
        for a, b in zip(recorded, new, strict=False):
            learn(a, b, ids, key)
    elif (isinstance(recorded, str) and isinstance(new, str) and recorded != new
          and is_id_key(key) and len(recorded) >= _MIN_ID and recorded not in ids):
        ids[recorded] = new
        if "://" in recorded and "://" in new:  # an export URL: later calls use its path
            old_tail, new_tail = recorded.rstrip("/").rsplit("/", 1)[-1], new.rstrip("/").rsplit("/", 1)[-1]
            if old_tail != new_tail and len(old_tail) >= _MIN_ID:
                ids.setdefault(unquote(old_tail), unquote(new_tail))
