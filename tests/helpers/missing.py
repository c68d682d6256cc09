"""What a test does when a component it needs is missing: fail in CI, skip elsewhere.

CI (`CI=true`, as .ci/run is started) installs everything the tests need through the
project's own files (scripts/test.sh), so a missing component there is a bug of those files
and must fail loudly; on a developer's machine without shared/ beside the checkout, or
without a Debian package, the test skips and says why.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str) -> NoReturn:
    """Fail the test in CI, skip it elsewhere; `reason` names the component and its install."""
    if in_ci():
        pytest.fail(f"{reason} (CI installs it: a missing component fails here)")
    pytest.skip(reason)
