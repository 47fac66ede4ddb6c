"""Recorded loops: runs of exchanges a replay may settle sooner (or later) than the
recording did, because the new target reaches the loop's final answer at another turn."""

from __future__ import annotations

import json
from typing import Any

from contract.auth import AUTHORIZATION_HEADER


def poll_runs(exchanges: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """For each exchange inside a loop, the loop's last exchange: a faster (or slower)
    target may reach the loop's final answer at another iteration.

    A loop is a run of consecutive exchanges on one server, path and credential that either repeat the
    very same request (polling), or were all refused alike until the last one (a client
    retrying a refused call with a fresh body)."""
    out: dict[int, dict[str, Any]] = {}
    run: list[dict[str, Any]] = []

    def place(x: dict[str, Any]) -> Any:
        # The credential too: one call under another token is another call, not a retry
        # (a service token's 403 then the admin token's 200 is no loop to settle early).
        r = x["request"]
        auth = (r.get("headers") or {}).get(AUTHORIZATION_HEADER.lower())
        return (x.get("server"), r["method"], r["path"], json.dumps(r.get("query")), auth)

    def same(x: dict[str, Any]) -> str:
        return json.dumps(x["request"].get("body"), sort_keys=True)

    def is_loop(xs: list[dict[str, Any]]) -> bool:
        if len(xs) < 2:
            return False
        if len({same(x) for x in xs}) == 1:
            return True
        refused = {x["response"]["status"] for x in xs[:-1]}
        return len(refused) == 1 and min(refused) >= 400

    for x in [*exchanges, None]:
        if run and (x is None or place(x) != place(run[-1])):
            if is_loop(run):
                out.update({y["seq"]: run[-1] for y in run[:-1]})
            elif len(run) > 2 and is_loop(run[1:]):  # a first call, then retries of it
                out.update({y["seq"]: run[-1] for y in run[1:-1]})
            run = []
        if x is not None:
            run.append(x)
    return out
