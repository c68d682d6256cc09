"""A test whose component is missing fails in CI (CI=true) and skips elsewhere."""

from __future__ import annotations

import pytest

from tests.helpers.missing import missing


def test_missing_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="nginx is not installed"):
        missing("nginx is not installed")


def test_missing_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        missing("nginx is not installed")
