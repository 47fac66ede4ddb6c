"""At most once, measured: the kit's client through a :class:`FaultProxy` against the fake.

For each route the client makes ``calls`` calls (submit and wait) through the proxy; after
each one, once the proxy is idle, the fake's own submission counter for that route
(``/_fake/state`` ``requests.by_op``) says how often the call ran. Per call the outcome
must fit the contract: a success ran exactly once; a call that ran without a success
raised :class:`AmbiguousOutcome` (or ran out of budget after one); nothing ran twice.
The tally per route is what the docs' "Retries and at-most-once" table reports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

from client.calls.session import BeforeSend, Seams
from client.config import ClientConfig
from client.errors import AmbiguousOutcome, CortexError
from client.rest import CortexRestClient
from conformance.drivers.faultproxy import FaultProxy
from conformance.inputs import valid_bodies
from contract.idempotency import CLIENT_MUTANT_KEY_DROPPED, IDEMPOTENCY_KEY_HEADER

#: Client timing for loopback runs: short read time-out, tiny back-off and poll waits.
FAST_CLIENT: dict[str, Any] = {
    "read_timeout_s": 0.5,
    "connect_timeout_s": 2.0,
    "backoff_first_s": 0.002,
    "backoff_cap_s": 0.01,
    "poll_first_s": 0.002,
    "poll_cap_s": 0.02,
    "call_timeout_s": 60.0,
}

Call = Callable[[CortexRestClient, str], Any]


def _drop_key_on_resend(attempt: int, headers: dict[str, str]) -> None:
    if attempt:
        headers.pop(IDEMPOTENCY_KEY_HEADER, None)


#: The kit's client mutants (``client=True`` in ``fake_gs.controls.mutants``): each a hook the
#: client is given as its ``before_send`` seam, so the shipped client carries none of them.
CLIENT_MUTANTS: dict[str, BeforeSend] = {CLIENT_MUTANT_KEY_DROPPED: _drop_key_on_resend}


def client_mutant_seams(mutant: str | None) -> Seams:
    """The seams that apply client mutant ``mutant`` (none for None)."""
    return Seams(before_send=CLIENT_MUTANTS[mutant]) if mutant else Seams()


def _step(rest: CortexRestClient, job: str) -> Any:
    return rest.result(job, rest.step(job), route_name="step")


def _save(rest: CortexRestClient, job: str) -> Any:
    return rest.result(job, rest.save(job), route_name="save")


def _weight_sync(rest: CortexRestClient, job: str) -> Any:
    # The training sub-job is the sender; naming it is required where several receivers
    # exist (spec §7.4, OP-HINT-1).
    answer = rest.operation(job, "weight-sync", {}, sub_job_type="training")
    return rest.operation_result(job, "weight-sync", answer)


def _generate(rest: CortexRestClient, job: str) -> Any:
    body = {"prompts": [[1, 2, 3]], "sampling_params": {"max_tokens": 2}}
    return rest.result(job, rest.generate(job, body), route_name="generate")


def _log_probs(rest: CortexRestClient, job: str) -> Any:
    return rest.result(job, rest.log_probs(job, [[1, 2, 3]], [[4, 5]]), route_name="log_probs")


def _forward_no_grad(rest: CortexRestClient, job: str) -> Any:
    from conformance.inputs.strategies import tensor

    body = {"args": [], "kwargs": {"input_ids": tensor((1, 6), "int64", 1)}}
    return rest.result(job, rest.forward_no_grad(job, body), route_name="forward_no_grad")


#: Route label -> (the client call, the fake's op name in ``requests.by_op``).
CALLS: dict[str, tuple[Call, str]] = {
    "step": (_step, "step"),
    "save": (_save, "save"),
    "weight-sync": (_weight_sync, "op:weight-sync"),
    "generate": (_generate, "generate"),
    "log_probs": (_log_probs, "log_probs"),
    "forward_no_grad": (_forward_no_grad, "forward_no_grad"),
}
CURRENT_ROUTES = ("step", "save", "weight-sync", "generate")
PROPOSED_ROUTES = (*CURRENT_ROUTES, "log_probs", "forward_no_grad")


#: The figures a route's tally counts, in report order: the calls and how each ended
#: (a result, AmbiguousOutcome, a poll error: accepted but its result not fetched, another
#: error); the fake's executions and the runs past a call's first (duplicates); calls that
#: ran without a success and without AmbiguousOutcome (unflagged) and calls the fake never
#: ran although the caller holds a result or a request id (phantom): these two must stay 0.
FIGURES = ("calls", "succeeded", "ambiguous", "other_errors", "executions", "duplicates",
           "poll_errors", "unflagged", "phantom")


def outcome_figure(outcome: BaseException | None) -> str:
    """The figure a call's outcome counts in: succeeded, ambiguous, poll_errors or other_errors."""
    if outcome is None:
        return "succeeded"
    if isinstance(outcome, AmbiguousOutcome):
        return "ambiguous"
    if isinstance(outcome, CortexError) and outcome.route == "get_request":
        return "poll_errors"  # the submit was answered: the caller holds a request id
    return "other_errors"


