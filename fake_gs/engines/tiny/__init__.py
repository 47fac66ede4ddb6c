"""The tiny engine: a real (small) causal LM on CPU behind the Engine protocol.

This module is its public face; the parts are ``tiny_engine`` (the routes), ``tiny_jobs``
(per-job state, snapshots), ``tiny_batch`` (alignment), ``tiny_losses`` and ``tiny_sampling``.

Why it exists: with the shape engine a client can be wrong in ways only numbers show
(advantages negated, old log-probs off by one, a weight sync forgotten). Here losses fall,
sampling follows the weights, and the sampler moves only on weight-sync, so such bugs
show up as an RL loop that does not learn.

Per job it holds:

- the *training* model (first training sub-job) with its optimizer (AdamW by default, lr
  from ``training_config.optimizer["lr"]``; a step's ``learning_rate`` replaces it and
  stays in force, like a scheduler setting the lr);
- one *sampler* copy per sampling sub-job, changed only by :meth:`TinyEngine.weight_sync`;
- one copy per log-probability sub-job (also moved only when a weight-sync names it);
- the frozen *reference* (the initial weights), used by ``forward(reference=True)`` and
  by the KL loss when the batch carries no ``ref_log_prob``.

Initial weights depend on ``(engine seed, model_name)`` only, like a pretrained model, so
two jobs of one model start equal and a checkpoint of one loads into the other. The job
seed drives sampling when a request gives no seed.

Conventions (decided here, documented for clients):

- log-probs are *shifted*: ``logprobs[:, i] = log p(input_ids[:, i+1])``; the last column
  is 0.0 so the shape is ``[B, S]``; entropy is aligned the same way. ``meta.temperature``
  divides the logits (as verl's actor does) in forward and forward-backward.
- generate reports, per sampled token, its log-prob under the *unscaled* model
  distribution (temperature 1, no top-p), i.e. the quantity forward computes, so the
  forward-vs-generate KL check holds at any sampling temperature.
- RL tensors (``response_mask``, ``advantages``, ``old_log_probs``, ``ref_log_prob``,
  ``loss_mask``) are ``[B, R]`` (aligned with ``responses`` = the last R columns of
  ``input_ids``) or ``[B, P+R]`` token-aligned with ``input_ids`` (entry k is about
  token ``input_ids[:, k]``); ``[B]`` advantages broadcast over the sequence. They may
  sit beside the model kwargs or in ArcticTraining's ``context`` block, whose loss
  settings (``eps_clip`` ...) count too (``fake_gs.engines.batch_layout``).
- in forward(-backward) batches, token ids outside the byte vocabulary are folded modulo
  the vocabulary size, so batches tokenised for a real model still run; a generate prompt
  with such ids is refused (ValueError -> a failed request), as a real sampler would.
- snapshots are in-memory tensor copies; nothing is pickled or ``torch.save``-d.

``quirks`` are the ``engine:`` seam points in force (``fake_gs/controls/seams.py``):
deliberate numeric bugs (one conditional each) that the conformance suite's semantic clauses
must catch.
"""

from __future__ import annotations

from fake_gs.engines.tiny.batch import RL_LOSSES, SFT_LOSSES
from fake_gs.engines.tiny.engine import TinyEngine
from fake_gs.engines.tiny.losses import METRIC_KEYS
from fake_gs.engines.tiny.per_job import DEFAULT_LR, TinySnapshot, sub_job_ids

__all__ = ["DEFAULT_LR", "METRIC_KEYS", "RL_LOSSES", "SFT_LOSSES", "TinyEngine", "TinySnapshot",
           "sub_job_ids"]
