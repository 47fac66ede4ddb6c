"""Write a Hugging Face tokenizer directory whose vocabulary is the tiny engine's.

Why: recipes load their tokenizer by name (``AutoTokenizer.from_pretrained(...)``) and send
token ids; against ``--engine tiny`` those ids must be the tiny model's (UTF-8 bytes 0-255,
then pad, bos, eos) or the run means nothing, and CI has no hub to download from. Point the
recipe's tokenizer setting at the directory this writes::

    python -m fake_gs.engines.tiny.tokenizer_dir ./tiny-tokenizer        # or: fake-gs tokenizer ./tiny-tokenizer

The directory holds ``tokenizer.json`` (built with the ``tokenizers`` library: the
``tokenizer`` extra) and ``tokenizer_config.json`` with the special tokens and a chat
template, so ``transformers.AutoTokenizer.from_pretrained(DIR)`` loads it offline. Encoding
a text gives ``[bos] + its UTF-8 bytes``, exactly what the engine does with a string prompt;
a chat turn ends with eos, where the sampler stops.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fake_gs.engines.tiny.byte_tokenizer import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE

PAD_TOKEN = "<|pad|>"
BOS_TOKEN = "<|bos|>"
EOS_TOKEN = "<|eos|>"
SPECIAL_TOKENS: dict[int, str] = {PAD_ID: PAD_TOKEN, BOS_ID: BOS_TOKEN, EOS_ID: EOS_TOKEN}
#: Each turn is ``<|role|>\n`` + content + eos (plain bytes but for bos/eos); the
#: generation prompt opens an assistant turn, which the sampler ends with eos.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + eos_token }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


class TokenizerUnavailable(RuntimeError):
    """The ``tokenizers`` library (the ``tokenizer`` extra) is not installed."""


def build_tokenizer() -> Any:
    """A byte-level ``tokenizers.Tokenizer``: byte ``b`` is id ``b``; specials after them."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    except ImportError:
        raise TokenizerUnavailable(
            "writing a tokenizer needs the 'tokenizer' extra: "
            "pip install 'cortex-contract-kit[tokenizer]' (the tokenizers library)"
        ) from None
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    # ByteLevel maps byte b to one printable character; give that character id b.
    byte_chars = _byte_to_char()
    assert sorted(byte_chars.values()) == sorted(alphabet)
    vocab = {byte_chars[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    for token_id in sorted(SPECIAL_TOKENS):
        added = tok.add_special_tokens([SPECIAL_TOKENS[token_id]])
        assert added == 1 and tok.token_to_id(SPECIAL_TOKENS[token_id]) == token_id
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS_TOKEN} $A", pair=f"{BOS_TOKEN} $A $B", special_tokens=[(BOS_TOKEN, BOS_ID)]
    )
    assert tok.get_vocab_size() == VOCAB_SIZE
    return tok


def _byte_to_char() -> dict[int, str]:
    """GPT-2's byte -> printable character table, which the ByteLevel steps use."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def tokenizer_config() -> dict[str, Any]:
    """``tokenizer_config.json``: the class to load, the special tokens, the chat template."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS_TOKEN,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "add_bos_token": True,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(i): {"content": t, "special": True, "lstrip": False, "rstrip": False,
                     "normalized": False, "single_word": False}
            for i, t in SPECIAL_TOKENS.items()
        },
    }


def write_tokenizer_dir(directory: str | Path) -> Path:
    """Write the tokenizer files into ``directory`` (made if missing); returns its path."""
    out = Path(directory)
    tok = build_tokenizer()
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    special = {"bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN, "pad_token": PAD_TOKEN}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="fake-gs tokenizer",
        description="Write a Hugging Face tokenizer directory matching the tiny engine's "
                    "byte vocabulary (loadable offline with AutoTokenizer.from_pretrained).",
    )
    p.add_argument("directory", type=Path, help="where to write tokenizer.json and its config")
    args = p.parse_args(argv)
    try:
        out = write_tokenizer_dir(args.directory)
    except (TokenizerUnavailable, OSError) as exc:
        print(f"fake-gs tokenizer: {exc}", file=sys.stderr)
        return 2
    print(f"wrote a {VOCAB_SIZE}-token byte tokenizer (bos={BOS_ID} eos={EOS_ID} pad={PAD_ID}) "
          f"with a chat template to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
