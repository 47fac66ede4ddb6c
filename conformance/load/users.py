"""The Locust users of gs-load: training and sampling loops as a recipe runs them, through
the kit's own client (``ArcticRLClient``; the sampler's streams through its REST client).

One Locust task is one iteration of a loop. A call that raises (a typed client error:
refused, ambiguous, timed out) ends the iteration and is counted as a loop error; the
HTTP exchanges behind it were already reported and judged by the meter. The job each user
works on is one of the run's (round-robin over every process's users).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from locust import User, between, task
from locust.exception import StopUser

from client.errors import CortexError
from conformance.load import batches
from conformance.load.run import RUN
from contract import wire

# torch and the codec's tensor half (imported lazily) are loaded with the locustfile, in one
# greenlet: imported by several users' first calls at once they can deadlock on the import
# lock (the greenlets share one thread), and the import would stall every user anyway.
wire.loads(wire.dumps({"warm": torch.zeros(1)}))


class _EndIteration(Exception):
    """A call of this iteration raised; the next iteration starts afresh."""


class KitUser(User):
    """A loop on one of the run's jobs (abstract: the concrete loops below)."""

    abstract = True
    wait_time = between(0.1, 0.5)
    #: The profile table this loop reads (rl, sft, sampler).
    kind: ClassVar[str] = ""
    #: ClientConfig fields this loop sets on top of the profile's [client].
    client_fields: ClassVar[dict[str, Any]] = {}

    def on_start(self) -> None:
        if not RUN.wait_ready():
            raise StopUser()
        self.sizes: Any = RUN.profile.kind(self.kind)
        self.job_id, slot = RUN.next_job()
        self.rng = random.Random(slot)
        self.rl = RUN.client(self.job_id, self.fields())
        self.iteration = 0

    def fields(self) -> dict[str, Any]:
        return dict(self.client_fields)

    def on_stop(self) -> None:
        rl = getattr(self, "rl", None)
        if rl is not None:
            rl.shutdown()  # a reattached client: its job is the run's to cancel

    def call(self, op: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CortexError as exc:
            RUN.loop_error(self.kind, op, exc)
            raise _EndIteration from exc

    @task
    def iterate(self) -> None:
        self.iteration += 1
        try:
            self.loop()
        except _EndIteration:
            pass

    def loop(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def every(self, period: int) -> bool:
        return bool(period) and self.iteration % period == 0


class RLLoop(KitUser):
    """generate, old log-probs, forward-backward, step, weight sync, periodic save."""

    kind = "rl"

    def loop(self) -> None:
        size, rl = self.sizes, self.rl
        prompts = batches.prompts(self.rng, size.prompts, size.prompt_tokens)
        out = self.call("generate", rl.generate, prompts, {"max_tokens": size.max_tokens})
        completions = [list(r.get("token_ids") or []) for r in out or []]
        completions += [[]] * (len(prompts) - len(completions))
        batch = batches.rl_batch(prompts, completions[: len(prompts)],
                                 size.prompt_tokens + size.max_tokens)
        if size.logprobs == "fwd-no-grad":
            self.call("fwd-no-grad", rl.fwd_no_grad, batch)
        elif size.logprobs == "log-probs":
            self.call("log-probs", rl.log_probs, prompts, completions=completions)
        self.call("fwd-bwd", rl.fwd_bwd, batch)
        self.call("step", rl.step)
        if self.every(size.sync_every):
            self.call("sync-weights", rl.sync_weights)
        if self.every(size.save_every):
            self.call("save-checkpoint", rl.save_checkpoint)


class SFTLoop(KitUser):
    """forward-backward and step on token batches, periodic save."""

    kind = "sft"

    def loop(self) -> None:
        size, rl = self.sizes, self.rl
        self.call("fwd-bwd", rl.fwd_bwd, batches.sft_batch(self.rng, size.batch, size.seq_len))
        self.call("step", rl.step)
        if self.every(size.save_every):
            self.call("save-checkpoint", rl.save_checkpoint)


class Sampler(KitUser):
    """Poll-heavy sampling: generate-stream drained a few events a poll, or generate."""

    kind = "sampler"

    def fields(self) -> dict[str, Any]:
        return {"max_events": RUN.profile.sampler.max_events}

    def loop(self) -> None:
        size, rl = self.sizes, self.rl
        prompts = batches.prompts(self.rng, size.prompts, 8)
        params = {"max_tokens": size.max_tokens}
        if self.rng.random() >= size.stream_share:
            self.call("generate", rl.generate, prompts, params)
            return
        rest = rl.transport.rest
        answer = self.call("generate-stream", rest.generate_stream, self.job_id,
                           {"prompts": prompts, "sampling_params": params})
        self.call("stream", lambda: list(rest.stream(self.job_id, str(answer["request_id"]))))


#: The loops, by profile table.
USERS: dict[str, type[KitUser]] = {cls.kind: cls for cls in (RLLoop, SFTLoop, Sampler)}
RUN.user_classes.update(USERS)
