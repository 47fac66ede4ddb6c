"""A rogue Locust worker for the gs-load surface tests: it joins a master with no secret
(plain zmq, Locust's message format), says gs-load's hello, answers any challenge with a
guess, keeps its heartbeat, and writes every message the master sent it to a file (one
JSON line each: its type and data).

``python rogue_worker.py PORT OUT SECONDS``
"""

from __future__ import annotations

import json
import sys
import time
import uuid

import msgpack
import zmq


def main(port: int, out: str, seconds: float) -> None:
    node = f"rogue_{uuid.uuid4().hex}"
    sock = zmq.Context().socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, node.encode())
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(f"tcp://127.0.0.1:{port}")

    def send(kind: str, data: object) -> None:
        try:  # a DEALER with no master left would block: the rogue goes on listening
            sock.send(msgpack.dumps((kind, data, node)), zmq.NOBLOCK)
        except zmq.Again:
            pass

    send("client_ready", -1)
    send("gs_hello", None)
    got: list[str] = []
    deadline = time.monotonic() + seconds
    beat = 0.0
    while time.monotonic() < deadline:
        if time.monotonic() > beat:
            send("heartbeat", {"state": "ready", "current_cpu_usage": 0, "current_memory_usage": 0})
            beat = time.monotonic() + 1.0
        if sock.poll(200):
            kind, data, _ = msgpack.loads(sock.recv(), raw=False, strict_map_key=False)
            got.append(json.dumps([kind, data], default=repr))
            if kind == "gs_challenge":
                send("gs_proof", {"proof": "0" * 64})
            if kind == "quit":
                break
    with open(out, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in got))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]))
