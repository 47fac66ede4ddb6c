"""The tiny engine's byte vocabulary, apart from its package so the start-up banner can
name it without importing torch (``fake_gs.engines.tiny`` pulls torch at import)."""

from __future__ import annotations

#: Token ids 0..255 are the raw UTF-8 bytes; three specials follow.
PAD_ID = 256
BOS_ID = 257
EOS_ID = 258
VOCAB_SIZE = 259

#: What a caller of the tiny engine meets first: printed in the fake's start-up banner.
FOLD_NOTE = (f"token ids fold into the tiny engine's {VOCAB_SIZE}-token byte vocabulary (id % {VOCAB_SIZE}) "
             "in training batches; a model's own token ids train as their residues, so SFT losses "
             f"start near ln {VOCAB_SIZE}; generate refuses prompt ids >= {VOCAB_SIZE}")
