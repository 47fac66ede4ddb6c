"""Numbers no field can use: every numeric field of every request body (declared fields,
open extras and pass-through dicts alike) answers 400 naming it, never a 500
(``contract.models.RequestBody``; a 4,000-digit ``optimizer.lr`` was a 500 OverflowError).
The property puts a hostile number at any number's place (or a new key's) of a valid body
of every route with a body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_gs_api import OCTET, Api, sampling_config, training_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract import wire
from contract.limits import MAX_BODY_INT, MIN_BODY_INT

Loc = tuple[str | int, ...]
MARK = "__hostile_number__"

#: route path (after the job) -> one valid JSON body ("/" is create-job).
JSON_BODIES: dict[str, dict[str, Any]] = {
    "/": {"sub_job_configs": [training_config(), sampling_config()], "experiment_name": "numbers"},
    "step": {"learning_rate": 0.001},
    "save": {"checkpoint_id": "numbers"},
    "load": {"checkpoint_id": "numbers"},
    "log-probs": {"prompts": [[1, 2, 3]], "top_k": 2},
    "operation:reset": {"operation_type": "reset-prefix-cache",
                        "payload": {"drain": True, "timeout_s": 1.5, "retry_interval_s": 0.1}},
    "operation:tail": {"operation_type": "tail-logs", "payload": {"cursor": 0, "max_lines": 5}},
    "operation:replay": {"operation_type": "bootstrap-router-replay",
                         "payload": {"source_sub_job_id": "a", "target_sub_job_id": "b", "max_cache_bytes": 64}},
    "generate-stream": {"prompts": [[1, 2]], "sampling_params": {"max_tokens": 4, "temperature": 0.5, "seed": 3}},
}
#: Numbers no field takes, as JSON text: past a double (thousands of digits, 1e309)...
PAST_A_DOUBLE = st.sampled_from(["9" * 4000, "-" + "9" * 4000, "1" + "0" * 400, "1e309", "-1e400", "123e99999"])
#: ... and, where an integer field is, past 64 bits either way.
HOSTILE_INT = st.one_of(
    PAST_A_DOUBLE,
    st.integers(min_value=MAX_BODY_INT + 1, max_value=2**200).map(str),
    st.integers(min_value=-(2**200), max_value=MIN_BODY_INT - 1).map(str),
)


def places(body: Any, loc: Loc = ()) -> list[tuple[Loc, bool]]:
    """Every number's location in ``body`` (and whether an integer field is there), and a
    new key's in each object (an open extra: any number a double holds is taken there)."""
    if isinstance(body, dict):
        found = [(loc + ("hostile_extra",), False)]
        for key, value in body.items():
            found += places(value, loc + (key,))
        return found
    if isinstance(body, list):
        return [p for i, v in enumerate(body) for p in places(v, loc + (i,))]
    return [(loc, type(body) is int)] if type(body) in (int, float) else []


def planted(body: Any, loc: Loc) -> Any:
    """``body`` with the marker at ``loc``."""
    if not loc:
        return MARK
    head, rest = loc[0], loc[1:]
    if isinstance(body, list):
        return [planted(v, rest) if i == head else v for i, v in enumerate(body)]
    return {**body, head: planted(body.get(head), rest)}


def names(where: list[str | int], loc: Loc) -> bool:
    """Does a detail's ``loc`` name ``loc``? Pydantic puts a union member's tag in between
    (``prompts.0.list[constrained-int].1``): ``loc`` is its subsequence."""
    rest = iter(where)
    return all(any(part == step for part in rest) for step in loc)


CASES = [(route, loc, integer) for route, body in JSON_BODIES.items() for loc, integer in places(body)]


@pytest.fixture(scope="module")
def job(server) -> str:
    return Api(server.base_url).running_job()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), case=st.sampled_from(CASES))
def test_a_number_no_field_can_use_is_400_naming_the_field(server, job: str, data: st.DataObject,
                                                            case: tuple[str, Loc, bool]) -> None:
    route, loc, integer = case
    number = data.draw(HOSTILE_INT if integer else PAST_A_DOUBLE, label="number")
    text = json.dumps(planted(JSON_BODIES[route], loc)).replace(json.dumps(MARK), number)
    api = Api(server.base_url)
    path = "/" if route == "/" else f"/{job}/{route.split(':')[0]}"
    headers = OCTET if route == "generate-stream" else {"Content-Type": "application/json"}
    r = api.post(path, data=text.encode(), headers=headers)
    assert r.status_code == 400, (route, loc, number[:40], r.text[:300])
    body = r.json()
    assert body["code"] == "validation_failed", body
    assert any(names(where, loc) for where in (d["loc"] for d in body["detail"])), body


@pytest.mark.parametrize("prompts", [[[1, 2**64]], [[1, -(2**63) - 1]]])
def test_a_frame_body_number_past_64_bits_is_400_naming_it(api: Api, job: str, prompts: list[list[int]]) -> None:
    """generate's object travels in a DSSST1 frame: the same rule."""
    frame = wire.dumps({"prompts": prompts, "sampling_params": {"max_tokens": 2}},
                       metadata=wire.standard_request_metadata())
    r = api.post(f"/{job}/generate", data=frame, headers=OCTET)
    assert r.status_code == 400, r.text
    assert any(names(d["loc"], ("prompts", 0, 1)) for d in r.json()["detail"]), r.text


def test_no_internal_errors(api: Api) -> None:
    assert api.state()["internal_errors"] == 0
