"""The layout table of CONTRIBUTING.md matches the tree: every folder it lists exists, every file or
subfolder it names in a row exists under that row's folder (or is a top-level folder), and
every top-level package of the project has a row."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "contracts",
    "profiles",
    "locustfiles",
    "planner",
    "reports",
    "capplan",
    "testkit",
    "tests",
    "bench",
)


def layout_rows() -> dict[str, str]:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        match = re.match(r"\| `([\w./-]+)/` \| (.*) \|$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_every_package_has_a_row_and_every_named_path_exists() -> None:
    rows = layout_rows()
    assert set(PACKAGES) <= set(rows), f"no layout row for {set(PACKAGES) - set(rows)}"
    missing: list[str] = []
    for folder, text in rows.items():
        base = ROOT / folder
        assert base.is_dir(), f"layout row `{folder}/` names no folder"
        for name in re.findall(r"`([\w-]+(?:\.py|\.sh|/))`", text):
            if not any(base.rglob(name.rstrip("/"))) and not (ROOT / name).exists():
                missing.append(f"{folder}/…/{name}")
    assert not missing, f"CONTRIBUTING.md's layout table names paths not in the tree: {missing}"
