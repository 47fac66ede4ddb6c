"""A tape is untrusted input: gs-parity sends a replayed request only to
``--url``'s host and port, starts its replay fake on loopback with fresh random tokens and
reads no file a tape names, and refuses, naming the line, every tape whose decoding would
cost more than a recording can hold (each bomb here is a few KB that would expand to
hundreds of MiB or more); a hostile server's endless answer costs what the recorded answer's
size allows. Peaks are measured with tracemalloc, far below each bomb's expansion.
"""

from __future__ import annotations

import base64
import gzip
import json
import socket
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hostile_server import endless_json, hostile

from conformance.parity import cli
from conformance.parity.targets import EmbeddedTargets
from contract.limits import MiB
from contract.tape import bounds, read_tape

PAT = "pat-untrusted-tape-3f9a1c77-never-elsewhere"
PREFIX = "/api/v2/databases/DB/schemas/PUBLIC/ep"
GiB = 1024 * MiB


def _exchange(path: str, body: dict[str, Any] | None = None, seq: int = 1,
              answer_bytes: int = 0) -> dict[str, Any]:
    answer = {"bytes": answer_bytes, "json": {}} if answer_bytes else None
    return {"kind": "exchange", "seq": seq, "server": "target", "group": "g", "t": 0.0, "ms": 1.0,
            "request": {"method": "POST" if body else "GET", "path": path, "prefix": None, "route": None,
                        "template": None, "query": [], "headers": {"authorization": "Bearer <token-1>"},
                        "body": body},
            "response": {"status": 200, "headers": {}, "body": answer}}


def _tape(tmp_path: Path, *lines: dict[str, Any], settings: dict[str, Any] | None = None,
          name: str = "t.gsrec") -> Path:
    head = [{"kind": "meta", "format": "gs-parity-tape", "version": 2, "source": "gs-conformance"},
            {"kind": "server", "name": "target", "embedded": True, "settings": settings or {}}]
    path = tmp_path / name
    text = "".join(json.dumps(line) + "\n" for line in [*head, *lines, {"kind": "end", "seconds": 1.0}])
    path.write_text(text)
    return path


def _z64(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data, 9)).decode()


