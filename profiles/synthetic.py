"""Fixed-length synthetic traffic as a profile: vLLM's `--dataset-name random` and guidellm's
`prompt_tokens=…,output_tokens=…` data, for a load test without a request log.

`RandomDataset` holds the lengths asked; `random_dataset_profile` turns them into a `Profile`
whose sampler pairs are the drawn lengths (no shared prefixes, no sessions), so the load test
draws its requests the way it draws them from any profile. `parse_guidellm_data` reads
guidellm's spelling.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from contracts.errors import ConfigError
from profiles.lengths import length_stats_all
from profiles.model import Prefix, Profile, Sessions
from profiles.presets import SHARED_PREFIX_BLOCK_TOKENS, preset_profile

__all__ = ["RandomDataset", "parse_guidellm_data", "random_dataset_profile"]


class RandomDataset(BaseModel):
    """vLLM's random dataset: input and output lengths drawn uniformly from
    [len x (1 - range_ratio), len x (1 + range_ratio)] (integers, both ends included)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = Field(ge=1, description="--random-input-len")
    output_tokens: int = Field(ge=1, description="--random-output-len")
    range_ratio: float = Field(default=0.0, ge=0.0, lt=1.0, description="--random-range-ratio")

    def bounds(self, length: int) -> tuple[int, int]:
        """The lowest and highest length drawn around `length` (at least 1)."""
        low = max(1, math.floor(length * (1.0 - self.range_ratio)))
        return low, max(low, math.ceil(length * (1.0 + self.range_ratio)))

    def describe(self) -> str:
        """How run summaries name this dataset."""
        ratio = f", range ratio {self.range_ratio:g}" if self.range_ratio else ""
        return f"random: {self.input_tokens} in / {self.output_tokens} out tokens{ratio}"


def random_dataset_profile(dataset: RandomDataset, prompts: int, seed: int) -> Profile:
    """A profile whose `prompts` sampler pairs are drawn from `dataset` with `seed`; arrivals
    are the chat preset's (a load test of this kind sets its own rate), no prefix reuse, no
    sessions."""
    rng = np.random.default_rng([seed, 0xDA7A])
    lo_in, hi_in = dataset.bounds(dataset.input_tokens)
    lo_out, hi_out = dataset.bounds(dataset.output_tokens)
    inputs = rng.integers(lo_in, hi_in + 1, size=prompts)
    outputs = rng.integers(lo_out, hi_out + 1, size=prompts)
    base = preset_profile("chat")
    update = {
        "lengths": length_stats_all(inputs, outputs, seed),
        "prefix": Prefix(available=False, block_tokens=SHARED_PREFIX_BLOCK_TOKENS),
        "sessions": Sessions(available=False),
        "source": base.source.model_copy(update={"rows": prompts}),
    }
    return base.model_copy(update=update)


def parse_guidellm_data(text: str) -> RandomDataset:
    """guidellm's synthetic data, `prompt_tokens=512,output_tokens=128`; raises ConfigError
    naming --data and the keys it knows."""
    known = {"prompt_tokens": "input_tokens", "output_tokens": "output_tokens"}
    values: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in known or not value.strip().isdigit():
            raise ConfigError(
                f"--data {text!r}: expected prompt_tokens=N,output_tokens=N "
                f"(positive integers), got {part!r}"
            )
        values[known[key.strip()]] = int(value)
    missing = [k for k, v in known.items() if v not in values]
    if missing or min(values.values()) < 1:
        raise ConfigError(
            f"--data {text!r}: expected prompt_tokens=N,output_tokens=N with N >= 1"
            + (f"; missing {', '.join(missing)}" if missing else "")
        )
    return RandomDataset(**values)
