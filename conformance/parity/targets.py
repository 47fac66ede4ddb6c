"""Where a replay sends each recorded server's exchanges: a URL, or embedded fakes.

A tape names its servers (the main target and, for a conformance run on the fake, the
variant fakes some properties start). Against a URL only the main target has an
equivalent; the variants' exchanges are skipped with that reason. Without a URL each
recorded server becomes an embedded fake started from its recorded settings, with
options given on the command line (a mutant, an engine) laid over them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, fields
from typing import Any

#: Where the fake serves checkpoint export downloads (its export URLs): a recording
#: against a fake by URL downloads from there, and so does its replay.
EXPORTS_PATH = "/_fake/exports/"
#: Most service tokens an embedded replay fake is configured with (the tape only says how
#: many; each replay makes fresh random ones, and an admin token, never constants).
REPLAY_TOKEN_COUNT = 3
#: What a replay sends where the recording held a credential it did not know.
UNKNOWN_TOKEN = "gs-parity-unknown-token"
#: Recorded fake settings a replay never takes from a tape: where it listens (loopback, a
#: port the OS picks), its credentials (fresh random ones), any file it would read or write
#: (a faults file, a tape, TLS material), and how many threads and connections it runs.
#: A tape is untrusted input: it chooses no interface and names no file a replay opens.
NOT_FROM_A_TAPE = {
    "host": "the replay fake listens on 127.0.0.1 only",
    "port": "the OS picks the replay fake's port",
    "tokens": "the replay fake gets fresh random tokens",
    "admin_token": "the replay fake gets a fresh random admin token",
    "faults": "a replay reads no file a tape names",
    "record": "a replay writes no file a tape names",
    "record_bodies": "a replay writes no tape",
    "record_budget_mib": "a replay writes no tape",
    "tls": "a replay makes no TLS files",
    "log_level": "the replay fake logs critical messages only",
    "worker_threads": "the replay fake runs the default threads",
    "max_connections": "the replay fake keeps the default connection cap",
    "validate_answers": "the answer check belongs to where the replay runs",
}


@dataclass(frozen=True)
class ReplayTarget:
    base_url: str
    tokens: tuple[str | None, ...] = field(repr=False)
    prefix: str | None = None
    admin_token: str | None = field(default=None, repr=False)


FAULT_PROXY = ("sent through the suite's fault proxy, which loses, cuts and delays exchanges on "
               "purpose; a replay repeats no faults")


class Skip(Exception):
    """This exchange cannot be replayed against the chosen target; ``kind`` says why in one
    word: ``target`` (no such server there), ``bytes`` (the tape lacks the request body),
    ``after`` (an exchange it depends on was not replayed)."""

    def __init__(self, why: str, kind: str = "target") -> None:
        super().__init__(why)
        self.kind = kind


def nowhere() -> ReplayTarget:
    """An address where nothing listens (a port the OS just handed out, closed again): where
    a replay sends a call the recording sent to a server that was not there."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return ReplayTarget(f"http://127.0.0.1:{port}", ())


class UrlTargets:
    """Every exchange of the main recorded server goes to one URL."""

    def __init__(self, url: str, tokens: tuple[str | None, ...], prefix: str | None) -> None:
        self.target = ReplayTarget(url.rstrip("/"), tokens, prefix)
        self.describe = url

    def get(self, name: str, info: dict[str, Any], path: str = "") -> ReplayTarget:
        if path.startswith("/_fake") and not path.startswith(EXPORTS_PATH):
            raise Skip("a call to the fake's admin API; a real service has none")
        if info.get("fault_proxy"):
            raise Skip(FAULT_PROXY)
        if name.rsplit("/", 1)[-1] != "target":
            raise Skip(f"server {name!r} was a variant of the fake; a real service has none")
        return self.target

    def close(self) -> None:
        return None


#: Settings every replay sets itself, whatever was recorded (not worth a note).
_REPLACED = frozenset({"port", "log_level", "validate_answers", "tokens", "admin_token", "record"})


def _defaults() -> dict[str, Any]:
    from fake_gs import FakeSettings

    return {f.name: getattr(FakeSettings(), f.name) for f in fields(FakeSettings)}


