"""The models the real service caches (spec §1.4).

The fake refuses anything else at job creation (unless told to allow any model), and
inference-only models for training sub-jobs; conformance runs pick the smallest one.
"""

from __future__ import annotations

#: Models usable for training and for inference.
TRAINING_MODELS: tuple[str, ...] = (
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-1.7B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3.5-4B",
    "Qwen/Qwen3.6-35B-A3B",
)
#: Models served for inference (sampling, log-probability) only.
INFERENCE_ONLY_MODELS: tuple[str, ...] = (
    "deepseek-ai/DeepSeek-V4-Flash-0731",
    "openai/gpt-oss-120b",
    "zai-org/GLM-5.2",
    "zai-org/GLM-5.2-FP8",
)
ALL_MODELS: tuple[str, ...] = TRAINING_MODELS + INFERENCE_ONLY_MODELS
#: The cheapest model to train on: what conformance runs and examples use by default.
SMALLEST_TRAINING_MODEL = "Qwen/Qwen3-0.6B"


def is_known_model(name: str) -> bool:
    return name in ALL_MODELS


def is_trainable(name: str) -> bool:
    return name in TRAINING_MODELS
