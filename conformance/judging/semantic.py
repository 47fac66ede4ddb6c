"""The semantic properties' helpers (profile ``semantic``): the few ops they call over the
raw or the client driver, the batches they train on (SFT rows, verl-layout rollouts) and
the tolerances for a fp32 fake or a bf16 server. The properties are in
``conformance/properties/whole/test_semantic.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from client.shaping import logprobs_of
from conformance.reporting.violations import expect

#: k3 estimate of KL(sampler || trainer) allowed after a weight-sync (SEM-KL-1).
KL_MAX = 0.05
ROUNDS = 3
PROMPTS: tuple[tuple[int, ...], ...] = (
    tuple(b"Q: 2+2=? A:"),
    tuple(b"Name a colour:"),
    tuple(b"abcabcabc"),
    tuple(b"The cat sat on"),
)
#: Responses scored by the policy-gradient properties, aligned with ``PROMPTS``.
RESPONSES: tuple[tuple[int, ...], ...] = (
    tuple(b" 4"),
    tuple(b" red and blue"),
    tuple(b"abc"),
    tuple(b" the mat"),
)
PATTERN = tuple(b"ab" * 12)
#: Before SEM-KL-1's weight-sync the trainer learns to answer every prompt with "aaa...",
#: for this many steps: far enough from an unsynced sampler for the KL to show it.
KL_WARMUP = 8


@dataclass(frozen=True)
class Knobs:
    """Learning rate and tolerances for the kind of target (fp32 fake vs a bf16 server)."""

    lr: float
    same: float  # two computations of one quantity on the same weights
    ppo_kl: float
    changed: float  # the least change that counts as "moved"


FAKE = Knobs(lr=3e-3, same=1e-5, ppo_kl=1e-6, changed=1e-4)
REAL = Knobs(lr=1e-5, same=2e-2, ppo_kl=1e-3, changed=5e-2)


class Sem:
    """The few ops the semantic properties need, over the raw or the client driver."""

    def __init__(self, ops: Any, via: str, knobs: Knobs) -> None:
        self.ops = ops
        self.via = via
        self.k = knobs

    def _body(self, batch: dict[str, Any], meta: dict[str, Any], processing: Any) -> dict:
        if self.via == "raw":  # the RPC body a real client sends
            body: dict[str, Any] = {"args": [], "kwargs": batch, "meta": meta}
        else:  # the verl envelope the integrations hand the client
            body = {"batch": batch, "meta": meta}
        if processing is not None:
            body["processing"] = processing
        return body

    def logprobs(self, batch: dict[str, Any], meta: dict[str, Any] | None = None) -> Any:
        """forward-no-grad's ``logprobs`` as a float32 [B, S] tensor."""
        import torch

        out = self.ops.forward(self._body(batch, meta or {}, None))
        found = logprobs_of(out)
        if found is None:
            raise AssertionError(f"forward-no-grad answer has no logprobs: keys {sorted(out)}")
        return torch.as_tensor(found, dtype=torch.float32)

    def fwd_bwd(
        self,
        batch: dict[str, Any],
        meta: dict[str, Any] | None = None,
        loss_fn: str | None = None,
    ) -> dict[str, Any]:
        processing = {"loss_fn": loss_fn, "post": []} if loss_fn else None
        return dict(self.ops.fwd_bwd(self._body(batch, meta or {}, processing)))

    def step(self, lr: float | None = None) -> dict[str, Any]:
        return dict(self.ops.step(self.k.lr if lr is None else lr))

    def generate(
        self, cid: str, prompts: Sequence[Sequence[int]], seed: int, max_tokens: int = 12
    ) -> list[tuple[list[int], list[float]]]:
        """Seeded samples at temperature 1: (token ids, their log-probs) per prompt."""
        params = [
            {
                "max_tokens": max_tokens,
                "temperature": 1.0,
                "top_p": 1.0,
                "seed": seed + i,
                "logprobs": 1,
            }
            for i in range(len(prompts))
        ]
        out = self.ops.generate({"prompts": [list(p) for p in prompts], "sampling_params": params})
        results = out.get("results", out) if isinstance(out, dict) else out
        samples = []
        for r in results:
            ids = [int(t) for t in _plain(r.get("token_ids"))]
            lps = r.get("logprobs")
            expect(cid, lps is not None, f"generate gave no logprobs though asked: {r!r}")
            samples.append((ids, [_logprob(v, t) for v, t in zip(_plain(lps), ids, strict=False)]))
        return samples


def _plain(value: Any) -> list[Any]:
    tolist = getattr(value, "tolist", None)
    return list(tolist() if callable(tolist) else value or [])


