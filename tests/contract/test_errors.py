"""The error envelope and finding a code inside gateway-wrapped bodies."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from contract.errors import (
    STATUS_OF,
    ErrorCode,
    detail_entry,
    error_body,
    error_code_of,
    find_error_code,
    is_error_envelope,
)


def test_every_code_has_a_status() -> None:
    assert set(STATUS_OF) == set(ErrorCode)
    assert all(400 <= s < 600 for s in STATUS_OF.values())
    assert STATUS_OF[ErrorCode.CHUNK_GROUP_RESTART_REQUIRED] == 409
    assert STATUS_OF[ErrorCode.PAYLOAD_TOO_LARGE] == 413


def test_envelope_shapes() -> None:
    body = error_body(ErrorCode.VALIDATION_FAILED, "bad", [detail_entry(["body", "x"], "missing")])
    assert is_error_envelope(body)
    assert body["detail"] == [{"loc": ["body", "x"], "msg": "missing", "type": "value_error"}]
    assert not is_error_envelope({"message": "no code"})
    assert not is_error_envelope({"code": "", "message": "x"})
    assert not is_error_envelope("text")


def test_every_form_spec_3_6_allows_is_an_envelope_and_has_a_code() -> None:
    """The spec's forms: an integer code, a bare detail list (loc from "body")."""
    numeric = {"message": "job not found", "code": 404}
    detail = {"detail": [{"loc": ["body", "model_name"], "msg": "required", "type": "missing"}]}
    for body, code in ((numeric, "404"), (detail, "missing"), ({"code": "job_not_found", "message": "m"}, "job_not_found")):
        assert is_error_envelope(body) and error_code_of(body) == code
    assert find_error_code(numeric) is None  # retry decisions see only string codes
    not_envelopes: list[dict[str, object]] = [
        {"code": 404}, {"message": "m", "code": True}, {"detail": []},
        {"detail": [{"msg": "no loc"}]}, {"message": "m", "code": 404, "detail": "x"}]
    for bad in not_envelopes:
        assert not is_error_envelope(bad), bad


def test_code_found_in_nested_and_wrapped_bodies() -> None:
    inner = {"code": "chunk_group_conflict", "message": "m"}
    assert find_error_code(inner) == "chunk_group_conflict"
    assert find_error_code({"error": inner}) == "chunk_group_conflict"
    assert find_error_code({"message": json.dumps(inner)}) == "chunk_group_conflict"
    assert find_error_code({"message": json.dumps({"message": json.dumps(inner)})}) == "chunk_group_conflict"
    assert find_error_code(json.dumps(inner).encode()) == "chunk_group_conflict"
    assert find_error_code("gateway said: " + json.dumps(inner)) is None  # not JSON-shaped text
    assert find_error_code({"message": "upstream: " + json.dumps(inner)}) is None
    assert find_error_code([1, {"x": {"code": "a"}}]) == "a"


@given(st.recursive(st.none() | st.integers() | st.text(max_size=20),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
                    max_leaves=30))
def test_find_error_code_never_raises(body: object) -> None:
    result = find_error_code(body)
    assert result is None or isinstance(result, str)


def test_a_bare_status_gets_the_general_code_of_that_status() -> None:
    """An injected fault that names no code answers the code whose STATUS_OF is its status."""
    from contract.errors import GENERAL_CODE_OF, STATUS_OF, general_code

    assert all(STATUS_OF[code] == status for status, code in GENERAL_CODE_OF.items())
    assert general_code(409) is ErrorCode.CONFLICT
    assert general_code(503) is ErrorCode.UNAVAILABLE
    assert general_code(418) is ErrorCode.UNAVAILABLE
