"""The client's own failures are typed: nested answers, ids a URL cannot carry,
oversize answers; and every path segment is encoded so no id is rewritten on the way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from client_loopback import FAST, Reply, loopback

from client.config import ClientConfig
from client.errors import (
    AnswerTooLarge,
    CortexError,
    CortexHTTPError,
    InvalidArgument,
    ProtocolError,
)
from client.rest import CortexRestClient
from contract.errors import error_body


def _rest(url: str, **cfg: Any) -> CortexRestClient:
    return CortexRestClient(ClientConfig(base_url=url, database="DB", schema="SC", **{**FAST, "retries": 1, **cfg}),
                            sleep=lambda s: None)


NESTED = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("status", [200, 400])
def test_a_deeply_nested_answer_is_a_typed_error(status: int) -> None:
    with loopback(lambda s: Reply(status, NESTED)) as srv, pytest.raises(CortexError) as info:
        _rest(srv.url).get_job("j1")
    assert isinstance(info.value, ProtocolError if status == 200 else CortexHTTPError)


def test_an_id_that_is_not_utf8_is_a_typed_error_before_any_request() -> None:
    with loopback(lambda s: Reply(200, {})) as srv:
        client = _rest(srv.url)
        for call in (lambda: client.delete_checkpoint("j1", "\ud800"),
                     lambda: client.export_checkpoint("j1", "a\udfffb")):
            with pytest.raises(InvalidArgument, match="UTF-8"):
                call()
        assert srv.seen == []


@pytest.mark.parametrize(("cid", "sent"), [(".", "."), ("..", ".."), ("a/b", "a%2Fb"), ("a b", "a%20b")])
def test_every_id_travels_as_one_encoded_segment(cid: str, sent: str) -> None:
    """A '..' id is not collapsed into DELETE /{job}/ by URL normalisation: the client
    encodes its dots, so the HTTP stack's dot-segment removal leaves the segment alone."""
    with loopback(lambda s: Reply(404, error_body("checkpoint_not_found", "no"))) as srv, \
            pytest.raises(CortexHTTPError):
        _rest(srv.url).delete_checkpoint("j1", cid)
    raw = srv.seen[0].path
    assert raw.endswith(f"/j1/checkpoints/{sent}"), raw


CAP = 64 * 1024  # a small max_answer_bytes: the bound under test, not its size


@pytest.mark.parametrize("status", [200, 503])
def test_an_answer_declaring_more_than_the_cap_is_refused_unread(status: int) -> None:
    """The server declares 1 GiB and sends a few bytes: reading would wait for the rest
    (a read time-out, then resends); refusing on the declared length raises at once."""
    reply = Reply(status, {"job_id": "j1"}, declared_length=1024**3)
    with loopback(lambda s: reply) as srv, pytest.raises(AnswerTooLarge, match="declares") as info:
        _rest(srv.url, max_answer_bytes=CAP).get_job("j1")
    assert isinstance(info.value, ProtocolError)
    assert (info.value.route, info.value.status) == ("get_job", status)
    assert len(srv.seen) == 1  # not resent: more tries would only be refused again


class Endless:
    """A chunked body that never ends on its own: 16 KiB pieces, counted as they go out."""

    PIECE = b"x" * 16 * 1024
    #: The most it ever sends, far above the cap plus what the sockets can buffer.
    BOUND = 4096

    def __init__(self) -> None:
        self.sent = 0

    def __iter__(self) -> Iterator[bytes]:
        yield b'{"job_id": "j1", "pad": "'
        while self.sent < self.BOUND:
            self.sent += 1
            yield self.PIECE


def test_an_answer_crossing_the_cap_is_cut_off_as_it_arrives() -> None:
    """No Content-Length, a body without end: the client stops reading once the cap is
    crossed and hangs up, so the server is cut off long before its 64 MiB."""
    body = Endless()
    with loopback(lambda s: Reply(200, pieces=body)) as srv, \
            pytest.raises(AnswerTooLarge, match=f"more than {CAP} bytes") as info:
        _rest(srv.url, max_answer_bytes=CAP).get_job("j1")
    assert info.value.route == "get_job"
    assert body.sent < Endless.BOUND, "the client read the whole endless body"


def test_an_answer_within_the_cap_is_read_whole() -> None:
    """Exactly the cap is fine, chunked or declared."""
    pad = "x" * (CAP - len(b'{"job_id": "j1", "pad": ""}'))
    answer = {"job_id": "j1", "pad": pad}
    assert len(json.dumps(answer)) == CAP
    with loopback(lambda s: Reply(200, answer)) as srv:
        assert _rest(srv.url, max_answer_bytes=CAP).get_job("j1") == answer
    encoded = json.dumps(answer).encode()
    pieces = [encoded[i:i + 1000] for i in range(0, len(encoded), 1000)]
    with loopback(lambda s: Reply(200, pieces=pieces)) as srv:
        assert _rest(srv.url, max_answer_bytes=CAP).get_job("j1") == answer


def test_an_error_keeps_its_own_fields_and_refuses_unknown_ones() -> None:
    """One constructor serves every error: a subclass's fields are kept (None when not
    given), a required one must be given, a misspelt one is a TypeError, not lost."""
    from client.errors import AmbiguousOutcome, JobFailed, PromptTooLong

    err = AmbiguousOutcome("step may have run", attempt=2, how_to_check="global_steps",
                           route="step", status=504)
    assert (err.attempt, err.how_to_check, err.idempotency_key, err.status) == (2, "global_steps", None, 504)
    assert "[attempt 2; check before calling again: global_steps]" in str(err)
    assert JobFailed("ended", state="failed").reason is None
    with pytest.raises(TypeError, match="needs the keyword arguments"):
        AmbiguousOutcome("x", attempt=1)
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        PromptTooLong("x", index=0, length=9, max_seq_len=8, lenght=9)
