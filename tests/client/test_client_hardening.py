"""The client's own failures are typed (issue 12): nested answers, ids a URL cannot carry,
oversize answers; and every path segment is encoded so no id is rewritten on the way."""

from __future__ import annotations

from typing import Any

import pytest
from client_loopback import FAST, Reply, loopback

from client.config import ClientConfig
from client.errors import CortexError, CortexHTTPError, InvalidArgument, ProtocolError
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


def test_an_oversize_answer_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import client.http as http

    monkeypatch.setattr(http, "MAX_ANSWER_BYTES", 1000)
    with loopback(lambda s: Reply(200, {"job_id": "j1", "pad": "x" * 5000})) as srv, \
            pytest.raises(ProtocolError, match="over the client's"):
        _rest(srv.url).get_job("j1")