class EmbeddedTargets:
    """One embedded fake per recorded server, started on first use."""

    def __init__(self, overrides: dict[str, Any], prefix: str | None = None) -> None:
        import secrets

        self.overrides = {k: v for k, v in overrides.items() if v is not None}
        #: This replay's credentials for its fakes: random, so a tape (or anyone who read the
        #: kit's source) cannot know them.
        self.tokens = tuple(f"gs-parity-{secrets.token_urlsafe(24)}" for _ in range(REPLAY_TOKEN_COUNT))
        self.admin_token = f"gs-parity-admin-{secrets.token_urlsafe(24)}"
        self.prefix = prefix
        self._stack = contextlib.ExitStack()
        self._started: dict[str, ReplayTarget] = {}
        self.notes: list[str] = []
        #: The tape's meta line (its run's profile and dialect), set by the replayer.
        self.recorded_meta: dict[str, Any] = {}
        self.describe = "embedded fake" + "".join(f" {k}={v}" for k, v in sorted(self.overrides.items()))

    def settings_for(self, name: str, info: dict[str, Any]) -> Any:
        from fake_gs import FakeSettings

        if not info:
            raise Skip(f"server {name!r} is not described in the tape (started outside the "
                       "suite's fixtures), so there is nothing to start in its place")
        if info.get("fault_proxy"):
            raise Skip(FAULT_PROXY)
        if not info.get("embedded", False):
            recorded, count = self.in_place_of_service(name)
        else:
            settings = info.get("settings") or {}
            recorded = dict(settings) if isinstance(settings, dict) else {}
            count = recorded.pop("token_count", 0) or 0
        if "mutant" in recorded:  # a tape recorded before the fake's setting was named "variation"
            recorded.setdefault("variation", recorded.pop("mutant"))
        count = min(count, REPLAY_TOKEN_COUNT) if isinstance(count, int) and count > 0 else 0
        known = {f.name for f in fields(FakeSettings)}
        unknown = sorted(set(recorded) - known)
        if unknown:
            self.notes.append(f"{name}: recorded settings this fake does not know: {', '.join(unknown)}")
        defaults = _defaults()
        ignored = sorted(k for k in recorded if k in NOT_FROM_A_TAPE and k not in _REPLACED
                         and recorded[k] != defaults.get(k))
        if ignored:
            self.notes.append(f"{name}: recorded settings not taken from a tape: "
                              + "; ".join(f"{k} ({NOT_FROM_A_TAPE[k]})" for k in ignored))
        values = {k: v for k, v in recorded.items() if k in known and k not in NOT_FROM_A_TAPE}
        values.update(host="127.0.0.1", port=0, log_level="critical", tokens=self.tokens[:count], record=None,
                      admin_token=self.admin_token if count else None)
        mutant = self.overrides.get("mutant")
        values.update({k: v for k, v in self.overrides.items() if k != "mutant"})
        if mutant and not values.get("variation"):
            try:
                return FakeSettings(**(values | {"variation": mutant}))
            except ValueError:
                pass  # the mutant lives in another engine: this server runs without it
        return FakeSettings(**values)

    def in_place_of_service(self, name: str) -> tuple[dict[str, Any], int]:
        """The settings of a fake that stands in for a real service the tape was recorded
        against (docs/parity: a server team's tape holds the fake to it): the run's recorded
        profile and dialect, as many tokens as the run used. Only the main target has one."""
        if name.rsplit("/", 1)[-1] != "target":
            raise Skip(f"server {name!r} was a real service other than the run's target; "
                       "replay it with --url")
        meta = self.recorded_meta
        settings = {k: meta[k] for k in ("profile", "dialect") if isinstance(meta.get(k), str)}
        settings.setdefault("dialect", "kit")
        self.notes.append(f"{name}: recorded against a real service ({meta.get('target', 'a URL')}); "
                          "replayed against an embedded fake, "
                          + ", ".join(f"{k} {v}" for k, v in sorted(settings.items())))
        return settings, 2 if meta.get("second_token") else 1

    def get(self, name: str, info: dict[str, Any], path: str = "") -> ReplayTarget:
        if name not in self._started:
            from fake_gs import serve_in_background

            try:
                settings = self.settings_for(name, info)
            except (TypeError, ValueError) as exc:
                raise Skip(f"server {name!r}: its recorded settings start no fake ({str(exc)[:200]})") from None
            url = self._stack.enter_context(serve_in_background(settings))
            self._started[name] = ReplayTarget(str(url), tuple(settings.tokens), self.prefix,
                                               settings.admin_token)
        return self._started[name]

    def close(self) -> None:
        self._stack.close()
        self._started.clear()
