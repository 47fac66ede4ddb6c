"""Log-probabilities of token prompts through today's ``forward`` operation (spec §7.1).

The service has no log-probs route yet (it is proposed), but it runs a forward pass on the
``operation`` envelope, whose per-token log-probs follow the shifted convention of spec
§10.4: column ``i`` scores token ``i + 1``. So a prompt (and its completion) of token ids is
sent as one padded row, and each item's scores are read back from the positions of the
tokens it asks about: the completion's, or the prompt's own after its first token (which
nothing precedes). Text prompts need a tokenizer the client does not have, and top-k needs
the full distribution the forward pass does not return: both are refused, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from client.errors import ConfigError

_WHY = "today's service scores token ids only, through the forward operation (spec §7.1)"


def _tokens(value: Any, what: str, index: int) -> list[int]:
    if isinstance(value, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool)
                                                for t in value):
        return [int(t) for t in value]
    raise ConfigError(f"log_probs {what} {index} is not a list of token ids: the log-probs "
                      f"route is not there and {_WHY}", route="log_probs")


def score_rows(body: Mapping[str, Any]) -> list[tuple[list[int], int, int]]:
    """One (row tokens, first scored column, scored count) per item of a log-probs body."""
    if body.get("top_k"):
        raise ConfigError(f"log_probs top_k needs the log-probs route: {_WHY}, without the "
                          "top-k alternatives", route="log_probs")
    prompts = list(body.get("prompts") or [])
    completions = body.get("completions")
    rows = []
    for i, prompt in enumerate(prompts):
        head = _tokens(prompt, "prompt", i)
        if completions is not None:
            tail = _tokens(completions[i], "completion", i)
            if not head or not tail:
                raise ConfigError(f"log_probs item {i}: an empty prompt or completion has "
                                  "nothing to score", route="log_probs")
            rows.append((head + tail, len(head) - 1, len(tail)))
        else:
            if len(head) < 2:
                raise ConfigError(f"log_probs prompt {i}: one token has nothing before it to "
                                  "be scored against", route="log_probs")
            rows.append((head, 0, len(head) - 1))
    return rows


def forward_frame(rows: Sequence[tuple[list[int], int, int]]) -> dict[str, Any]:
    """The forward body: right-padded ``input_ids`` with their ``attention_mask``."""
    import torch

    width = max(len(tokens) for tokens, _, _ in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (tokens, _, _) in enumerate(rows):
        ids[r, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        mask[r, : len(tokens)] = 1
    return {"args": [], "kwargs": {"input_ids": ids, "attention_mask": mask}}


def results_of(rows: Sequence[tuple[list[int], int, int]], logprobs: Any) -> list[dict[str, Any]]:
    """Per item: the scored token ids and their log-probs, read off the shifted columns."""
    out = []
    for r, (tokens, first, count) in enumerate(rows):
        start = len(tokens) - count
        out.append({"token_ids": tokens[start:],
                    "logprobs": logprobs[r, first : first + count].tolist()})
    return out
