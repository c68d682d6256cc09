"""The guides' walk-throughs run as written: every ```bash block marked `<!-- guide-run -->`
in the README or the documentation site is extracted from its Markdown (not copied) and run
by bash, blocks of one page in order, from an empty folder with the installed `capplan` on
PATH. A guide that drifts from the CLI, or whose commands stop working, fails here."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
MARK = "<!-- guide-run"
BLOCK = re.compile(r"^<!-- guide-run[^\n]*-->\n```bash\n(.*?)^```", re.S | re.M)
# Pages whose walk-through must stay runnable: the marker cannot quietly disappear.
REQUIRED = {"docs/guides/verify.md"}


def runnable(page: Path) -> str:
    """The page's marked bash blocks, joined in order (empty when it has none)."""
    text = page.read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    assert len(blocks) == text.count(MARK), f"{page}: a {MARK} marker not followed by ```bash"
    return "".join(blocks)


def marked_pages() -> list[Path]:
    return [p for p in PAGES if MARK in p.read_text(encoding="utf-8")]


def test_the_required_walk_throughs_are_marked() -> None:
    assert {str(p.relative_to(ROOT)) for p in marked_pages()} >= REQUIRED


def test_a_marker_picks_its_block_and_nothing_else(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "```bash\nnot me\n```\n<!-- guide-run: why -->\n```bash\necho a\necho b\n```\n"
        "```bash\nnor me\n```\n",
        encoding="utf-8",
    )
    assert runnable(page) == "echo a\necho b\n"


@pytest.mark.integration
@pytest.mark.parametrize("page", marked_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_walk_through_runs_as_written(page: Path, tmp_path: Path) -> None:
    script = "set -euo pipefail\n" + runnable(page)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    log = tmp_path.parent / f"{tmp_path.name}.log"
    with log.open("wb") as sink:  # a file, not a pipe: background jobs hold their stdout
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: nothing it started outlives it
        )
        try:
            proc.wait(timeout=540)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, f"{page.relative_to(ROOT)} exited {proc.returncode}:\n{text}"
