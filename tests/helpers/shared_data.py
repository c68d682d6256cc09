"""The public traces in shared/data beside the checkout, and the profile of one of them."""

from __future__ import annotations

import functools
from pathlib import Path

from profiles.model import Profile
from tests.helpers.missing import missing

_REPO = Path(__file__).resolve().parents[2]


def _shared_data() -> Path:
    """shared/data in the nearest folder above the checkout that has one (a worktree sits a
    level deeper than the main checkout); the sibling of the checkout when none has it."""
    for folder in _REPO.parents:
        if (folder / "shared" / "data").is_dir():
            return folder / "shared" / "data"
    return _REPO.parent / "shared" / "data"


SHARED_DATA = _shared_data()
AZURE_CONV = SHARED_DATA / "AzureLLMInferenceTrace_conv.csv"


@functools.cache
def azure_conv_profile() -> Profile:
    """The profile of the Azure conv trace, read by profiles.build (cached per test session);
    fails in CI and skips elsewhere when shared/data is not beside the checkout."""
    from profiles.build import build_profile

    if not AZURE_CONV.is_file():
        missing(f"shared traces not found at {SHARED_DATA} (beside the checkout)")
    return build_profile([str(AZURE_CONV)])
