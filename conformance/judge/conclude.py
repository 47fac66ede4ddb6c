"""At-most-once, judged once the run's users have stopped, on the sum of every process's counts.

Per fake op the clients counted the calls they attempted (distinct Idempotency-Keys, an
upload's last chunk) and the calls the server accepted (distinct request ids). A call
killed in flight at the end, or one that raised AmbiguousOutcome, may or may not have run,
so the judgement is a bound: every accepted call ran, and nothing ran more often than
calls were attempted.

- Against the fake, its admin counters (``/_fake/state``, read before the first call and
  after the last request drained) say how often each op was submitted and executed, and
  each job's ``global_steps`` how many steps counted: REQ-ONCE-1, STEP-COUNT-1.
- Against any server, the steps' answers are the evidence: on one job no two steps may
  answer the same ``global_steps``, and the steps seen span no more values than steps
  were attempted there (STEP-COUNT-1).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from conformance.judge.tally import Tally

ONCE, STEPS = "REQ-ONCE-1", "STEP-COUNT-1"


def _requests(state: Mapping[str, Any], name: str) -> Counter[str]:
    return Counter(state.get("requests", {}).get(name) or {})


def fake_counters(tally: Tally, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """Executions per submitted call, from the fake's counters (REQ-ONCE-1)."""
    submitted = _requests(after, "by_op") - _requests(before, "by_op")
    executed = _requests(after, "executed_by_op") - _requests(before, "executed_by_op")
    for op in sorted(set(tally.calls) | set(submitted)):
        tally.saw(ONCE)
        calls = tally.calls.get(op, Counter())
        attempted, accepted = calls["attempted"], calls["accepted"]
        ran, queued = executed[op], submitted[op]
        if ran > queued:
            tally.violation(ONCE, f"{op}: {queued} submissions executed {ran} times", ran - queued)
        if queued > attempted:
            tally.violation(ONCE, f"{op}: {attempted} calls attempted became {queued} "
                                  "submissions", queued - attempted)
        if ran < accepted:
            tally.violation(ONCE, f"{op}: {accepted} calls accepted (a request id answered), "
                                  f"{ran} executed", accepted - ran)


def fake_steps(tally: Tally, before: Mapping[str, Any], after: Mapping[str, Any],
               jobs: list[str]) -> None:
    """Each job's global_steps against the steps its clients attempted and had accepted."""
    for job in jobs:
        start = int((before.get("jobs", {}).get(job) or {}).get("global_steps", 0))
        now = (after.get("jobs", {}).get(job) or {}).get("global_steps")
        if not isinstance(now, int):
            continue
        counted, calls = now - start, tally.step_calls.get(job, Counter())
        tally.saw(STEPS)
        if counted > calls["attempted"]:
            tally.violation(STEPS, f"job {job}: {calls['attempted']} steps attempted moved "
                                   f"global_steps by {counted}", counted - calls["attempted"])
        elif counted < calls["accepted"]:
            tally.violation(STEPS, f"job {job}: {calls['accepted']} steps accepted moved "
                                   f"global_steps by {counted}", calls["accepted"] - counted)


def answered_steps(tally: Tally, *, span_too: bool = True) -> None:
    """The steps' answers (any server): no value answered twice and (``span_too``, when no
    exact count is at hand) no span of values wider than the steps attempted."""
    for job, seen in sorted(tally.steps.items()):
        values = sorted(int(v) for v in seen)
        tally.saw(STEPS)
        repeated = sum(count - 1 for count in seen.values())
        if repeated:
            twice = [v for v in values if seen[str(v)] > 1][:5]
            tally.violation(STEPS, f"job {job}: global_steps {twice} answered to more than one "
                                   "step", repeated)
        span = values[-1] - values[0] + 1 if values and span_too else 0
        attempted = tally.step_calls.get(job, Counter())["attempted"]
        if span > attempted:
            tally.violation(STEPS, f"job {job}: {attempted} steps attempted, yet their answers "
                                   f"span global_steps {values[0]}..{values[-1]}",
                            span - attempted)


def conclude(tally: Tally, jobs: list[str], before: Mapping[str, Any] | None,
             after: Mapping[str, Any] | None) -> None:
    """The end-of-run judgements into ``tally``; the fake's counters when both dumps exist
    (STEP-COUNT-1 is then judged on its exact global_steps, else on the answers)."""
    exact = before is not None and after is not None
    if before is not None and after is not None:
        fake_counters(tally, before, after)
        fake_steps(tally, before, after, jobs)
    answered_steps(tally, span_too=not exact)
