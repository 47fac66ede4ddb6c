"""gs-load's meter on uploads the kit's client sends as pieces: each chunk is counted at its size, only the last one
counts as the call, and a non-final chunk's answer is held to ChunkAccepted. Before the
meter read pieces bodies, every chunk of such an upload counted as a call and as a final
chunk, so a clean multi-chunk forward-backward reported violations."""

from __future__ import annotations

import requests

from conformance.inputs import valid_bodies
from conformance.judge.answers import Judge
from conformance.judge.exchange import Exchange, final_chunk, kept_body
from conformance.judge.tally import Tally
from conformance.load import batches
from conformance.load.checked_client import kit_client
from conformance.load.jobs import JobPool, Target
from contract.routes import route
from fake_gs import FakeSettings, serve_in_background

FAST = {"poll_first_s": 0.005, "poll_cap_s": 0.02, "backoff_first_s": 0.002, "backoff_cap_s": 0.01}
CHUNK_BYTES = 512 * 1024  # over client.calls.upload.JOIN_BELOW: the chunks go as pieces


def test_a_chunked_upload_sent_as_pieces_is_metered_chunk_by_chunk() -> None:
    config = FakeSettings(port=0, log_level="warning")
    with serve_in_background(config) as url:
        target = Target(url, "DB", "PUBLIC", "cortex-training", valid_bodies.TRAINING_MODEL, embedded=True)
        pool = JobPool(target, 60.0)
        [job] = pool.open(1)
        tally, reported = Tally(), list[Exchange]()
        rl = kit_client(target, job, Judge(tally), reported.append, {**FAST, "max_chunk_bytes": CHUNK_BYTES})
        try:
            rng = batches.random.Random(3)
            prompts = batches.prompts(rng, 128, 8)
            batch = batches.rl_batch(prompts, [[1] * 8 for _ in prompts], 512)
            rl.fwd_bwd(batch)
            state = requests.get(f"{url}/_fake/state", timeout=30).json()
        finally:
            rl.shutdown()
            assert pool.cancel_all() == []
            pool.close()
    chunks = [ex for ex in reported if ex.name == "forward_backward"]
    frame_bytes = batch["batch"]["input_ids"].numel() * 8
    assert len(chunks) >= 3, "the batch must go as several chunks for this test to mean anything"
    assert tally.violations == {}, tally.examples
    assert tally.calls["forward_backward"] == {"attempted": 1, "accepted": 1}
    assert all(ex.sent > CHUNK_BYTES // 2 for ex in chunks[:-1])
    assert tally.sent["POST forward_backward"] > frame_bytes
    assert state["requests"]["executed_by_op"].get("forward_backward") == 1


def test_the_meter_keeps_a_pieces_body_only_up_to_its_header() -> None:
    from client.calls.upload import split_frame
    from client.rest import frame_source

    payload = {"input_ids": batches.rl_batch([[1, 2]], [[3]], 4)["batch"]["input_ids"].repeat(60_000, 1)}
    sent = split_frame(frame_source(payload), max_bytes=CHUNK_BYTES, operation="forward_backward",
                       force_chunk=True)
    chunked = route("forward_backward")
    kept = [kept_body(body) for body in sent]
    assert [size for _, size in kept] == [len(body) for body in sent]
    pieces = [head for body, (head, _) in zip(sent, kept, strict=True) if not isinstance(body, bytes)]
    assert len(pieces) >= 2 and all(head is not None and len(head) < 4096 for head in pieces)
    assert [final_chunk(chunked, head) for head, _ in kept] == [False] * (len(sent) - 1) + [True]
