"""GRPO on a toy task, through the RL client only, against ``fake-gs --engine tiny``.

Why: the tiny engine trains a real (small) model, so an RL client that gets the numbers
wrong (advantages negated, old log-probs off by one, weight sync forgotten) shows up here
as a reward curve that does not rise. The loop is a function with hooks, so tests inject
exactly those breaks (see ``tests/e2e/test_grpo_example.py``).

Task: the reward of a completion is the fraction of its ``max_tokens`` slots holding a
target byte (default ``a``). A freshly initialised byte-level model emits any of ~256
bytes, so the reward starts near 0 and a working GRPO loop drives it towards 1.

Each step sends the verl batch layout (spec §10), or with ``--layout arctic``
ArcticTraining's (spec §10.3): model kwargs under ``kwargs``, and ``advantages``,
``loss_mask``, the shifted old log-probs and ``eps_clip`` in a ``context`` block:

1. ``generate`` ``rollout_n`` completions per prompt from the sampler;
2. rewards, group-normalised into advantages (GRPO);
3. ``fwd_no_grad`` on ``[B, P+R]`` for the old log-probs (shifted: column ``i`` is
   ``log p(input_ids[:, i+1])``, so response token ``j`` is column ``P-1+j``);
4. ``fwd_bwd`` + ``step`` per mini-batch with ``loss_fn="verl_grpo"``;
5. ``sync_weights`` so the next rollout samples the updated policy.

Run (starts the fake in this process, on a free port, when neither ``--base-url`` nor
``--host`` is given)::

    python examples/grpo_toy.py --steps 30 --csv grpo.csv --png grpo.png
    python examples/grpo_toy.py --host "$CORTEX_HOST" --layout arctic   # https + PAT

``--host`` addresses the service as recipes do (``https://{host}``, the PAT from
``$CORTEX_PAT``); against ``fake-gs --tls`` export the CA bundle it prints.

The task, the advantages and both batch layouts live beside this file in
``grpo_batches.py``. Prompts are tokenised there, as the tiny engine's byte tokenizer
does, and sent as token ids, so the batch's prompt tokens are exactly what the sampler
saw. tqdm and matplotlib are optional.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from grpo_batches import (
    PAD_ID,
    arctic_payload,
    build_rollout,
    encode_prompt,
    group_advantages,
    reward,
    slice_old_log_probs,
    verl_payload,
)

DEFAULT_PROMPTS = ("Say a:", "aaa? ", "Write: ", "Go!")


@dataclass
class ToyConfig:
    """Knobs of the run; the defaults learn within a few minutes on two CPU cores."""

    steps: int = 20
    group_size: int = 16
    prompts: tuple[str, ...] = DEFAULT_PROMPTS
    max_tokens: int = 16
    lr: float = 5e-3
    temperature: float = 1.0
    target: str = "a"
    clip_ratio: float = 0.2
    mini_batches: int = 2
    seed: int = 0
    #: ``verl``: the verl envelope; ``arctic``: ArcticTraining's kwargs + context layout.
    layout: str = "verl"


@dataclass
class StepRecord:
    """One row of the CSV: what the run looked like at this step."""

    step: int
    mean_reward: float
    loss: float
    grad_norm: float
    ppo_kl: float
    pg_clipfrac: float
    seconds: float


def _sync(client: Any) -> None:
    client.sync_weights(cuda_ipc=False, low_memory=False)


@dataclass
class Hooks:
    """Seams where tests inject deliberately broken client behaviour."""

    advantages: Callable[[torch.Tensor], torch.Tensor] = field(default=lambda adv: adv)
    old_log_probs: Callable[[torch.Tensor, int, int], torch.Tensor] = slice_old_log_probs
    sync_weights: Callable[[Any], None] = _sync


def _as_list(value: Any) -> list[Any]:
    return value.tolist() if hasattr(value, "tolist") else list(value)


def _results(answer: Any) -> list[dict[str, Any]]:
    if isinstance(answer, dict):
        answer = answer.get("results", answer)
    return list(answer)


def _logprobs(answer: dict[str, Any]) -> torch.Tensor:
    """``fwd_no_grad`` answers alias ``model_outputs`` to ``batch`` (what SkyRL's and verl's integration code relies on)."""
    for outer in ("batch", "model_outputs"):
        inner = answer.get(outer)
        if isinstance(inner, dict):
            for key in ("logprobs", "log_probs"):
                if key in inner:
                    return torch.as_tensor(inner[key], dtype=torch.float32)
    raise KeyError(f"no logprobs in fwd_no_grad answer (keys {sorted(answer)})")


def _metric(answer: dict[str, Any], name: str) -> float:
    value = answer.get(name, answer.get("metrics", {}).get(name))
    return float(value) if value is not None else float("nan")


# --- the loop --------------------------------------------------------------------------------


def run_grpo(
    client: Any,
    cfg: ToyConfig,
    hooks: Hooks | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
) -> list[StepRecord]:
    """Run ``cfg.steps`` GRPO steps through ``client`` (an ArcticRLClient); one record per step."""
    hooks = hooks or Hooks()
    prompt_ids = [encode_prompt(p) for p in cfg.prompts for _ in range(cfg.group_size)]
    if len(prompt_ids) % cfg.mini_batches:
        raise ValueError(
            f"batch {len(prompt_ids)} is not divisible into {cfg.mini_batches} mini-batches"
        )
    meta = {
        "pad_token_id": PAD_ID,
        "rollout_n": cfg.group_size,
        "max_response_len": cfg.max_tokens,
        "temperature": 1.0,
        "calculate_entropy": False,
        "actor_config": {"clip_ratio": cfg.clip_ratio, "loss_agg_mode": "token-mean"},
    }
    records: list[StepRecord] = []
    for step in range(cfg.steps):
        record = grpo_step(client, cfg, hooks, prompt_ids, meta, step)
        records.append(record)
        if on_step is not None:
            on_step(record)
    return records


def sample(client: Any, cfg: ToyConfig, prompt_ids: list[list[int]], step: int) -> list[list[int]]:
    """Step 1: one seeded completion per prompt row, as token ids."""
    params = [
        {
            "max_tokens": cfg.max_tokens,
            "temperature": cfg.temperature,
            "seed": cfg.seed * 1_000_003 + step * len(prompt_ids) + i,
            "logprobs": 0,
        }
        for i in range(len(prompt_ids))
    ]
    results = _results(client.generate(prompt_ids, params))
    return [[int(t) for t in _as_list(r["token_ids"])] for r in results]


def grpo_step(client: Any, cfg: ToyConfig, hooks: Hooks, prompt_ids: list[list[int]],
              meta: dict[str, Any], step: int) -> StepRecord:
    """Steps 1-5 of the module docstring, once."""
    started = time.perf_counter()
    responses = sample(client, cfg, prompt_ids, step)
    rewards = torch.tensor([reward(r, cfg.target, cfg.max_tokens) for r in responses])
    roll = build_rollout(prompt_ids, responses, cfg.max_tokens)
    seq_adv = hooks.advantages(group_advantages(rewards, cfg.group_size))
    advantages = seq_adv[:, None] * roll.response_mask
    batch = {
        "input_ids": roll.input_ids,
        "attention_mask": roll.attention_mask,
        "position_ids": roll.position_ids,
        "prompts": roll.prompts,
        "responses": roll.responses,
        "response_mask": roll.response_mask,
    }
    old = _logprobs(client.fwd_no_grad({"batch": batch, "meta": meta}))
    if cfg.layout == "arctic":
        make = arctic_payload(roll, advantages, old, cfg.clip_ratio)
    else:
        batch["old_log_probs"] = hooks.old_log_probs(old, roll.prompt_len, roll.response_len)
        batch["advantages"] = advantages
        make = verl_payload(batch, meta)
    metrics = train(client, make, len(prompt_ids), cfg, step)
    hooks.sync_weights(client)
    return StepRecord(step=step, mean_reward=float(rewards.mean()), **metrics,
                      seconds=time.perf_counter() - started)


def train(client: Any, make: Callable[[torch.Tensor], Any], batch_size: int, cfg: ToyConfig,
          step: int) -> dict[str, float]:
    """Step 4: ``fwd_bwd`` + ``step`` per shuffled mini-batch; the metrics' means."""
    seen: dict[str, list[float]] = {"loss": [], "grad_norm": [], "ppo_kl": [], "pg_clipfrac": []}
    order = torch.randperm(batch_size, generator=torch.Generator().manual_seed(cfg.seed + step))
    for part in order.chunk(cfg.mini_batches):
        answer = client.fwd_bwd(make(part))
        seen["loss"].append(
            _metric(answer, "avg_loss") if "avg_loss" in answer else _metric(answer, "loss")
        )
        seen["ppo_kl"].append(_metric(answer, "ppo_kl"))
        seen["pg_clipfrac"].append(_metric(answer, "pg_clipfrac"))
        seen["grad_norm"].append(_metric(client.step(), "grad_norm"))
    return {name: sum(values) / len(values) for name, values in seen.items()}


