"""A state machine over one job: forward-backward, step, save, load, delete, generate,
weight-sync, polls and cancel-requests in any order, with the job's invariants checked
after every move.

Invariants: global steps go up by one per step except across a load, which restores the
checkpoint's; every saved checkpoint is listed until deleted; a terminal request never
changes; forward-backward runs at most once per chunk group (the fake's counters; skipped
against a real server, which exposes none).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    consumes,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from conformance.drivers.raw import RawDriver, encode
from conformance.fake_admin import admin_of
from conformance.fixtures import NewJob
from conformance.inputs.strategies import generate_requests, tensor
from conformance.jobs import SharedJob
from conformance.judging import frames
from conformance.options import GsOptions
from conformance.reporting.violations import expect, present
from conformance.runtime import RUNTIME, prop
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.shapes import check_generate_result, check_loss
from contract.states import RequestState, normalize_request_state

if TYPE_CHECKING:
    # The name JobMachine's annotation uses: hypothesis seeds the derandomised run from the
    # class's source, so an edit there draws another sequence of moves.
    from fake_gs.testing.admin_api import AdminApi as FakeAdmin

CLAUSES = (
    "STEP-COUNT-1",
    "SAVE-LOAD-1",
    "CKPT-LIST-2",
    "CKPT-DELETE-1",
    "POLL-TERMINAL-1",
    "CG-IDEM-1",
    "OP-CANCEL-1",
)


class JobMachine(RuleBasedStateMachine):
    """One job's life, driven raw; ``driver``/``job_id``/``admin`` are set by the test."""

    driver: RawDriver
    job_id: str
    admin: FakeAdmin | None = None

    groups = Bundle("groups")
    checkpoints = Bundle("checkpoints")
    requests = Bundle("requests")

    def __init__(self) -> None:
        super().__init__()
        self.steps: int | None = None
        self.saved: dict[str, int] = {}
        self.terminal: dict[str, tuple[str, Any]] = {}
        self.losses: dict[str, Any] = {}
        #: The request each forward-backward group resolved to (a replay names it again).
        self.fb_requests: dict[str, str] = {}

    def teardown(self) -> None:
        """The machine's checkpoints go when it ends: the account's cap is the whole run's."""
        for cid in list(self.saved):
            self.driver.call("delete_checkpoint", job_id=self.job_id, checkpoint_id=cid)

    # --- helpers ----------------------------------------------------------------------------
    def _listed(self) -> dict[str, dict]:
        ans = self.driver.call("list_checkpoints", job_id=self.job_id)
        return {str(c.get("checkpoint_id")): c for c in ans.field("checkpoints", []) or []}

    def _settle(self, rid: str) -> Any:
        settled = self.driver.settle(self.job_id, rid)
        body = settled.final_body
        status = normalize_request_state(body.get("status"))
        self.terminal[rid] = (status, body.get("result"))
        return settled

    # --- rules --------------------------------------------------------------------------------
    @rule(target=groups, n=st.integers(1, 3), seq=st.integers(1, 30))
    def forward_backward(self, n: int, seq: int) -> tuple[str, list[bytes]]:
        gid = str(uuid.uuid4())
        frame = encode({"args": [], "kwargs": {"input_ids": tensor((2, seq), "int64", seq)}})
        chunks = frames.split(frame, n, gid)
        answers = self.driver.send_chunks("forward_backward", self.job_id, chunks)
        expect("CG-IDEM-1", answers[-1].ok, f"forward-backward refused: {answers[-1]}")
        settled = self._settle(answers[-1].field("request_id"))
        loss = settled.decoded().get("avg_loss")
        expect("CG-IDEM-1", not check_loss(loss), f"loss {loss!r}")
        self.losses[gid] = loss
        self.fb_requests[gid] = settled.request_id
        return gid, chunks

    @rule(group=groups)
    def replay_final_chunk(self, group: tuple[str, list[bytes]]) -> None:
        gid, chunks = group
        ans = self.driver.call("forward_backward", data=chunks[-1], job_id=self.job_id)
        expect("CG-IDEM-1", ans.ok, f"replayed final chunk refused: {ans}")
        settled = self._settle(ans.field("request_id"))
        if settled.request_id == self.fb_requests[gid] and settled.last.status == 410:
            return  # the original request, whose result was read and freed (POLL-EXPIRE-1)
        loss = settled.decoded().get("avg_loss")
        expect(
            "CG-IDEM-1",
            loss == self.losses[gid],
            f"replay resolved to {loss}, first run {self.losses[gid]}",
        )

    @rule(target=requests, lr=st.one_of(st.none(), st.floats(1e-6, 1e-2)))
    def step(self, lr: float | None) -> str:
        ans, settled = self.driver.run_json(
            "step", self.job_id, {} if lr is None else {"learning_rate": lr}
        )
        settled = present("STEP-COUNT-1", settled, f"step: {ans}")
        expect("STEP-COUNT-1", settled.status == RequestState.DONE, f"step: {ans}")
        got = int(settled.decoded()["global_steps"])
        if self.steps is not None:
            expect(
                "STEP-COUNT-1" if not getattr(self, "_after_load", False) else "SAVE-LOAD-1",
                got == self.steps + 1,
                f"global_steps {got} after {self.steps}",
            )
        self.steps = got
        self._after_load = False
        self.terminal[settled.request_id] = (settled.status, settled.final_body.get("result"))
        return settled.request_id

    @rule(target=checkpoints, kind=st.sampled_from([None, "resumable", "weights-only"]))
    def save(self, kind: str | None) -> str | MultipleResults[str]:
        body: dict[str, Any] = {"checkpoint_id": f"sm-{uuid.uuid4().hex[:8]}"}
        if kind:
            body["checkpoint_type"] = kind
        ans, settled = self.driver.run_json("save", self.job_id, body)
        if settled is None and ans.code == ErrorCode.LIMIT_EXCEEDED:
            return multiple()  # the account's checkpoints are at its cap: none saved to track
        settled = present("CKPT-LIST-2", settled, f"save: {ans}")
        expect("CKPT-LIST-2", settled.status == RequestState.DONE, f"save: {ans}")
        cid = str(settled.decoded()["checkpoint_id"])
        entry = self._listed().get(cid)
        entry = present("CKPT-LIST-2", entry, f"saved {cid} is not listed")
        self.saved[cid] = int(entry["global_steps"])
        if self.steps is not None:
            expect(
                "SAVE-LOAD-1",
                self.saved[cid] == self.steps,
                f"checkpoint {cid} records {self.saved[cid]} steps, the job had {self.steps}",
            )
        return cid

    @rule(cid=checkpoints)
    def load(self, cid: str) -> None:
        if cid not in self.saved:
            return
        ans, settled = self.driver.run_json("load", self.job_id, {"checkpoint_id": cid})
        expect(
            "SAVE-LOAD-1", settled is not None and settled.status == RequestState.DONE, f"load {cid}: {ans}"
        )
        self.steps = self.saved[cid]
        self._after_load = True

    @rule(cid=consumes(checkpoints))
    def delete(self, cid: str) -> None:
        if cid not in self.saved:
            return
        ans = self.driver.call("delete_checkpoint", job_id=self.job_id, checkpoint_id=cid)
        expect("CKPT-DELETE-1", ans.ok, f"delete {cid}: {ans}")
        del self.saved[cid]
        expect("CKPT-DELETE-1", cid not in self._listed(), f"deleted {cid} still listed")

    @rule(target=requests, req=generate_requests(max_prompts=2))
    def generate(self, req: dict) -> str:
        answers, settled = self.driver.run_frame("generate", self.job_id, req, force_chunk=False)
        settled = present("POLL-TERMINAL-1", settled, f"generate: {answers[-1]}")
        expect("POLL-TERMINAL-1", settled.status == RequestState.DONE, f"generate: {answers[-1]}")
        self.terminal[settled.request_id] = (settled.status, settled.final_body.get("result"))
        problems = check_generate_result(req, settled.decoded())
        expect("POLL-TERMINAL-1", not problems, "; ".join(problems))
        return settled.request_id

    @rule(target=requests)
    def weight_sync(self) -> str:
        ans = self.driver.operation(self.job_id, {"operation_type": "weight-sync", "payload": {}, "sub_job_type": "training"})
        expect("POLL-TERMINAL-1", ans.ok, f"weight-sync: {ans}")
        return self._settle(ans.field("request_id")).request_id

    @rule(rid=requests)
    def poll_again(self, rid: str) -> None:
        ans = self.driver.poll(self.job_id, rid)
        # result_expired, or its status alone where the body takes spec §3.6's {message, code}
        if ans.status == 410 and ans.any_code in (ErrorCode.RESULT_EXPIRED, "410"):
            return  # read to the end and freed since: allowed (POLL-EXPIRE-1 judges the form)
        body = ans.body or {}
        status, result = self.terminal[rid]
        expect(
            "POLL-TERMINAL-1",
            normalize_request_state(body.get("status")) == status and body.get("result") == result,
            f"terminal request {rid} changed to {body.get('status')}",
        )

    @rule(rid=requests)
    def cancel_finished_request(self, rid: str) -> None:
        ans = self.driver.operation(
            self.job_id, {"operation_type": "cancel-request", "payload": {"request_id": rid}}
        )
        expect("OP-CANCEL-1", ans.ok, f"cancel-request: {ans}")
        self.poll_again(rid)

    # --- invariants ---------------------------------------------------------------------------
    @invariant()
    def saved_are_listed(self) -> None:
        if self.saved:
            missing = set(self.saved) - set(self._listed())
            expect("CKPT-LIST-2", not missing, f"saved checkpoints not listed: {sorted(missing)}")

    @invariant()
    def at_most_once(self) -> None:
        if self.admin is None or not self.losses:
            return
        for group in self.admin.state().get("chunk_groups", []):
            if group.get("chunk_group_id") in self.losses:
                expect(
                    "CG-IDEM-1",
                    group.get("executions", 0) <= 1,
                    f"group {group['chunk_group_id']} executed {group['executions']} times",
                )


@checks(*CLAUSES)
def test_job_state_machine(
    gs_target: Target, gs_raw: RawDriver, gs_job: SharedJob, gs_new_job: NewJob, gs_opts: GsOptions
) -> None:
    """Random sequences of every data-plane move keep the job's invariants."""
    JobMachine.driver = gs_raw
    JobMachine.admin = admin_of(gs_target) if gs_target.embedded else None
    if gs_target.embedded:
        from conformance.inputs import valid_bodies

        JobMachine.job_id = gs_new_job(valid_bodies.shared_job(gs_opts.model))[0]
    else:
        JobMachine.job_id = gs_job.job_id
    steps = 12 if RUNTIME.embedded else 6
    run_state_machine_as_test(
        JobMachine, settings=prop(scale=0.25, minimum=2, stateful_step_count=steps)
    )
