"""The guides' walk-throughs run as written: every ```bash block marked `<!-- guide-run -->`
in the README or the documentation site is extracted from its Markdown (not copied) and run
by bash, blocks of one page in order, from an empty folder with the installed `capplan` on
PATH. A guide that drifts from the CLI, or whose commands stop working, fails here.

A page whose walk-through takes minutes marks a block `<!-- guide-run long: WHAT IT MEASURES
-->`; that page runs only with CAPPLAN_LONG_TESTS=1 (CI's 30-minute budget). Every shell block
of a guide or getting-started page that runs capplan is either run or marked
`<!-- guide-skip: WHY -->` (a GPU endpoint, object storage, a cluster), so a new example
cannot slip in untested."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.commands import capplan_args, code_blocks, logical_lines, split_commands

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
GUIDES = sorted(
    [*(ROOT / "docs/getting-started").glob("*.md"), *(ROOT / "docs/guides").glob("*.md")]
)
MARK = "<!-- guide-run"
LONG = re.compile(r"^<!-- guide-run long: *([^\n]*?) *-->$", re.M)
SKIP = re.compile(r"^<!-- guide-skip: *\S[^\n]*-->$")
BLOCK = re.compile(r"^<!-- guide-run[^\n]*-->\n```bash\n(.*?)^```", re.S | re.M)
SHELL = {"bash", "sh", "shell", "console", ""}
LONG_LIMIT_S = 1800  # a long walk-through on a busy machine (a limit search: 10+ minutes)
# Pages whose walk-through must stay runnable: the marker cannot quietly disappear.
REQUIRED = {
    f"docs/{name}.md"
    for name in (
        "getting-started/demo", "getting-started/emulator",
        "getting-started/install", "getting-started/no-logs",
        "guides/autoscale", "guides/calibrate", "guides/emulate",
        "guides/limit", "guides/loadtest", "guides/plan", "guides/profile", "guides/report",
        "guides/review", "guides/verify", "guides/whatif",
    )
}  # fmt: skip


def runnable(page: Path) -> str:
    """The page's marked bash blocks, joined in order (empty when it has none)."""
    text = page.read_text(encoding="utf-8")
    blocks = BLOCK.findall(text)
    assert len(blocks) == text.count(MARK), f"{page}: a {MARK} marker not followed by ```bash"
    return "".join(blocks)


def long_reason(page: Path) -> str | None:
    """What a long walk-through measures (its `guide-run long:` marker), or None."""
    found = LONG.findall(page.read_text(encoding="utf-8"))
    return "; ".join(found) if found else None


def unmarked_blocks(page: Path) -> list[str]:
    """'PAGE:LINE' of each shell block that runs capplan with neither a guide-run marker nor
    a `guide-skip: reason` on the line before its fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for first, block in code_blocks("\n".join(lines)):
        fence = lines[first - 2].strip()
        language = fence.lstrip("`~").strip().lower()
        runs_capplan = any(
            capplan_args(words) is not None
            for _, line in logical_lines(block, first)
            for words in split_commands(line)
        )
        marker = lines[first - 3].strip() if first >= 3 else ""
        marked = marker.startswith(MARK) or bool(SKIP.match(marker))
        if language in SHELL and runs_capplan and not marked:
            name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
            found.append(f"{name}:{first - 1}")
    return found


def marked_pages() -> list[Path]:
    return [p for p in PAGES if MARK in p.read_text(encoding="utf-8")]


def serves(page: Path) -> bool:
    """Whether the walk-through starts a server (the emulator, a balancer) and times it on the
    wall clock: such pages run one after another with the other `wall_clock` tests
    (tests/conftest.py; some bind port 8000), the others beside them."""
    return bool(re.search(r"capplan (emulate|lb)\b", runnable(page)))


def page_param(page: Path) -> object:
    reason = long_reason(page)
    marks = [pytest.mark.integration] if serves(page) else []
    if reason is not None:
        marks.append(
            pytest.mark.skipif(
                os.environ.get("CAPPLAN_LONG_TESTS") != "1",
                reason=f"{reason}: CAPPLAN_LONG_TESTS=1",
            )
        )
        marks.append(pytest.mark.timeout(LONG_LIMIT_S + 60))  # above pytest's 600 s default
    return pytest.param(page, marks=marks, id=str(page.relative_to(ROOT)))


def test_the_required_walk_throughs_are_marked() -> None:
    assert {str(p.relative_to(ROOT)) for p in marked_pages()} >= REQUIRED


def test_every_capplan_block_of_a_guide_is_run_or_skipped_with_a_reason() -> None:
    assert [where for page in GUIDES for where in unmarked_blocks(page)] == []


def test_an_unmarked_block_is_caught_and_a_reasoned_skip_is_not(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "<!-- guide-run: why -->\n```bash\ncapplan --version\n```\n"
        "<!-- guide-skip: needs a GPU endpoint -->\n```bash\ncapplan limit --host h\n```\n"
        "<!-- guide-skip: -->\n```bash\ncapplan plan\n```\n"
        "```text\ncapplan plan\n```\n"
        "```bash\necho no capplan here\n```\n"
        "```bash\nls\ncapplan profile x.csv\n```\n",
        encoding="utf-8",
    )
    assert [w.rsplit(":", 1)[1] for w in unmarked_blocks(page)] == ["10", "19"]


def test_a_marker_picks_its_block_and_nothing_else(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "```bash\nnot me\n```\n<!-- guide-run: why -->\n```bash\necho a\necho b\n```\n"
        "```bash\nnor me\n```\n",
        encoding="utf-8",
    )
    assert runnable(page) == "echo a\necho b\n"


def test_a_long_marker_names_what_it_measures(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("<!-- guide-run long: the whole demo -->\n```bash\necho a\n```\n", "utf-8")
    assert long_reason(page) == "the whole demo"
    assert runnable(page) == "echo a\n"


@pytest.mark.parametrize("page", [page_param(p) for p in marked_pages()])
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
            proc.wait(timeout=LONG_LIMIT_S if long_reason(page) else 540)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, f"{page.relative_to(ROOT)} exited {proc.returncode}:\n{text}"


def test_the_review_guide_writes_the_repository_example() -> None:
    """The review guide's walk-through writes examples/review.yaml (less its two comment
    lines) into the empty folder: the two cannot drift apart."""
    script = runnable(ROOT / "docs/guides/review.md")
    written = re.search(r"<<'EOF'\n(.*?)^EOF$", script, re.S | re.M)
    assert written, "the review guide no longer writes its review file with a heredoc"
    example = (ROOT / "examples/review.yaml").read_text(encoding="utf-8").split("\n", 2)[2]
    assert written.group(1) == example