# --- running against the fake ----------------------------------------------------------------


@contextlib.contextmanager
def fake_server(seed: int = 0, **settings: Any) -> Iterator[str]:
    """A ``fake-gs --engine tiny`` in this process on a free loopback port; yields its
    base URL. ``settings`` are further ``FakeSettings`` fields (``tls=True``, ...)."""
    from fake_gs.server import serve_in_background

    with serve_in_background(engine="tiny", seed=seed, **settings) as base_url:
        yield base_url


def make_client(base_url: str | None, cfg: ToyConfig, host: str | None = None) -> Any:
    """The client library's RL client, tuned for a local fake (short polls).

    ``host`` addresses ``https://{host}`` with the PAT from ``$CORTEX_PAT``, the way the
    service's recipes do; ``base_url`` is the explicit alternative.
    """
    from client import ClientConfig, create_client

    address = {"host": host} if host else {"base_url": base_url}
    config = ClientConfig(
        **address,
        model="Qwen/Qwen3-0.6B",
        lr=cfg.lr,
        max_seq_len=256,
        train_batch_size=len(cfg.prompts) * cfg.group_size,
        seed=cfg.seed,
        poll_first_s=0.005,
        poll_factor=1.5,
        poll_cap_s=0.05,
        job_start_timeout_s=60,
    )
    return create_client(config)


