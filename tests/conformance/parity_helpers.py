"""What the parity tests share: replay options, self-parity's verdict, a chunked client run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from conformance.parity import report
from conformance.parity.cli import replay_tape
from conformance.parity.replay import Replay

#: A token the recorders must never write (each test's fakes use it).
TOKEN = "tok-self-parity-9c2e71-never-in-a-tape"


def replay_ns(**kw: Any) -> argparse.Namespace:
    """gs-parity's options, as its parser would leave them, with ``kw`` laid over."""
    base: dict[str, Any] = dict(url=None, token=None, token2=None, database=None, schema=None, endpoint=None,
                                mutant=None, engine=None, status_style=None, delivery=None,
                                poll_timeout=30.0, timeout=60.0)
    return argparse.Namespace(**(base | kw))


def replay(tape: Path, **kw: Any) -> Replay:
    return replay_tape(str(tape), replay_ns(**kw))


def assert_self_parity(rep: Replay, skipped_ok: frozenset[str] = frozenset({"form"})) -> None:
    """Self-parity: nothing diverges, and nothing is skipped but for a kind in ``skipped_ok``
    (never for lack of bytes; ``form``: a poll continuing a cursor chain the new server, in
    a form the spec allows, had already ended)."""
    assert rep.ok, report.text([rep])
    skipped = [f"#{r.seq} {r.route} [{r.skip_kind}]: {r.skipped}" for r in rep.results
               if r.skipped is not None and r.skip_kind not in skipped_ok]
    assert not skipped, "\n".join(skipped[:20])
    assert not any(r.skip_kind == "bytes" for r in rep.results)


def chunked_training(base_url: str, steps: int = 2, batch: tuple[int, int] = (8, 20_000)) -> None:
    """Forward-backward + step through the kit's client with batches of a few MiB, cut into
    1 MiB request chunks (each a frame slice the tape must keep or rebuild)."""
    import torch

    from client import ClientConfig, create_client

    b, s = batch
    client = create_client(ClientConfig(
        base_url=base_url, pat=TOKEN, model="Qwen/Qwen3-0.6B", max_seq_len=s, train_batch_size=b, seed=5,
        poll_first_s=0.005, poll_cap_s=0.05, max_chunk_bytes=1 << 20))
    ids = torch.randint(0, 1000, (b, s), generator=torch.Generator().manual_seed(0))
    payload = {"batch": {"input_ids": ids, "attention_mask": torch.ones(b, s, dtype=torch.long),
                         "advantages": torch.randn(b, s, generator=torch.Generator().manual_seed(1)),
                         "response_mask": torch.ones(b, s)},
               "meta": {"pad_token_id": 0}, "processing": {"loss_fn": "verl_grpo", "post": []}}
    try:
        for _ in range(steps):
            client.fwd_bwd(payload)
            client.step()
    finally:
        client.shutdown()


class RawJob:
    """One running job on a fake, called by hand (exact bytes, fixed chunk group ids)."""

    def __init__(self, base_url: str) -> None:
        import requests

        from conformance.inputs.valid_bodies import small_job
        from contract.auth import auth_headers
        from contract.routes import prefix

        self.session = requests.Session()
        self.session.headers.update(auth_headers(TOKEN))
        self.url = base_url + prefix("PARITY_DB", "PUBLIC")
        answer = self.session.post(self.url + "/", json=small_job("Qwen/Qwen3-0.6B"), timeout=30)
        assert answer.status_code == 200, answer.text
        self.job_id = answer.json()["job_id"]
        for _ in range(100):
            if self.session.get(f"{self.url}/{self.job_id}", timeout=30).json()["status"] == "running":
                break

    def forward_backward(self, chunk: bytes) -> dict[str, Any]:
        """Send one request chunk; once final, poll its request to the end."""
        answer = self.session.post(f"{self.url}/{self.job_id}/forward-backward", data=chunk, timeout=60,
                                   headers={"Content-Type": "application/octet-stream"})
        assert answer.status_code in (200, 202), answer.text
        body = answer.json()
        if "request_id" not in body:
            return dict(body)
        for _ in range(200):
            page = self.session.get(f"{self.url}/{self.job_id}/requests/{body['request_id']}", timeout=30).json()
            if page["status"] in ("done", "failed"):
                return dict(page)
        raise AssertionError("the request never ended")


def big_chunk(mib: float, group: str, seed: int = 0) -> bytes:
    """A forward-backward frame carrying ``mib`` MiB of random floats (incompressible), as
    one request chunk of group ``group``."""
    import torch

    from contract import wire

    floats = int(mib * (1 << 20)) // 4
    frame = wire.dumps({"args": [], "kwargs": {
        "input_ids": torch.randint(0, 100, (1, 8), generator=torch.Generator().manual_seed(seed)),
        "extra": torch.rand(floats, generator=torch.Generator().manual_seed(seed))}})
    return wire.encode_byte_chunks(frame, "request", operation="forward-backward", chunk_group_id=group,
                                   force_chunk=True)[0]
