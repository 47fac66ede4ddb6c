"""Byte-level tokenizer for the tiny engine: works offline, needs no vocabulary file.

Token ids 0..255 are the raw UTF-8 bytes; three specials follow. A string prompt becomes
``[BOS] + bytes``; a token-id prompt is used as given. Decoding drops the specials and
replaces invalid UTF-8, so any sampled sequence turns into text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fake_gs.engines.byte_vocab import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE

__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "VOCAB_SIZE", "ByteTokenizer"]


class ByteTokenizer:
    """UTF-8 bytes plus pad/bos/eos."""

    pad_id = PAD_ID
    bos_id = BOS_ID
    eos_id = EOS_ID
    vocab_size = VOCAB_SIZE

    def encode(self, text: str, *, add_bos: bool = True) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [BOS_ID, *ids] if add_bos else ids

    def encode_prompt(self, prompt: str | Sequence[int]) -> list[int]:
        """A string gets BOS prepended; a token list is validated and copied."""
        if isinstance(prompt, str):
            return self.encode(prompt)
        ids = [int(t) for t in prompt]
        bad = [t for t in ids if not 0 <= t < VOCAB_SIZE]
        if bad:
            raise ValueError(f"token ids out of range 0..{VOCAB_SIZE - 1}: {bad[:5]}")
        return ids

    def encode_completion(self, completion: str | Sequence[int]) -> list[int]:
        """Completions are scored as a continuation, so no BOS."""
        if isinstance(completion, str):
            return self.encode(completion, add_bos=False)
        return self.encode_prompt(completion)

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(t for t in ids if 0 <= t < 256).decode("utf-8", errors="replace")
