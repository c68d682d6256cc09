"""Issue 13's size rule on every run: no module over about 500 lines, no class over about 300.

The limits below leave a small margin over "about"; a module or class past them is split by
job, not trimmed of its comments.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "contracts",
    "profiles",
    "locustfiles",
    "planner",
    "reports",
    "capplan",
    "bench",
    "scripts",
)
MAX_MODULE_LINES = 520
MAX_CLASS_LINES = 310


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def oversized(path: Path, root: Path = ROOT) -> list[str]:
    """Lines naming `path` (relative to `root`) if it is over the module limit, and each of
    its classes over the class limit."""
    text = path.read_text(encoding="utf-8")
    name = path.relative_to(root).as_posix()
    found = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{name}: module of {lines} lines (limit {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text, filename=name)):
        if isinstance(node, ast.ClassDef):
            assert node.end_lineno is not None
            n = node.end_lineno - node.lineno + 1
            if n > MAX_CLASS_LINES:
                found.append(
                    f"{name}:{node.lineno}: class {node.name} of {n} lines "
                    f"(limit {MAX_CLASS_LINES})"
                )
    return found


def test_the_scan_sees_every_package() -> None:
    sources = _sources()
    for pkg in PACKAGES:
        assert any(p.relative_to(ROOT).parts[0] == pkg for p in sources), pkg
    assert ROOT / "planner" / "engine" / "engine.py" in sources


def test_the_rule_names_a_long_class_and_a_long_module(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    short = tmp_path / "short.py"
    short.write_text(f"class Fits:\n{body[: body.rindex(chr(10))]}\n")
    long = tmp_path / "long.py"
    long.write_text(f"class Long:\n{body}\n" + "\n" * MAX_MODULE_LINES)
    assert oversized(short, tmp_path) == []
    assert oversized(long, tmp_path) == [
        f"long.py: module of {MAX_MODULE_LINES + MAX_CLASS_LINES + 1} lines "
        f"(limit {MAX_MODULE_LINES})",
        f"long.py:1: class Long of {MAX_CLASS_LINES + 1} lines (limit {MAX_CLASS_LINES})",
    ]


def test_no_module_or_class_is_over_the_limits() -> None:
    found = [line for path in _sources() for line in oversized(path)]
    assert not found, "split these by job (issue 13):\n" + "\n".join(found)