@dataclass
class Tally:
    """One route's :data:`FIGURES` (read as attributes): what the client reported and what
    the fake executed; ``errors``: the first few other errors, for the report."""

    counts: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    def __getattr__(self, name: str) -> int:
        if name in FIGURES:
            return self.counts[name]
        raise AttributeError(name)

    def record(self, ran: int, outcome: BaseException | None) -> None:
        """Book one call that the fake ran ``ran`` times and that ended in ``outcome``."""
        end = outcome_figure(outcome)
        held = end in ("succeeded", "poll_errors")  # the caller holds a result or a request id
        self.counts.update({"calls": 1, end: 1, "executions": ran, "duplicates": max(0, ran - 1),
                            "phantom": int(held and ran == 0),
                            "unflagged": int(end == "other_errors" and ran > 0)})
        if end == "other_errors" and len(self.errors) < 5:
            self.errors.append(repr(outcome)[:300])

    def public(self) -> dict[str, Any]:
        return {**{name: self.counts[name] for name in FIGURES}, "errors": list(self.errors)}


def _executions(fake_url: str, op: str, headers: dict[str, str]) -> int:
    state = requests.get(f"{fake_url}/_fake/state", headers=headers, timeout=30).json()
    return int(state["requests"]["by_op"].get(op, 0))


def open_job(fake_url: str, model: str = valid_bodies.TRAINING_MODEL, **config: Any) -> str:
    """A running training + sampling job, created straight on the fake (no proxy)."""
    rest = CortexRestClient(ClientConfig(base_url=fake_url, **{**FAST_CLIENT, **config}))
    try:
        body = valid_bodies.job(valid_bodies.training(model), valid_bodies.sampling(model))
        job = str(rest.create_job(body)["job_id"])
        rest.wait_running(job)
    finally:
        rest.close()
    return job


def measure(fake_url: str, job: str, proxy: FaultProxy, routes: tuple[str, ...], calls: int,
            *, admin_headers: dict[str, str] | None = None, session: requests.Session | None = None,
            mutant: str | None = None, **config: Any) -> dict[str, Tally]:
    """``calls`` calls of each route through ``proxy``, judged against the fake's counters.

    ``mutant`` names a client mutant to apply (the conformance self-test's teeth)."""
    headers = admin_headers or {}
    seams = client_mutant_seams(mutant)
    seams["session"] = session
    rest = CortexRestClient(ClientConfig(base_url=proxy.url, **{**FAST_CLIENT, **config}), **seams)
    out: dict[str, Tally] = {}
    try:
        for name in routes:
            call, op = CALLS[name]
            tally = out[name] = Tally()
            for _ in range(calls):
                before = _executions(fake_url, op, headers)
                outcome: BaseException | None = None
                try:
                    call(rest, job)
                except CortexError as exc:
                    outcome = exc
                if not proxy.wait_idle(60):
                    raise RuntimeError("the fault proxy did not settle within 60 s")
                tally.record(_executions(fake_url, op, headers) - before, outcome)
    finally:
        rest.close()
    return out

