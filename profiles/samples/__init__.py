"""Small real traces shipped inside the package (for `capplan demo`, examples and tests).

`azure_conv`: the first 10 minutes (2,867 requests) of Azure's LLM inference conversation
trace of 2023-11-16 (Azure/AzurePublicDataset, `AzureLLMInferenceTrace_conv.csv`,
CC-BY 4.0), rows unchanged.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from contracts.errors import InputError

SAMPLES = {"azure_conv": "azure_conv_sample.csv"}


def sample_path(name: str) -> Path:
    """Path of the shipped sample trace `name`; InputError naming the known ones if unknown."""
    if name not in SAMPLES:
        raise InputError(f"unknown sample {name!r}; known samples: {', '.join(SAMPLES)}")
    return Path(str(resources.files("profiles.samples").joinpath(SAMPLES[name])))
