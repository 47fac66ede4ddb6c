"""What a published wheel holds, as integrations.md states it: its size, its modules, its
top-level packages and its requirements, written to a JSON file kept beside the page (a test
holds the page to it; CI cannot download the wheel).

Run: ``pip download --no-deps arctic-platform==0.1.2 -d DIR`` then ``python
docs/wheel_facts.py DIR/arctic_platform-0.1.2-py3-none-any.whl --json
docs/img/arctic_platform_wheel.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import zipfile
from pathlib import Path


def facts(wheel: Path) -> dict[str, object]:
    """The wheel's bytes, its ``.py`` modules, its top-level packages and its Requires-Dist lines."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode("utf-8").splitlines()
    modules = sorted(n for n in names if n.endswith(".py"))
    return {"wheel": wheel.name, "bytes": wheel.stat().st_size, "modules": len(modules),
            "packages": sorted({"/".join(m.split("/")[:2]).removesuffix(".py") for m in modules}),
            "requires_dist": [line.partition(": ")[2] for line in lines if line.startswith("Requires-Dist: ")]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--json", metavar="PATH", type=Path, required=True, help="where to write the facts")
    args = parser.parse_args(argv)
    document = {"command": f"python docs/wheel_facts.py {args.wheel.name} --json {args.json}",
                "measured": {"date": datetime.date.today().isoformat()}, **facts(args.wheel)}
    args.json.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
