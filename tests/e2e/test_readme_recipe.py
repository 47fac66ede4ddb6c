"""The docs' "Run a recipe against the fake" walk-through runs as written.

The ``bash`` block that starts with ``# walk-through`` is taken from that page
(``docs/recipes/recipes.md``) verbatim and
run by bash in a scratch directory holding a copy of ``examples/`` (as a fresh clone with
the kit installed would have): the fake over TLS with a PAT, the tokenizer directory, the
GRPO example in ArcticTraining's layout over HTTPS, the execution-log download. The run
must learn (the reward rises), leave a loadable tokenizer, and download each sub-job's log.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

for _module in ("torch", "trustme", "tokenizers", "moto", "boto3"):
    pytest.importorskip(_module)

ROOT = Path(__file__).resolve().parents[2]
RECIPE_PAGE = ROOT / "docs" / "recipes" / "recipes.md"

#: Twenty GRPO steps over TLS with the tiny engine: ``slow`` (``tox -e slow``, in CI too);
#: ``tox -e tests`` keeps the same example's learning and TLS checks (test_grpo_example.py,
#: test_tls_recipe.py).
pytestmark = [pytest.mark.xdist_group("grpo_example"), pytest.mark.slow, pytest.mark.heavy]


def walkthrough() -> str:
    blocks = re.findall(r"```bash\n(.*?)```", RECIPE_PAGE.read_text(), flags=re.S)
    found = [b for b in blocks if b.startswith("# walk-through")]
    assert len(found) == 1, f"{RECIPE_PAGE} needs exactly one '# walk-through' bash block"
    return found[0]


def test_the_docs_walkthrough_runs_as_written(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    # `python` in the block is the interpreter running the tests (tox's slow env borrows the
    # tests env's interpreter, and its own bin holds none of the kit's dependencies)
    path = os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": path}
    for name in ("CORTEX_HOST", "CORTEX_BASE_URL", "CORTEX_PAT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        env.pop(name, None)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", walkthrough()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    with (tmp_path / "grpo.csv").open() as fh:
        rewards = [float(row["mean_reward"]) for row in csv.DictReader(fh)]
    start, end = sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3
    print(f"walk-through reward: first 3 {rewards[:3]} last 3 {rewards[-3:]}")
    assert start < 0.05 and end > 0.5, rewards
    with (ROOT / "docs" / "img" / "grpo_toy.csv").open() as fh:  # the curve whose figures the page states
        kept = [float(row["mean_reward"]) for row in csv.DictReader(fh)]
    assert [round(r, 3) for r in rewards] == [round(r, 3) for r in kept]
    assert (tmp_path / "tiny-tokenizer" / "tokenizer.json").is_file()
    logs = sorted(p.relative_to(tmp_path / "logs").as_posix() for p in (tmp_path / "logs").rglob("*.jsonl"))
    assert [p.split("_", 1)[1] for p in logs] == ["sampling_0/execution.jsonl", "training_0/execution.jsonl"]
    assert "job cancelled" in (tmp_path / "logs" / logs[1]).read_text()
    assert "execution log:" in proc.stdout
    # the page's account of the run: the training log's line count as the example prints
    # it, and its first line's message
    said = " ".join(RECIPE_PAGE.read_text().split())
    stated = re.search(r"`execution log: logs/<job_id>_training_0/execution.jsonl \((\d+) lines\)`", said)
    printed = re.search(r"execution log: \S+_training_0/execution.jsonl \((\d+) lines\)", proc.stdout)
    first = re.search(r'"message": "([^"]+)"\}`\.', said)
    assert stated and printed and first, (proc.stdout[-2000:], "the page or the example changed its wording")
    assert stated[1] == printed[1], (stated[1], printed[1])
    assert json.loads((tmp_path / "logs" / logs[1]).read_text().splitlines()[0])["message"] == first[1]
    assert not (tmp_path / "fake.env").exists()  # the fake was stopped and cleaned up
