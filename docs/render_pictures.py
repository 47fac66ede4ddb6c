"""Render the documentation's pictures from real runs, so they show what the kit produces today.

Three runs, three PNGs under ``docs/img/`` (and the GRPO curve's CSV beside it):

- the conformance suite against the embedded fake with a mutant that breaks one promise,
  its HTML report (``--report``), so the picture shows a failure as a reader meets it;
- a parity replay of the committed GRPO tape against a deliberately wrong fake (a mutant),
  its HTML report (``--html``), so the picture shows divergences as a reader meets them;
- the GRPO toy loop against the tiny engine, its learning curve (matplotlib, written by the
  example itself).

The HTML reports are screenshotted by headless Chromium (Debian's ``chromium`` package) and
shrunk to a palette PNG so each stays small. Run from the checkout, in an environment with
the ``test`` extra installed::

    python docs/render_pictures.py            # all three, about two minutes on 2 cores
    python docs/render_pictures.py --only parity
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"
#: The width a report is laid out at, and the height the screenshot keeps of it.
WINDOW = (1400, 1100)
#: The widest picture the pages show; a screenshot is scaled down to it.
SHOWN_WIDTH = 1000
#: Relative to the checkout, so the report names the tape as a reader's clone would.
PARITY_TAPE = "parity/rl-loop-grpo.gsrec.gz"
PARITY_MUTANT = "steps-not-incremented"
#: A mutant that breaks one promise (capacity figures as strings); the clauses that read
#: capacity go red with it, and the failures box lists each.
CONFORMANCE_MUTANT = "capacity-text"


def run(argv: list[str], ok: tuple[int, ...] = (0,)) -> None:
    """Run one command of the kit, echoing it; its exit status must be one of ``ok``."""
    print("+", " ".join(argv), flush=True)
    done = subprocess.run(argv, cwd=ROOT)
    if done.returncode not in ok:
        sys.exit(f"{argv[0]} exited {done.returncode}")


def browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("no headless Chromium found: apt-get install -y chromium")


def screenshot(html: Path, png: Path) -> None:
    """The top of ``html`` as laid out at WINDOW, scaled to SHOWN_WIDTH, as a palette PNG."""
    with tempfile.TemporaryDirectory() as scratch:
        raw = Path(scratch) / "raw.png"
        subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={scratch}/profile", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                        f"--screenshot={raw}", html.as_uri()], check=True, capture_output=True)
        image = Image.open(raw).convert("RGB")
    height = round(image.height * SHOWN_WIDTH / image.width)
    image = image.resize((SHOWN_WIDTH, height), Image.Resampling.LANCZOS)
    image.quantize(colors=128).save(png, optimize=True)
    print(f"wrote {png.relative_to(ROOT)} ({png.stat().st_size // 1024} KiB)")


def conformance(scratch: Path) -> None:
    report = scratch / "conformance.html"
    # Exit 1: the mutant turns the capacity clauses red, which is what the picture shows first.
    run([sys.executable, "-m", "conformance.cli", "--report", str(report), "-n", "2", "--quiet",
         "--mutant", CONFORMANCE_MUTANT], ok=(1,))
    screenshot(report, IMG / "conformance-report.png")


def parity(scratch: Path) -> None:
    report = scratch / "parity.html"
    # Exit 1: the mutant diverges, which is what the picture shows.
    run([sys.executable, "-m", "conformance.parity.cli", PARITY_TAPE, "--mutant", PARITY_MUTANT,
         "--html", str(report), "--quiet"], ok=(1,))
    screenshot(report, IMG / "parity-report.png")


def grpo(scratch: Path) -> None:
    run([sys.executable, "examples/grpo_toy.py", "--steps", "20", "--csv", str(IMG / "grpo_toy.csv"),
         "--png", str(IMG / "grpo-toy.png")])


PICTURES: dict[str, Callable[[Path], None]] = {"conformance": conformance, "parity": parity, "grpo": grpo}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(PICTURES), action="append", help="render only these (repeatable)")
    args = ap.parse_args()
    IMG.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.only or PICTURES:
            PICTURES[name](Path(scratch))


if __name__ == "__main__":
    main()
