"""The marks of a test module that needs a real Prometheus (testkit/prom_fleet.py runs it)."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers.missing import in_ci


def have_prometheus() -> bool:
    return shutil.which("prometheus") is not None and shutil.which("promtool") is not None


# The marks of a test module that needs a real Prometheus.
NEEDS_PROMETHEUS = [
    pytest.mark.integration,
    pytest.mark.skipif(  # in CI the tests run and fail: CI installs prometheus
        not have_prometheus() and not in_ci(),
        reason="prometheus and promtool are not installed (scripts/test.sh installs Debian's "
        "prometheus package where it can)",
    ),
]