def _logprob(value: Any, token: int) -> float:
    """A sampled token's log-prob: a number, or a vLLM-style entry (``{"logprob"}`` or
    ``{token_id: logprob | {"logprob"}}``) carrying it."""
    if isinstance(value, dict):
        if "logprob" in value:
            value = value["logprob"]
        else:
            value = value.get(token, value.get(str(token), next(iter(value.values()), None)))
        return _logprob(value, token)
    if isinstance(value, list):
        return _logprob(value[0], token)
    return float(value)


# --- batches ---------------------------------------------------------------------------------


def right_padded(rows: Sequence[Sequence[int]]) -> tuple[Any, Any]:
    """Rows right-padded (with their last token, masked out): ids and attention mask."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(list(row))
        ids[i, len(row) :] = row[-1]
        mask[i, : len(row)] = 1
    return ids, mask


def sft_batch(rows: Sequence[Sequence[int]] = (PATTERN,) * 4) -> dict[str, Any]:
    """Next-token loss on ``rows`` (right-padded; padding is masked out of the labels)."""
    ids, mask = right_padded(rows)
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


@dataclass
class Rollout:
    """A verl-layout batch: prompts left-padded to ``p``, responses right-padded to ``r``."""

    batch: dict[str, Any]
    p: int
    r: int

    def response_logprobs(self, shifted: Any) -> Any:
        """Response token j sits at column p + j; its log-prob is shifted column p - 1 + j."""
        return shifted[:, self.p - 1 : self.p - 1 + self.r]

    def response_total(self, shifted: Any) -> float:
        return float((self.response_logprobs(shifted) * self.batch["response_mask"]).sum())


def rollout(
    prompts: Sequence[Sequence[int]] = PROMPTS, responses: Sequence[Sequence[int]] = RESPONSES
) -> Rollout:
    import torch

    b, p, r = len(prompts), max(map(len, prompts)), max(map(len, responses))
    ids = torch.full((b, p + r), ord(" "), dtype=torch.long)
    attn = torch.zeros((b, p + r), dtype=torch.long)
    resp = torch.full((b, r), ord(" "), dtype=torch.long)
    resp_mask = torch.zeros((b, r), dtype=torch.float32)
    for i, (pt, rt) in enumerate(zip(prompts, responses, strict=True)):
        ids[i, p - len(pt) : p] = torch.tensor(list(pt))
        ids[i, p : p + len(rt)] = torch.tensor(list(rt))
        attn[i, p - len(pt) : p + len(rt)] = 1
        resp[i, : len(rt)] = torch.tensor(list(rt))
        resp_mask[i, : len(rt)] = 1.0
    batch = {
        "input_ids": ids,
        "attention_mask": attn,
        "position_ids": (attn.cumsum(-1) - 1).clamp_min(0),
        "prompts": ids[:, :p].clone(),
        "responses": resp,
        "response_mask": resp_mask,
    }
    return Rollout(batch, p, r)


def rl_meta(temperature: float = 1.0) -> dict[str, Any]:
    return {
        "temperature": temperature,
        "calculate_entropy": False,
        "actor_config": {"clip_ratio": 0.2, "loss_agg_mode": "token-mean", "use_kl_loss": False},
    }


def grpo_round(
    sem: Sem, roll: Rollout, advantages: Any, meta: dict[str, Any]
) -> tuple[dict[str, Any], float]:
    """Old log-probs from forward-no-grad, then one grpo forward-backward (no step)."""
    shifted = sem.logprobs(roll.batch, meta)
    batch = dict(roll.batch)
    batch["old_log_probs"] = roll.response_logprobs(shifted)
    batch["advantages"] = advantages
    return sem.fwd_bwd(batch, meta, "grpo"), roll.response_total(shifted)


def train_on(sem: Sem, batch: dict[str, Any], rounds: int = ROUNDS) -> list[float]:
    """``rounds`` x (forward-backward, step) on one batch; the losses seen."""
    losses = []
    for _ in range(rounds):
        losses.append(_loss(sem.fwd_bwd(batch)))
        sem.step()
    return losses


def _loss(result: dict[str, Any]) -> float:
    value = result.get("avg_loss", result.get("loss"))
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise AssertionError(f"forward-backward answered no numeric loss: {result!r}")
    return float(value)


def metric_of(result: dict[str, Any], name: str) -> float | None:
    metrics = result.get("metrics")
    value = metrics.get(name) if isinstance(metrics, dict) else None
    value = result.get(name) if value is None else value
    return float(value) if isinstance(value, (int, float)) else None
