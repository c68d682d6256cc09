"""The layers around the product (read with `ast`, lazy imports inside functions included):
testkit/ imports the product only; tests/ import the product and testkit/, never bench/;
bench/ imports the product and testkit/, never tests/; the product imports none of them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("contracts", "profiles", "locustfiles", "planner", "reports", "capplan")


def _importers_of(top: str, folders: tuple[str, ...]) -> list[str]:
    """Files under `folders` that import the top-level package `top`."""
    found = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                if any(name.split(".")[0] == top for name in names):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_bench_never_imports_tests() -> None:
    found = _importers_of("tests", ("bench",))
    assert found == []


def test_the_product_never_imports_bench() -> None:
    assert _importers_of("bench", PRODUCT) == []


def test_tests_never_import_bench() -> None:
    assert _importers_of("bench", ("tests",)) == []


def test_testkit_imports_neither_tests_nor_bench() -> None:
    assert _importers_of("tests", ("testkit",)) == []
    assert _importers_of("bench", ("testkit",)) == []


def test_the_product_never_imports_testkit() -> None:
    assert _importers_of("testkit", PRODUCT) == []


def test_the_scan_sees_an_import() -> None:
    assert _importers_of("testkit", ("tests/bench",))  # this folder imports testkit/
