"""``python -m contract openapi|schemathesis-config|clauses|coverage|spec-index|demo``: print
the document or its schemathesis config, list clauses (with their sources), print the spec
coverage table or the spec's term index, or demo."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from contract.routes import DEFAULT_PROFILE, PROFILES


def _demo() -> int:
    """Build the OpenAPI document and round-trip a DSSST1 frame through chunking."""
    from contract import wire
    from contract.clauses import CLAUSES
    from contract.openapi import build_openapi

    doc = build_openapi()
    print(f"OpenAPI {doc['openapi']}: {len(doc['paths'])} paths, {len(CLAUSES)} clauses")
    import torch

    input_ids = torch.arange(3 * 4096).reshape(3, 4096)
    batch: dict[str, Any] = {"kwargs": {"input_ids": input_ids}, "meta": {"n": 1}}
    frame = wire.dumps(batch, metadata=wire.standard_request_metadata())
    chunks = wire.encode_byte_chunks(frame, "request", "forward-backward", max_bytes=8192 + 4096)
    back = wire.loads(wire.decode_byte_chunks(chunks, kind="request"))
    same = torch.equal(back["kwargs"]["input_ids"], input_ids)
    print(f"frame {len(frame)} bytes -> {len(chunks)} chunks -> round trip {'ok' if same else 'FAILED'}")
    return 0 if same else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m contract", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    api = sub.add_parser("openapi", help="print the OpenAPI 3.1 document")
    api.add_argument("--profile", choices=PROFILES, default=DEFAULT_PROFILE)
    api.add_argument("--output", "-o", help="write to a file instead of stdout")
    st = sub.add_parser("schemathesis-config",
                        help="print the schemathesis config that goes with the document")
    st.add_argument("--output", "-o", help="write to a file instead of stdout")
    sub.add_parser("clauses", help="list every clause with its source")
    cov = sub.add_parser("coverage", help="the spec sections and the clauses judging each (Markdown)")
    cov.add_argument("--output", "-o", help="write to a file instead of stdout")
    idx = sub.add_parser("spec-index", help="the terms of each spec section (JSON), from the spec's text")
    idx.add_argument("--spec", required=True, help="path of DSS-Server-API-Specification.md")
    idx.add_argument("--output", "-o", help="write to a file instead of stdout")
    sub.add_parser("demo", help="build the document and round-trip a frame")
    args = parser.parse_args(argv)
    if args.cmd in ("openapi", "schemathesis-config"):
        from contract.openapi import render
        from contract.openapi.document_rules import schemathesis_config

        return _emit(render(args.profile) if args.cmd == "openapi" else schemathesis_config(), args.output)
    if args.cmd == "clauses":
        from contract.clauses import CLAUSES

        for c in CLAUSES.values():
            print(f"{c.id:20} {c.level:6} {c.profile:9} {c.subject:6} {c.source:10} {c.text}")
        return 0
    if args.cmd == "coverage":
        from contract.specification.sections import coverage_markdown

        return _emit(coverage_markdown(), args.output)
    if args.cmd == "spec-index":
        from contract.specification.index import render_index

        with open(args.spec, encoding="utf-8") as fh:
            return _emit(render_index(fh.read()), args.output)
    return _demo()


def _emit(text: str, output: str | None) -> int:
    """Write a generated document to ``output``, or to stdout without one."""
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
