"""The load profile: which users run, in what proportion, how long they think and what
sizes they send. A TOML file (``--load-profile FILE``; the default ships beside this module,
``default-profile.toml``), read once on the master (or the one local process) and handed to
the workers with the run's set-up, so workers on other machines need no copy of it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

DEFAULT_PROFILE = Path(__file__).with_name("default-profile.toml")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UserKind(_Section):
    """What every kind of user has: its Locust weight and its think time."""

    weight: int = Field(1, ge=0)
    think_s: tuple[float, float] = (0.1, 0.5)

    @model_validator(mode="after")
    def _ordered(self) -> UserKind:
        low, high = self.think_s
        if not 0 <= low <= high:
            raise ValueError(f"think_s must be [low, high] with 0 <= low <= high, got {self.think_s}")
        return self


class RLKind(UserKind):
    prompts: int = Field(4, gt=0)
    prompt_tokens: int = Field(32, gt=0)
    max_tokens: int = Field(32, gt=0)
    logprobs: Literal["fwd-no-grad", "log-probs", "none"] = "fwd-no-grad"
    sync_every: int = Field(1, ge=0)
    save_every: int = Field(10, ge=0)


class SFTKind(UserKind):
    batch: int = Field(8, gt=0)
    seq_len: int = Field(256, gt=1)
    save_every: int = Field(20, ge=0)


class SamplerKind(UserKind):
    prompts: int = Field(8, gt=0)
    max_tokens: int = Field(16, gt=0)
    max_events: int = Field(2, gt=0)
    stream_share: float = Field(0.75, ge=0.0, le=1.0)


class FakeSection(_Section):
    args: tuple[str, ...] = ()


class Profile(_Section):
    rl: RLKind = RLKind()
    sft: SFTKind = SFTKind()
    sampler: SamplerKind = SamplerKind()
    #: ClientConfig fields for every user's client (validated when a client is built).
    client: dict[str, Any] = Field(default_factory=dict)
    fake: FakeSection = FakeSection()

    def kind(self, name: str) -> UserKind:
        kind: UserKind = getattr(self, name)
        return kind


class ProfileError(ValueError):
    """A profile file that cannot be read or does not describe a load."""


def load_profile(path: str | Path | None = None) -> Profile:
    """The profile at ``path`` (None: the shipped default); ProfileError naming the problem."""
    where = Path(path) if path else DEFAULT_PROFILE
    try:
        data = tomllib.loads(where.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"load profile {where}: {exc}") from None
    return profile_from(data, str(where))


def profile_from(data: dict[str, Any], where: str = "the profile") -> Profile:
    """A profile from its parsed form (a TOML file's, or the set-up message a worker gets)."""
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ProfileError(f"load profile {where}: {problems}") from None
    from client.config import ClientConfig

    unknown = sorted(set(profile.client) - set(ClientConfig.model_fields))
    if unknown:
        raise ProfileError(f"load profile {where}: [client] has no field {', '.join(unknown)} "
                           "(the fields of client.config.ClientConfig)")
    if not any(profile.kind(name).weight for name in ("rl", "sft", "sampler")):
        raise ProfileError(f"load profile {where}: every user weight is 0")
    return profile
