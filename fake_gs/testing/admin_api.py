"""The fake's admin HTTP API (``/_fake/...``) as one Python object, for every caller.

The gate fixture's handle, the conformance suite's properties, the e2e harness and the
fake's own tests all read state dumps, force job states, hold executors and install fault
rules through this one class, over HTTP (never the fake's Python objects), so it works the
same whether the fake runs in this process or elsewhere. It lives beside the fake because
the fake defines the API; ``conformance`` and the tests may import it, and it imports
nothing but ``requests`` (a caller that wants bounded answers hands in its own session).
"""

from __future__ import annotations

from typing import Any

import requests

from contract.auth import AUTHORIZATION_HEADER

#: How long one admin call may take (a state dump of a busy fake is the slowest).
ADMIN_TIMEOUT_S = 30.0


class AdminError(RuntimeError):
    """The fake's admin API refused a call (a bug of the caller or a misconfigured fake)."""


class AdminApi:
    """``/_fake/*`` of the fake at ``base_url``, with the admin credential ``token`` (None
    for a fake without tokens, whose admin API is open)."""

    def __init__(self, base_url: str, token: str | None = None, *,
                 session: requests.Session | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = session or requests.Session()
        if token:
            self.http.headers[AUTHORIZATION_HEADER] = f"Bearer {token}"

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One admin call (``path`` under ``/_fake/``); its JSON answer, None when empty."""
        kwargs.setdefault("timeout", ADMIN_TIMEOUT_S)
        url = f"{self.base_url}/_fake/{path.lstrip('/')}"
        answer = self.http.request(method, url, **kwargs)
        if answer.status_code >= 400:
            raise AdminError(f"{method} {url} answered {answer.status_code}: {answer.text[:300]}")
        return answer.json() if answer.content else None

    def close(self) -> None:
        self.http.close()

    # --- what the fake holds --------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """``GET /_fake/state``: every job, chunk group and counter of the fake."""
        return dict(self.call("GET", "state"))

    def job_state(self, job_id: str) -> dict[str, Any]:
        """One job of the state dump (empty when the fake holds no such job)."""
        return dict(self.state()["jobs"].get(job_id, {}))

    def group(self, group_id: str) -> dict[str, Any] | None:
        """One chunk group of the state dump, or None."""
        for group in self.state().get("chunk_groups", []):
            if group.get("chunk_group_id") == group_id:
                return dict(group)
        return None

    def executions(self, group_id: str) -> int:
        """How many times the fake executed a chunk group's frame (0 for an unknown group)."""
        group = self.group(group_id)
        return int(group.get("executions", 0)) if group else 0

    def fb_executions(self, job_id: str) -> int:
        """How many forward-backward passes the fake ran for a job."""
        return int(self.job_state(job_id).get("forward_backward_executions", 0))

    def http_requests(self) -> Any:
        """The fake's per-route request counters."""
        return self.state().get("http_requests")

    def traffic(self, account: str | None = None) -> dict[str, Any]:
        """``GET /_fake/traffic``: the recorded exchanges, of one account when named."""
        params = {"account": account} if account is not None else None
        return dict(self.call("GET", "traffic", params=params))

    # --- what the fake does ---------------------------------------------------------------

    def force(self, job_id: str, status: str, reason: str = "") -> None:
        """Put a job in ``status`` at once (``failed`` with ``reason``, ...)."""
        self.call("POST", f"jobs/{job_id}/state", json={"status": status, "reason": reason})

    def hold(self, job_id: str, on: bool = True) -> None:
        """Block (or release) the job's executor: requests submitted meanwhile stay queued."""
        self.call("POST", f"jobs/{job_id}/hold", json={"hold": on})

    def faults(self) -> list[dict[str, Any]]:
        """The fault rules in force, each with its ``seen`` and ``fired`` counters."""
        return list(self.call("GET", "faults")["rules"])

    def set_faults(self, rules: list[dict[str, Any]]) -> None:
        """Replace the fault rules in force by ``rules``."""
        self.call("PUT", "faults", json={"rules": rules})

    def add_faults(self, rules: list[dict[str, Any]]) -> None:
        """Add ``rules`` after the rules in force."""
        self.call("POST", "faults", json={"rules": rules})

    def clear_faults(self) -> None:
        self.set_faults([])