@contextmanager
def _listener() -> Iterator[tuple[int, list[bytes]]]:
    """A loopback port that records every byte anyone sends it (an attacker's server)."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.settimeout(0.05)
    got: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            conn.settimeout(1.0)
            try:
                got.append(conn.recv(65536))
            except OSError:
                got.append(b"<connected>")
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], got
    finally:
        stop.set()
        thread.join(2)
        sock.close()


def _peak(fn: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- where a replayed request may go ----------------------------------------------------------

HOSTILE_PATHS = ["@127.0.0.1:{port}/x", ".attacker.example/", ":{port}/", "@attacker.example/",
                 "//127.0.0.1:{port}/x", "http://127.0.0.1:{port}/x", "\\\\127.0.0.1:{port}\\x",
                 "/\\127.0.0.1:{port}/x", "/_nowhere/x", f"{PREFIX}/jobs x"]


@pytest.mark.parametrize("hostile_path", HOSTILE_PATHS)
def test_a_recorded_path_off_the_target_is_refused_and_never_sent(
        tmp_path: Path, hostile_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    with _listener() as (target_port, to_target), _listener() as (other_port, to_other):
        path = hostile_path.format(port=other_port)
        tape = _tape(tmp_path, _exchange(f"{PREFIX}/jobs", seq=1), _exchange(path, seq=2))
        code = _replay_by_url(tape, target_port)
    err = capsys.readouterr().err
    assert code == cli.EXIT_ERROR, err
    assert f"{tape}:4:" in err and "exchange #2" in err and "refused" in err, err
    assert not to_other and not to_target, (to_other, to_target)  # nothing sent: not even the good one


def _replay_by_url(tape: Path, port: int) -> int:
    """gs-parity TAPE --url (the probe skipped: nothing listens but the recorder)."""
    from unittest import mock

    with mock.patch("conformance.target.probe"):
        return cli.main([str(tape), "--url", f"http://127.0.0.1:{port}", "--token", PAT, "-q"])


def test_a_replayed_url_is_checked_against_the_target_before_it_is_sent() -> None:
    from conformance.parity.replay import _on_target

    assert _on_target("http://h:1", "http://h:1/api/x") == "http://h:1/api/x"
    for url in ("http://h:1@evil:2/x", "http://h:2/x", "https://h:1/x", "http://evil/x"):
        with pytest.raises(bounds.TapeRefused):
            _on_target("http://h:1", url)


# --- the replay fake ----------------------------------------------------------------------------


def test_the_replay_fake_binds_loopback_with_random_tokens_and_reads_no_file_the_tape_names(
        tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text("- {route: get_job, status: 500, body: SECRET-LINE-OF-A-USER-FILE}\n")
    info = {"embedded": True, "settings": {"host": "127.0.0.2", "faults": str(secret), "tls": True,
                                           "record": str(tmp_path / "written.gsrec"), "token_count": 2,
                                           "worker_threads": 100_000}}
    first, second = EmbeddedTargets({}), EmbeddedTargets({})
    try:
        target = first.get("target", info)
        again = second.get("target", info)
    finally:
        first.close()
        second.close()
    assert target.base_url.startswith("http://127.0.0.1:"), target.base_url
    tokens = {*target.tokens, target.admin_token}
    assert len(tokens) == 3 and not tokens & {*again.tokens, again.admin_token}  # fresh each replay
    assert not tokens & {"gs-parity-token-1", "gs-parity-token-2", "gs-parity-admin-token"}
    note = " ".join(first.notes)
    assert "faults" in note and "reads no file a tape names" in note and "host" in note and "tls" in note
    assert "SECRET-LINE" not in note and not (tmp_path / "written.gsrec").exists()


# --- bombs ----------------------------------------------------------------------------------------


def _refused(tape: Path, *words: str) -> int:
    """read_tape refuses ``tape`` naming a line and ``words``; the peak of trying, bytes."""
    def read() -> None:
        with pytest.raises(bounds.TapeRefused) as info:
            read_tape(str(tape))
        text = str(info.value)
        assert f"{tape}:" in text and all(w in text for w in words), text

    return _peak(read)


@pytest.mark.parametrize("size", [int(1.5 * GiB), 10**15])
def test_a_fill_bigger_than_any_request_is_refused_before_it_is_made(tmp_path: Path, size: int) -> None:
    tape = _tape(tmp_path, _exchange(f"{PREFIX}/jobs", {"bytes": size, "sha256": "0" * 64, "fill": 0}))
    assert tape.stat().st_size < 2048
    assert _refused(tape, "exchange #1", "more than a replay sends") < 4 * MiB


def test_a_zlib_body_expanding_past_its_declared_size_is_refused_while_it_inflates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bomb = _z64(bytes(64 * MiB))  # ~90 KB of base64 declaring 100 bytes
    tape = _tape(tmp_path, _exchange(f"{PREFIX}/jobs", {"bytes": 100, "sha256": "0" * 64, "z64": bomb}))
    peak = _peak(lambda: cli.main([str(tape), "-q"]))
    err = capsys.readouterr().err
    assert "expand past the 100 bytes it declares" in err and f"{tape}:3" in err, err
    assert peak < 8 * MiB, peak / MiB


def test_a_blob_declaring_gigabytes_is_refused(tmp_path: Path) -> None:
    blob = {"kind": "blob", "sha256": "a" * 64, "bytes": 2 * GiB, "z64": _z64(bytes(MiB))}
    tape = _tape(tmp_path, blob)
    assert _refused(tape, "blob", "more than a replay sends") < 4 * MiB


def _skeleton_body(tree: Any, declared: int) -> dict[str, Any]:
    skel = {"op": None, "v": 1, "tree": tree, "extra": []}
    return {"bytes": declared, "sha256": "0" * 64, "rebuild": {"frame": skel}}


@pytest.mark.parametrize(("tree", "words"), [
    ({"$t": "F32", "shape": [1 << 28, 1 << 28]}, "bytes of tensors"),                      # one huge tensor
    (["l", [{"$rep": 10**9, "node": {"$t": "U8", "shape": [1]}}]], "tree nodes"),          # a long run
    (["l", [{"$rep": 1000, "node": ["l", [{"$rep": 1000, "node": ["l", [
        {"$rep": 1000, "node": ["j", 0]}]]}]]}]], "tree nodes"),                             # nested runs
    (["l", [{"$rep": 1, "node": ["l", [{"$rep": 1, "node": ["l", []]}]]}] * 1], None),     # fine: small
])
def test_a_skeleton_is_counted_before_it_is_unfolded(tmp_path: Path, tree: Any, words: str | None) -> None:
    tape = _tape(tmp_path, _exchange(f"{PREFIX}/jobs", _skeleton_body(tree, 1000)))
    assert tape.stat().st_size < 1024
    if words is None:
        read_tape(str(tape))
        return
    assert _refused(tape, "exchange #1", words) < 4 * MiB


def test_a_skeleton_smaller_than_its_declared_size_is_refused_before_values_are_made(tmp_path: Path) -> None:
    """Declared 1 MiB (within every cap), the skeleton says 64 KiB: refused on replay,
    before any value is generated."""
    body = _skeleton_body(["l", [{"$t": "U8", "shape": [65536], "v": [0, 9]}]], MiB)
    tape = _tape(tmp_path, _exchange(f"{PREFIX}/jobs", body))
    code = cli.main([str(tape), "-q"])
    assert code == cli.EXIT_ERROR


def test_a_gz_tape_of_one_endless_line_is_refused_at_the_line_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "MAX_LINE_CHARS", MiB)
    path = tmp_path / "line.gsrec.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"kind": "meta", "format": "gs-parity-tape", "version": 2}) + "\n")
        f.write('{"kind": "blob", "z64": "')
        for _ in range(64):
            f.write("A" * MiB)  # 64 MiB of one line, ~64 KB of gzip
    assert path.stat().st_size < 256 * 1024
    assert _refused(path, ":2:", "line longer than") < 8 * MiB


def test_a_gz_tape_inflating_past_its_bound_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "INFLATION_FREE_CHARS", MiB)
    path = tmp_path / "many.gsrec.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"kind": "meta", "format": "gs-parity-tape", "version": 2}) + "\n")
        for i in range(32):
            f.write(json.dumps({"kind": "blob", "sha256": str(i), "bytes": 1, "z64": "A" * MiB}) + "\n")
    assert _refused(path, "decompression bomb") < 8 * MiB


def test_a_line_of_countless_json_values_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "values.gsrec.gz"
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"kind": "meta", "format": "gs-parity-tape", "version": 2}) + "\n")
        f.write('{"kind": "end", "x": [' + "[]," * (4 * 1024 * 1024) + "[]]}\n")
    assert _refused(path, ":2:", "JSON values") < 32 * MiB


def test_a_line_nested_past_the_parser_is_refused_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "deep.gsrec"
    path.write_text(json.dumps({"kind": "meta", "format": "gs-parity-tape", "version": 2}) + "\n"
                    + '{"kind": "end", "x": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    _refused(path, ":2:", "nested too deep")


# --- a hostile server's endless answer --------------------------------------------------------------


def test_an_endless_answer_costs_what_the_recorded_answer_allows(tmp_path: Path) -> None:
    """The recorded answer was 100 bytes: the replay reads twice that plus the margin, then
    hangs up (the client's 1 GiB cap would have let it read 1 GiB)."""
    from conformance.parity.replay import Replayer
    from conformance.parity.targets import ReplayTarget

    with hostile(lambda request: endless_json(limit_bytes=256 * MiB)) as srv:
        replayer = Replayer([])
        target = ReplayTarget(srv.url, (PAT,), None)
        recorded = {"status": 200, "headers": {}, "body": {"bytes": 100, "json": {}}}
        got: dict[str, Any] = {}
        peak = _peak(lambda: got.update(replayer.send(target, {"method": "GET", "path": f"{PREFIX}/jobs",
                                                                  "headers": {}}, None, recorded=recorded)))
        (end,) = srv.settled()
    cap = bounds.answer_cap(bounds.answer_bytes(recorded))
    assert cap == 200 + bounds.ANSWER_MARGIN_BYTES
    assert got["status"] == 0 and "AnswerTooBig" in got["error"], got
    assert end.cut and end.bytes < cap + 8 * MiB, end.bytes / MiB  # the cap + socket buffers
    assert peak < cap + 8 * MiB, peak / MiB
