"""Parity tapes keep what a replay needs to send every request again: big bodies out of line
(each distinct body once, within a budget), or their skeleton, rebuilt with seeded values;
an exchange that cannot be sent marks what depends on it instead of a cascade of
divergences; and the matrix counts every operation."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from parity_helpers import TOKEN, RawJob, assert_self_parity, big_chunk, replay

from conformance.judging import frames
from conformance.parity import matrix
from conformance.parity.cli import main as parity_main
from conformance.parity.rebuild import rebuild_frame
from contract import wire
from contract.tape import Exchange, TapeWriter, merge_parts, read_tape, sink_of
from contract.tape.frame_stream import FrameScan
from contract.tape.skeleton import skeleton_tensors
from fake_gs import FakeSettings, serve_in_background


def _recording_fake(tape: Path, **settings: object) -> FakeSettings:
    return FakeSettings(port=0, tokens=(TOKEN,), record=str(tape), log_level="warning", **settings)  # type: ignore[arg-type]


def _kinds(tape: Path) -> list[str]:
    return [x["kind"] for x in read_tape(str(tape))]


def test_the_same_big_chunk_sent_twice_is_stored_once(tmp_path: Path) -> None:
    tape = tmp_path / "twice.gsrec"
    chunk = big_chunk(6, "group-sent-twice")
    with serve_in_background(_recording_fake(tape)) as base:
        job = RawJob(base)
        first, again = job.forward_backward(chunk), job.forward_backward(chunk)
    assert first["request_id"] == again["request_id"]  # the final chunk repeated: one execution
    lines = read_tape(str(tape))
    sent = [x for x in lines if x["kind"] == "exchange" and x["request"]["route"] == "forward_backward"]
    assert [x["request"]["body"].get("blob") for x in sent] == [True, True]
    assert _kinds(tape).count("blob") == 1 and tape.stat().st_size < 1.5 * len(chunk) * 4 / 3
    assert lines[-1]["bodies"]["stored"] == 2 and lines[-1]["bodies"]["blobs"] == 1
    assert_self_parity(replay(tape))


def test_a_spent_budget_warns_once_and_keeps_skeletons(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tape = tmp_path / "budget.gsrec"
    with caplog.at_level(logging.WARNING, logger="fake_gs"), \
            serve_in_background(_recording_fake(tape, record_budget_mib=3)) as base:
        job = RawJob(base)
        for n in range(3):
            assert job.forward_backward(big_chunk(2, f"group-{n}", seed=n))["status"] == "done"
    warnings = [r.getMessage() for r in caplog.records if "budget" in r.getMessage()]
    assert len(warnings) == 1 and "--record-budget-mib" in warnings[0] and "--record-bodies outline" in warnings[0]
    bodies = read_tape(str(tape))[-1]["bodies"]
    assert bodies["stored"] == 1 and bodies["rebuilt"] == 2 and bodies["over_budget_at"], bodies
    rep = replay(tape)
    assert_self_parity(rep)
    assert rep.rebuilt == 2


def test_a_skeleton_rebuilds_the_header_exactly_and_values_in_range() -> None:
    import torch

    obj: dict[str, Any] = {"args": [], "kwargs": {
        "input_ids": torch.randint(3, 90, (4, 33)), "mask": torch.ones(4, 33, dtype=torch.bool),
        "adv": torch.randn(4, 33), "low": torch.randn(5).to(torch.bfloat16),
        "odd": torch.tensor([1.0, float("nan"), float("-inf"), 2.0]).half(), "scalar": torch.tensor(3.5),
        "same": [torch.zeros(2), torch.zeros(2), 7], "empty": torch.zeros(0, 3)}}
    frame = wire.dumps(obj, {"note": "op metadata"})
    scan = FrameScan()
    for i in range(0, len(frame), 7):  # items cut across pieces
        scan.feed(frame[i:i + 7])
    skeleton = scan.skeleton()
    assert skeleton is not None and len(json.dumps(skeleton)) < 2000
    rebuilt = rebuild_frame(skeleton, "seed", len(frame))
    header = skeleton_tensors(skeleton)[0]
    assert len(rebuilt) == len(frame) and rebuilt[:len(header)] == frame[:len(header)]
    back = wire.loads(rebuilt)["kwargs"]
    assert int(back["input_ids"].min()) >= 3 and int(back["input_ids"].max()) <= 89
    assert back["mask"].all() and back["same"][0].eq(0).all() and back["same"][2] == 7
    assert float(obj["kwargs"]["adv"].min()) <= float(back["adv"].min()) <= float(back["adv"].max()) <= float(obj["kwargs"]["adv"].max())
    odd = [float(x) for x in back["odd"]]
    assert {str(x) for x in odd if not math.isfinite(x)} == {"nan", "-inf"} and 1.0 <= max(filter(math.isfinite, odd)) <= 2.0
    assert float(back["scalar"]) == 3.5 and tuple(back["empty"].shape) == (0, 3)
    assert rebuild_frame(skeleton, "seed", len(frame)) == rebuilt  # seeded: every replay sends the same


def test_a_hand_built_frame_of_many_tensors_is_a_small_skeleton() -> None:
    """A frame listing its tensors in tree order (not the codec's), 5,000 alike: the run is
    folded, and the rebuild is the recorded frame byte for byte (its values are constant)."""
    n = 5000
    frame = frames.build_frame(["l", [["t", str(i)] for i in range(n)]],
                               [frames.RawTensor(str(i), "U8", (1,), b"\x01") for i in range(n)])
    scan = FrameScan()
    scan.feed(frame)
    skeleton = scan.skeleton()
    assert skeleton is not None and skeleton.get("order") == "tree" and len(json.dumps(skeleton)) < 300
    assert rebuild_frame(skeleton, "x", len(frame)) == frame


def test_an_exchange_that_cannot_be_sent_skips_what_depends_on_it(tmp_path: Path) -> None:
    """Without its bytes (its blob dropped, as a scrub pass might), the final chunk is
    skipped for lack of bytes and its polls after it, named by number: no divergence."""
    tape = tmp_path / "lost.gsrec"
    with serve_in_background(_recording_fake(tape)) as base:
        RawJob(base).forward_backward(big_chunk(2, "group-lost"))
    lines = [x for x in read_tape(str(tape)) if x["kind"] != "blob"]
    tape.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rep = replay(tape)
    assert rep.ok
    lost = next(r for r in rep.results if r.route == "forward_backward")
    polls = [r for r in rep.results if r.route == "get_request"]
    assert lost.skip_kind == "bytes" and "not kept" in str(lost.skipped)
    assert polls and all(r.skip_kind == "after" and (r.skipped or "").startswith(f"after #{lost.seq}:") for r in polls)


def test_the_matrix_counts_every_operation_and_lists_the_unrecorded(tmp_path: Path) -> None:
    tape = tmp_path / "m.gsrec"
    with serve_in_background(_recording_fake(tape)) as base:
        RawJob(base).forward_backward(big_chunk(0.2, "group-m"))
    (tmp_path / "out").mkdir()
    assert parity_main([str(tape), "--quiet", "--html", str(tmp_path / "out" / "r.html")]) == 0
    md = (tmp_path / "out" / "r.matrix.md").read_text()
    assert "| `forward_backward` | current | 1 | 1 | 1 | 0 | 0 | 0 |" in md
    assert "| `generate` | current | 0 | 0 | 0 | 0 | 0 | 0 | never recorded |" in md
    assert "recorded 20" in md and "by fake-gs against the fake (" in md
    assert "never recorded" in (tmp_path / "out" / "r.matrix.html").read_text()
    assert "Parity matrix" in (tmp_path / "out" / "r.html").read_text()
    rep = replay(tape)
    table = matrix.rows(rep)
    assert sum(row.counts["recorded"] for row in table) == len(rep.results)


#: A path of the service (a replay refuses a tape whose paths are not: contract.tape.bounds).
SERVICE_PATH = "/api/v2/databases/DB/schemas/PUBLIC/ep/x"


def test_worker_parts_keep_each_blob_once(tmp_path: Path) -> None:
    chunk = big_chunk(0.5, "group-parts")
    parts = []
    for worker in ("gw0", "gw1"):
        part = str(tmp_path / f"run.gsrec.{worker}.part")
        writer = TapeWriter(part, "gs-conformance", tokens=(TOKEN,))
        writer.record(Exchange("POST", SERVICE_PATH, [], {"content-type": "application/octet-stream"},
                               writer.request_sink(chunk), 200, {}, sink_of(b"{}"), 0.0, 0.001))
        writer.close()
        parts.append(part)
    merge_parts(str(tmp_path / "run.gsrec"), parts)
    lines = read_tape(str(tmp_path / "run.gsrec"))
    assert [x["kind"] for x in lines].count("blob") == 1
    assert lines[-1]["bodies"]["stored"] == 2 and lines[-1]["bodies"]["blobs"] == 1


def test_a_big_body_holding_a_token_is_withheld_not_stored(tmp_path: Path) -> None:
    import torch

    tape = tmp_path / "secret.gsrec"
    data = torch.randint(0, 255, (1 << 20,), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    data[5000:5000 + len(TOKEN)] = torch.tensor(list(TOKEN.encode()), dtype=torch.uint8)
    writer = TapeWriter(str(tape), "test", tokens=(TOKEN,))
    writer.record(Exchange("POST", SERVICE_PATH, [], {}, writer.request_sink(wire.dumps({"blob": data})), 200, {},
                           sink_of(b"{}"), 0.0, 0.001))
    writer.close()
    assert TOKEN not in tape.read_text() and "blob" not in _kinds(tape)
    body = read_tape(str(tape))[1]["request"]["body"]
    assert body["withheld"] and "frame" in body["rebuild"]  # its skeleton holds no tensor byte


def test_version_1_tapes_are_still_read(tmp_path: Path) -> None:
    tape = tmp_path / "v1.gsrec"
    tape.write_text(json.dumps({"kind": "meta", "format": "gs-parity-tape", "version": 1, "source": "x"}) + "\n"
                    + json.dumps({"kind": "end", "seconds": 0, "exchanges": 0}) + "\n")
    assert len(read_tape(str(tape))) == 2