class _Progress:
    """tqdm when installed, else a one-line text bar."""

    def __init__(self, total: int) -> None:
        self.total = total
        try:
            from tqdm import tqdm

            self._bar: Any = tqdm(total=total, unit="step")
        except ImportError:
            self._bar = None

    def update(self, rec: StepRecord) -> None:
        text = f"reward {rec.mean_reward:.3f} loss {rec.loss:+.4f} kl {rec.ppo_kl:+.4f}"
        if self._bar is not None:
            self._bar.set_postfix_str(text)
            self._bar.update(1)
            return
        done = rec.step + 1
        filled = int(30 * done / self.total)
        print(
            f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{self.total} {text}",
            end="",
            flush=True,
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            print()


def write_csv(records: Sequence[StepRecord], path: Path) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(asdict(records[0])) if records else ["step"])
        writer.writeheader()
        for rec in records:
            writer.writerow(asdict(rec))


def save_png(records: Sequence[StepRecord], path: Path) -> bool:
    """Reward and loss curves; returns False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    steps = [r.step for r in records]
    ax1.plot(steps, [r.mean_reward for r in records])
    ax1.set(xlabel="step", ylabel="mean reward", title="reward")
    ax2.plot(steps, [r.loss for r in records])
    ax2.set(xlabel="step", ylabel="loss", title="GRPO loss")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def save_execution_logs(client: Any, directory: Path) -> list[Path]:
    """Write each log file of the run to ``directory/<sub_job_id>/<filename>``; a key that
    would leave ``directory`` (or a symlink planted in it) raises ``UnsafeLogKey``."""
    from client.errors import UnsafeLogKey
    from client.logs import write_log_files

    try:
        files = client.fetch_execution_logs()
        written = write_log_files(files, directory)
    except UnsafeLogKey:
        raise  # a hostile stage: refused, never carried on from
    except Exception as exc:  # an example: report and carry on, the curve is still written
        print(f"execution logs not downloaded: {exc}")
        return []
    for item, path in zip(files, written, strict=True):
        print(f"execution log: {path} ({len(item['content'].splitlines())} lines)")
    return written


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--base-url", help="a running fake-gs --engine tiny; started here if omitted")
    ap.add_argument("--host", help="address https://HOST with the PAT in $CORTEX_PAT (recipe style)")
    ap.add_argument("--layout", choices=("verl", "arctic"), default=ToyConfig.layout,
                    help="batch layout: the verl envelope or ArcticTraining's kwargs + context")
    ap.add_argument("--steps", type=int, default=ToyConfig.steps)
    ap.add_argument("--group-size", type=int, default=ToyConfig.group_size)
    ap.add_argument(
        "--prompts", type=int, default=len(DEFAULT_PROMPTS), help="how many of the toy prompts"
    )
    ap.add_argument("--max-tokens", type=int, default=ToyConfig.max_tokens)
    ap.add_argument("--lr", type=float, default=ToyConfig.lr)
    ap.add_argument("--mini-batches", type=int, default=ToyConfig.mini_batches)
    ap.add_argument("--target", default=ToyConfig.target, help="bytes that earn reward")
    ap.add_argument("--seed", type=int, default=ToyConfig.seed)
    ap.add_argument("--logs", type=Path, default=None, metavar="DIR",
                    help="after the run, download the job's execution logs (spec §12.2) into DIR")
    ap.add_argument("--csv", type=Path, default=Path("grpo_toy.csv"))
    ap.add_argument("--png", type=Path, default=Path("grpo_toy.png"))
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cfg = ToyConfig(
        steps=args.steps,
        group_size=args.group_size,
        prompts=DEFAULT_PROMPTS[: max(1, args.prompts)],
        max_tokens=args.max_tokens,
        lr=args.lr,
        mini_batches=args.mini_batches,
        target=args.target,
        seed=args.seed,
        layout=args.layout,
    )
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        base_url = args.base_url
        if not (base_url or args.host):
            base_url = stack.enter_context(fake_server(seed=args.seed))
        client = make_client(base_url, cfg, host=args.host)
        if args.logs is not None:  # runs after shutdown (LIFO), so the logs show the job's end
            stack.callback(save_execution_logs, client, args.logs)
        stack.callback(client.shutdown)
        bar = _Progress(cfg.steps)
        try:
            records = run_grpo(client, cfg, on_step=bar.update)
        finally:
            bar.close()
    write_csv(records, args.csv)
    first = sum(r.mean_reward for r in records[:3]) / min(3, len(records))
    last = sum(r.mean_reward for r in records[-3:]) / min(3, len(records))
    print(
        f"mean reward {first:.3f} (first 3 steps) -> {last:.3f} (last 3) in {time.perf_counter() - started:.1f} s"
    )
    print(f"per-step CSV: {args.csv}")
    if save_png(records, args.png):
        print(f"curve: {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
