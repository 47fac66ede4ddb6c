"""The embedded fake's admin API (``/_fake/...``): state dumps, forced job states, faults.

Only ever called when the target is the embedded fake; properties that need it skip
against a real server with the reason saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import requests

from client.calls.bounded_read import mount_bounds
from conformance.target import Target


class FakeAdmin:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.session = mount_bounds(requests.Session())
        self.session.headers.update(target.admin_headers())

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        resp = self.session.request(method, self.target.admin_url(path), json=body, timeout=30)
        resp.raise_for_status()
        return resp.json() if resp.content else {}

    def state(self) -> dict[str, Any]:
        return dict(self._call("GET", "state"))

    def job_state(self, job_id: str) -> dict[str, Any]:
        return dict(self.state()["jobs"].get(job_id, {}))

    def force(self, job_id: str, status: str, reason: str = "") -> Any:
        return self._call("POST", f"jobs/{job_id}/state", {"status": status, "reason": reason})

    def hold(self, job_id: str, on: bool = True) -> Any:
        """Block (or release) the job's executor: requests submitted meanwhile stay queued."""
        return self._call("POST", f"jobs/{job_id}/hold", {"hold": on})

    def group(self, group_id: str) -> dict[str, Any] | None:
        for group in self.state().get("chunk_groups", []):
            if group.get("chunk_group_id") == group_id:
                return dict(group)
        return None

    def executions(self, group_id: str) -> int:
        group = self.group(group_id)
        return int(group.get("executions", 0)) if group else 0

    def fb_executions(self, job_id: str) -> int:
        return int(self.job_state(job_id).get("forward_backward_executions", 0))

    def set_faults(self, rules: list[dict[str, Any]]) -> Any:
        return self._call("PUT", "faults", {"rules": rules})

    def clear_faults(self) -> Any:
        return self._call("PUT", "faults", {"rules": []})

    def http_requests(self) -> Any:
        return self.state().get("http_requests")


def faults_fake(make_variant: Callable[..., Target], name: str, seed: int) -> Iterator[tuple[Target, FakeAdmin]]:
    """For a fixture: a fake without mutant reserved for fault rules (``gs_variant`` makes
    it), and its admin; the rules are cleared when the test is done."""
    target = make_variant(name, seed=seed, mutant=None)
    admin = FakeAdmin(target)
    yield target, admin
    admin.clear_faults()
