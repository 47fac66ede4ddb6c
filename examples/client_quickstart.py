"""Client quickstart: one RL step against a Cortex Training endpoint (or the local fake).

Why: the shortest path from "I have a URL" to a forward-backward, a step, a weight sync and
a generation, using only the client library.

    # terminal 1: a local fake server (prints its base URL)
    python -m fake_gs --port 8080
    # terminal 2
    python examples/client_quickstart.py --base-url http://127.0.0.1:8080

Against a real account use ``--host <account>.snowflakecomputing.com`` and export the PAT
in ``CORTEX_PAT``. With no target argument the example starts a fake in-process.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

import torch

from client import ClientConfig, create_client


@contextlib.contextmanager
def target(args: argparse.Namespace) -> Iterator[dict[str, str]]:
    """Addressing from the command line, or an in-process fake when none is given."""
    if args.base_url:
        yield {"base_url": args.base_url}
    elif args.host:
        yield {"host": args.host}
    else:
        from fake_gs import FakeSettings, serve_in_background  # the example's, not the client's

        with serve_in_background(FakeSettings()) as url:
            yield {"base_url": url}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url")
    parser.add_argument("--host")
    parser.add_argument("--model", default="Qwen/Qwen3-0.6B")
    args = parser.parse_args()

    with target(args) as where:
        config = ClientConfig(**where, model=args.model, training_gpus=1, sampling_gpus=1,
                              max_seq_len=512, poll_first_s=0.05)
        with create_client(config) as client:  # creates the job and waits for `running`
            print("job", client.job_id, "training", client.training_job_id)
            ids = torch.randint(0, 1000, (2, 16))
            batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}
            out = client.fwd_bwd({"batch": batch, "meta": {}, "processing": {"post": []}})
            print("loss", out["loss"], "grad_norm", out.get("grad_norm"))
            print("step", client.step(learning_rate=1e-5))
            print("sync", client.sync_weights())
            gen = client.generate([[1, 2, 3]], {"max_tokens": 8})
            print("tokens", gen[0]["token_ids"])  # one output per prompt
            print("saved", client.save_checkpoint()["checkpoint_id"])
        # leaving the block cancels the job this client created


if __name__ == "__main__":
    main()
