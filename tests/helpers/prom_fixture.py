"""The marks of a test module that needs a real Prometheus (bench/kit/prom_fleet.py runs it)."""

from __future__ import annotations

import shutil

import pytest


def have_prometheus() -> bool:
    return shutil.which("prometheus") is not None and shutil.which("promtool") is not None


# The marks of a test module that needs a real Prometheus.
NEEDS_PROMETHEUS = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not have_prometheus(),
        reason="prometheus and promtool are not installed (scripts/test.sh installs Debian's "
        "prometheus package where it can)",
    ),
]
