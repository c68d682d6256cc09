"""The README's, CONTRIBUTING's and CHANGELOG's relative links and images point at files in
the repository (the site's own links are checked by `mkdocs build --strict`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"])
def test_relative_links_point_at_files(name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in LINK.findall(text) if "://" not in t]
    missing = [t for t in targets if t and not (ROOT / t).exists()]
    assert not missing, f"{name} links to missing files: {missing}"


def test_the_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines: move detail into docs/"
