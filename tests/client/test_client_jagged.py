"""verl's nested (torch.jagged) prompts/responses made dense before encoding (client.transports.jagged),
and every nested tensor whose layout the client cannot know refused before a byte is sent."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from client.errors import NestedTensorRefused  # noqa: E402
from client.transports.cortex import rpc_body  # noqa: E402
from client.transports.jagged import dense_batch  # noqa: E402

PROMPTS = [[5, 6, 7], [8]]
RESPONSES = [[1], [2, 3, 4, 9]]


def jagged(rows: list[list[int]], dtype: Any = torch.long) -> Any:
    return torch.nested.nested_tensor([torch.tensor(r, dtype=dtype) for r in rows], layout=torch.jagged)


def input_ids(pad: int = 0) -> Any:
    """The adapter's dense input_ids: prompts left-padded to 3, responses right-padded to 4."""
    return torch.tensor([[5, 6, 7, 1, pad, pad, pad], [pad, pad, 8, 2, 3, 4, 9]])


def test_prompts_left_padded_responses_right_padded_like_input_ids() -> None:
    ids = input_ids(pad=-1)
    meta = {"pad_token_id": -1, "max_prompt_len": 3, "max_response_len": 4}
    out = dense_batch({"input_ids": ids, "prompts": jagged(PROMPTS), "responses": jagged(RESPONSES)}, meta)
    assert out["input_ids"] is ids
    assert torch.equal(out["prompts"], ids[:, :3]) and torch.equal(out["responses"], ids[:, 3:])
    assert out["prompts"].dtype == torch.long and not out["prompts"].is_nested


def test_widths_default_to_the_batch_maxima_and_meta_may_widen_them() -> None:
    out = dense_batch({"prompts": jagged(PROMPTS), "responses": jagged(RESPONSES)}, {})
    assert out["prompts"].tolist() == [[5, 6, 7], [0, 0, 8]] and out["responses"].tolist() == [[1, 0, 0, 0], [2, 3, 4, 9]]
    wide = dense_batch({"prompts": jagged(PROMPTS)}, {"max_prompt_len": 5, "pad_token_id": 9})
    assert wide["prompts"].tolist() == [[9, 9, 5, 6, 7], [9, 9, 9, 9, 8]]


def test_the_rpc_body_of_a_verl_payload_is_dense() -> None:
    body = rpc_body({"batch": {"input_ids": input_ids(), "prompts": jagged(PROMPTS), "responses": jagged(RESPONSES)},
                     "meta": {"pad_token_id": 0, "max_prompt_len": 3, "max_response_len": 4}})
    assert set(body) == {"args", "kwargs", "meta"}
    assert not any(v.is_nested for v in body["kwargs"].values())


@pytest.mark.parametrize(("batch", "meta", "field", "says"), [
    ({"attention_mask": jagged([[1, 1], [1]])}, {}, "attention_mask", "pads only a nested prompts"),
    ({"prompts": torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(1, 3)], layout=torch.jagged)}, {},
     "prompts", "token rows"),
    ({"prompts": jagged(PROMPTS)}, {"max_prompt_len": 2}, "prompts", "longest row"),
    ({"prompts": jagged(PROMPTS)}, {"pad_token_id": "x"}, "pad_token_id", "not an integer"),
    ({"input_ids": input_ids(), "prompts": jagged(PROMPTS), "responses": jagged(RESPONSES)},
     {"max_prompt_len": 3, "max_response_len": 5}, "input_ids", "as input_ids was padded"),
    ({"input_ids": input_ids()[:1], "prompts": jagged(PROMPTS)}, {}, "prompts", "rows"),
    ({"input_ids": jagged([[1, 2], [3]]), "prompts": jagged(PROMPTS)}, {}, "input_ids", "dense"),
])
def test_a_layout_the_client_cannot_know_is_refused_naming_field_and_fix(
        batch: dict[str, Any], meta: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(NestedTensorRefused, match=says) as err:
        rpc_body({"batch": batch, "meta": meta})
    assert err.value.field == field and field in str(err.value)


def test_a_refused_batch_sends_nothing(fakes: Any) -> None:
    """The refusal comes before the upload: the fake sees no forward request."""
    import requests

    from client import ClientConfig, create_client

    url = fakes.url("shape", "current")
    client = create_client(ClientConfig(base_url=url, model="Qwen/Qwen3-0.6B", poll_first_s=0.001))
    client.start()
    before = requests.get(f"{url}/_fake/state", timeout=10).json()["requests"]
    with pytest.raises(NestedTensorRefused, match="attention_mask"):
        client.fwd_no_grad({"batch": {"input_ids": input_ids(), "attention_mask": jagged([[1] * 4, [1] * 5])}})
    assert requests.get(f"{url}/_fake/state", timeout=10).json()["requests"] == before
    client.shutdown()
