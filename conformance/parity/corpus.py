"""Re-record the parity corpus (``parity/``) in one command, then replay each new tape.

    python -m conformance.parity.corpus            # everything
    python -m conformance.parity.corpus --only rl  # one entry

Entries: the conformance run, profile current, against the embedded fake in each dialect
the installed ``gs-conformance`` offers whose answers a replay can reproduce (``kit``,
``spec``; not ``any``, which draws each answer's form as the call arrives, so a replay's
draws follow its own timing: its forms are judged by the any-dialect seed runs instead),
the properties of the proposed server clauses (profile proposed,
kit dialect: their mutants are reachable from no other traffic), and a recipe-style RL loop
(examples/grpo_toy.py, a few short GRPO steps through the client) recorded by
``fake-gs --record``. Every entry records with ``--record-bodies outline``: a big frame is
kept as its skeleton (a replay rebuilds it with seeded values), so each tape stays a few
hundred KB (gzip) while every request is replayed. Re-record whenever the fake's behaviour
changes on purpose; the CI parity test fails until you do.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "parity"
RULES = CORPUS / "accepted.yaml"
#: Hypothesis examples per property in the recorded conformance runs (small on purpose).
EXAMPLES = 2
#: The token the RL loop's fake and client use; the tape keeps only its label.
RL_TOKEN = "gs-parity-corpus-token"
#: What the corpus keeps of big request bodies: their skeleton (the repository stays small).
BODIES = "outline"


def dialects() -> dict[str, list[str]]:
    """``{dialect: extra gs-conformance args}``: every dialect the suite's options offer
    whose answers a replay reproduces (all but ``any``: see the module's docstring)."""
    from contract.forms import DIALECTS

    return {dialect: ["--dialect", dialect] for dialect in DIALECTS if dialect != "any"}


def proposed_server_clauses() -> list[str]:
    """The server clauses only the proposed profile checks."""
    from contract.clauses import CLAUSES

    return [c.id for c in CLAUSES.values() if c.profile == "proposed" and c.subject == "server"]


def record_conformance(dialect: str, args: list[str], out: Path, profile: str = "current") -> None:
    with tempfile.TemporaryDirectory(prefix="gs-parity-") as tmp:
        raw = str(Path(tmp) / "run.gsrec")
        cmd = [sys.executable, "-m", "conformance.cli", "--profile", profile, "--examples",
               str(EXAMPLES), "-n", "0", "--quiet", "--record", raw, "--record-bodies", BODIES, *args]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        print(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:])
        _gzip(raw, out)


def record_rl_loop(out: Path, steps: int = 2) -> None:
    """A few GRPO steps of examples/grpo_toy.py through the client, against a recording fake."""
    examples = str(ROOT / "examples")
    if examples not in sys.path:  # grpo_toy imports its sibling grpo_batches
        sys.path.insert(0, examples)
    spec = importlib.util.spec_from_file_location("grpo_toy", ROOT / "examples" / "grpo_toy.py")
    assert spec is not None and spec.loader is not None
    toy = importlib.util.module_from_spec(spec)
    sys.modules["grpo_toy"] = toy
    spec.loader.exec_module(toy)
    from client import ClientConfig, create_client

    # Many target bytes, so rewards (and advantages, losses) are not all zero at step one.
    cfg = toy.ToyConfig(steps=steps, group_size=4, prompts=toy.DEFAULT_PROMPTS[:2], max_tokens=6,
                        mini_batches=2, seed=3, target="abcdefghijklmnopqrstuvwxyz ")
    with tempfile.TemporaryDirectory(prefix="gs-parity-") as tmp:
        raw = str(Path(tmp) / "rl.gsrec")
        # The fake records as ``fake-gs --record FILE --token T`` does (FakeSettings.record).
        with toy.fake_server(seed=cfg.seed, record=raw, record_bodies=BODIES, tokens=(RL_TOKEN,)) as base_url:
            client = create_client(ClientConfig(
                base_url=base_url, pat=RL_TOKEN, model="Qwen/Qwen3-0.6B", lr=cfg.lr, max_seq_len=256,
                train_batch_size=len(cfg.prompts) * cfg.group_size, seed=cfg.seed,
                poll_first_s=0.005, poll_factor=1.5, poll_cap_s=0.05, job_start_timeout_s=60))
            try:
                records = toy.run_grpo(client, cfg)
            finally:
                client.shutdown()
        print(f"RL loop: {len(records)} GRPO steps, mean reward {records[-1].mean_reward:.3f} at the last")
        _gzip(raw, out)


def _gzip(raw: str, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(raw, "rb") as src, gzip.GzipFile(str(out), "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} "
          f"({out.stat().st_size // 1024} KiB)")


def entries(out: Path) -> dict[str, tuple[Path, Callable[[], None]]]:
    found: dict[str, tuple[Path, Callable[[], None]]] = {}
    for dialect, args in dialects().items():
        path = out / f"conformance-current-{dialect}.gsrec.gz"
        found[f"conformance-{dialect}"] = (path, partial(record_conformance, dialect, args, path))
    # The properties of the proposed server clauses (idempotency keys, freed results, a
    # 405's Allow) run only in that profile: without this tape no replay reaches their
    # mutants. Only those: the rest is the current tapes' traffic again.
    proposed = out / "conformance-proposed-kit.gsrec.gz"
    only = ["--clauses", ",".join(proposed_server_clauses()), *dialects()["kit"]]
    found["conformance-proposed-kit"] = (proposed, lambda: record_conformance("kit", only, proposed, "proposed"))
    rl = out / "rl-loop-grpo.gsrec.gz"
    found["rl"] = (rl, lambda: record_rl_loop(rl))
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance.parity.corpus", description=__doc__)
    p.add_argument("--out", type=Path, default=CORPUS, help="Corpus directory (default: parity/).")
    p.add_argument("--only", default="", help="Comma-separated entries (conformance-kit, rl, ...).")
    p.add_argument("--no-check", action="store_true", help="Do not replay the new tapes.")
    ns = p.parse_args(argv)
    table = entries(ns.out)
    wanted = [e for e in ns.only.split(",") if e] or list(table)
    unknown = set(wanted) - set(table)
    if unknown:
        print(f"unknown entries {sorted(unknown)}; known: {sorted(table)}", file=sys.stderr)
        return 2
    code = 0
    for name in wanted:
        path, record = table[name]
        started = time.monotonic()
        record()
        print(f"{name}: recorded in {time.monotonic() - started:.1f}s")
        if not ns.no_check:
            from conformance.parity import cli

            code |= cli.main([str(path), "--rules", str(RULES), "--quiet"])
    return code


if __name__ == "__main__":
    sys.exit(main())
