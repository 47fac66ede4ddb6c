"""One copy of the frame on each side of a big upload, measured as multiples of
the bytes sent: the kit's client holds nothing beyond the batch it was given, the fake
holds the frame once (its group buffer, decoded in place). The fake runs as a subprocess
so its RSS is its own; the figures at 64 and 512 MiB: ``benchmarks/bench_upload.py``."""

from __future__ import annotations

import gc

import psutil
import torch
from hostile_attacks import MiB
from stress_helpers import PeakSampler, fake_process, job_body, rest_client

FRAME_MIB = 96


def test_a_big_upload_holds_one_copy_of_the_frame_on_each_side() -> None:
    with fake_process() as fake:
        client = rest_client(fake.base_url, max_chunk_bytes=24 * MiB, call_timeout_s=300.0, read_timeout_s=300.0)
        body = job_body(seed=2)
        body["sub_job_configs"][0]["training_config"]["max_seq_len"] = 65536
        job = client.create_job(body)["job_id"]
        client.wait_running(job)
        warm = {"args": [], "kwargs": {"input_ids": torch.ones(2, 8, dtype=torch.int64)}}
        client.wait(job, client.forward_backward(job, warm)["request_id"])
        batch = {"args": [], "kwargs": {"input_ids": torch.ones(FRAME_MIB * 16, 8192, dtype=torch.int64)}}
        gc.collect()
        me = psutil.Process()
        client_before, fake_before = me.memory_info().rss, fake.rss()
        with PeakSampler(me.pid, every_s=0.002) as mine, PeakSampler(fake.pid, every_s=0.002) as theirs:
            answer = client.forward_backward(job, batch)
            assert "avg_loss" in client.wait(job, answer["request_id"])
        client.close()
    frame = FRAME_MIB * MiB
    assert (mine.peak - client_before) / frame < 0.3, "the client sends the batch's own bytes, no frame copy"
    assert (theirs.peak - fake_before) / frame < 1.3, "the fake holds the frame once"
