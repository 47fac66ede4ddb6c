"""The tokenizer directory loads offline and its ids are the tiny engine's ids.

A recipe loads its tokenizer with ``AutoTokenizer.from_pretrained(DIR)``; the ids it
produces must drive ``--engine tiny``: generate from them, decode what comes back, and
train on them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

from test_tiny_engine import sub_jobs  # noqa: E402

from contract.models import GenerateRequest  # noqa: E402
from fake_gs.cli import main as fake_gs_main  # noqa: E402
from fake_gs.engines.tiny import TinyEngine  # noqa: E402
from fake_gs.engines.tiny.byte_tokenizer import BOS_ID, EOS_ID, PAD_ID, ByteTokenizer  # noqa: E402
from fake_gs.engines.tiny.tokenizer_dir import TokenizerUnavailable, write_tokenizer_dir  # noqa: E402

TEXTS = ["hello", "héllo wörld  \n\ttabs", "日本語 ok", ""]


@pytest.fixture
def tok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    assert fake_gs_main(["tokenizer", str(tmp_path / "tok")]) == 0
    return transformers.AutoTokenizer.from_pretrained(str(tmp_path / "tok"))


@pytest.fixture
def engine() -> TinyEngine:
    eng = TinyEngine(seed=7)
    eng.create_job("job", sub_jobs(lr=1e-2), seed=11)
    return eng


def chat_ids(tok: Any, messages: list[dict[str, str]]) -> list[int]:
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tok(text, add_special_tokens=False)["input_ids"])


def test_text_round_trips_with_the_engine_ids(tok: Any) -> None:
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (BOS_ID, EOS_ID, PAD_ID)
    assert len(tok) == ByteTokenizer.vocab_size
    byte_tok = ByteTokenizer()
    for text in TEXTS:
        ids = tok(text)["input_ids"]
        assert ids == byte_tok.encode(text), text
        assert tok.decode(ids, skip_special_tokens=True) == text == byte_tok.decode(ids)
    # As with any HF tokenizer, a special token's spelling in text is that token.
    assert tok("a<|eos|>")["input_ids"] == [BOS_ID, ord("a"), EOS_ID]


def test_chat_turns_generate_and_decode_through_the_engine(tok: Any, engine: TinyEngine) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi ✓"}]
    ids = chat_ids(tok, messages)
    assert ids[0] == BOS_ID and ids.count(EOS_ID) == 2
    assert tok.decode(ids, skip_special_tokens=True) == "<|system|>\nbe brief<|user|>\nhi ✓<|assistant|>\n"
    params = {"max_tokens": 24, "temperature": 1.0, "seed": 3, "stop_token_ids": [EOS_ID]}
    (result,) = engine.generate("job", GenerateRequest(prompts=[ids], sampling_params=params))
    out = [int(t) for t in result["token_ids"].tolist()]
    assert 1 <= len(out) <= 24
    assert tok.decode(out, skip_special_tokens=True) == result["text"]
    if result["finish_reason"] == "stop":
        assert out[-1] == EOS_ID  # the turn ends where the chat template ends turns
    reply = tok.decode(out, skip_special_tokens=True)
    follow_up = chat_ids(tok, [*messages, {"role": "assistant", "content": reply},
                               {"role": "user", "content": "again"}])
    assert follow_up[: len(ids)] == ids  # the next turn extends the same token history


def test_the_engine_trains_on_tokenizer_ids(tok: Any, engine: TinyEngine) -> None:
    convo = [{"role": "user", "content": "say ok"}, {"role": "assistant", "content": "ok ok ok"}]
    text = tok.apply_chat_template(convo, tokenize=False)
    enc = tok([text, text[:-4]], add_special_tokens=False, padding=True, return_tensors="pt")
    labels = enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)
    body = {"args": [], "kwargs": {"input_ids": enc["input_ids"],
                                   "attention_mask": enc["attention_mask"], "labels": labels}}
    losses = []
    for _ in range(6):
        losses.append(engine.forward_backward("job", body)["avg_loss"])
        engine.step("job", None)
    assert losses[-1] < losses[0] * 0.7, losses


def test_without_the_extra_the_command_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # as if not installed
    with pytest.raises(TokenizerUnavailable, match=r"\[tokenizer\]"):
        write_tokenizer_dir(tmp_path / "x")
    assert fake_gs_main(["tokenizer", str(tmp_path / "y")]) == 2
    assert "tokenizer" in capsys.readouterr().err
