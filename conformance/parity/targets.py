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
#: Tokens an embedded replay fake is configured with (the tape only says how many).
REPLAY_TOKENS = ("gs-parity-token-1", "gs-parity-token-2", "gs-parity-token-3")
#: What a replay sends where the recording held a credential it did not know.
UNKNOWN_TOKEN = "gs-parity-unknown-token"
#: The admin credential of an embedded replay fake with tokens (the admin API takes no
#: service token), sent where the recording called the admin API.
REPLAY_ADMIN_TOKEN = "gs-parity-admin-token"


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


class EmbeddedTargets:
    """One embedded fake per recorded server, started on first use."""

    def __init__(self, overrides: dict[str, Any], prefix: str | None = None) -> None:
        self.overrides = {k: v for k, v in overrides.items() if v is not None}
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
            recorded = dict(info.get("settings") or {})
            count = int(recorded.pop("token_count", 0) or 0)
        known = {f.name for f in fields(FakeSettings)}
        unknown = sorted(set(recorded) - known)
        if unknown:
            self.notes.append(f"{name}: recorded settings this fake does not know: {', '.join(unknown)}")
        # The answer check belongs to where the replay runs (on in tests), not to the
        # recorded server, so it takes this environment's default.
        values = {k: v for k, v in recorded.items() if k in known and k != "validate_answers"}
        values.update(port=0, log_level="critical", tokens=REPLAY_TOKENS[:count], record=None,
                      admin_token=REPLAY_ADMIN_TOKEN if count else None)
        mutant = self.overrides.get("mutant")
        values.update({k: v for k, v in self.overrides.items() if k != "mutant"})
        if mutant and not values.get("mutant"):
            try:
                return FakeSettings(**(values | {"mutant": mutant}))
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

            settings = self.settings_for(name, info)
            url = self._stack.enter_context(serve_in_background(settings))
            self._started[name] = ReplayTarget(str(url), tuple(settings.tokens), self.prefix,
                                               settings.admin_token)
        return self._started[name]

    def close(self) -> None:
        self._stack.close()
        self._started.clear()
