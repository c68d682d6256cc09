"""The import graph runs one way: contracts -> profiles -> locustfiles and the engine -> the
planner's core -> reports -> the CLI. Read from the source with `ast`, imports inside functions
included (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contracts", "profiles", "locustfiles", "planner", "reports")
TOP = ("planner.cli", "planner.demo")  # the demo runs the whole loop, report included


def _layer(module: str) -> int:
    """0 contracts, 1 profiles, 2 locustfiles and the engine, 3 the planner's core, 4 reports,
    5 the CLI and what it orchestrates end to end (planner.cli, planner.commands, planner.demo,
    entry points `__main__`)."""
    top = module.split(".")[0]
    if top == "contracts":
        return 0
    if top == "profiles":
        return 1
    if top == "locustfiles" or module.startswith("planner.engine"):
        return 2
    if module in TOP or module.startswith("planner.commands") or module.endswith("__main__"):
        return 5
    if top == "reports":
        return 4
    return 3


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.split(".")[0] in PACKAGES}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _upward_imports() -> list[str]:
    wrong = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = _module_name(path)
            for imported in sorted(_imports(path)):
                if _layer(imported) > _layer(module):
                    wrong.append(f"{module} (layer {_layer(module)}) imports {imported}")
    return wrong


def test_contracts_import_nothing_of_the_project() -> None:
    for path in sorted((ROOT / "contracts").rglob("*.py")):
        others = {m for m in _imports(path) if not m.startswith("contracts")}
        assert not others, f"{path.name} imports {sorted(others)}"


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert _upward_imports() == []


def test_the_layer_rule_sees_an_upward_import() -> None:
    assert _layer("contracts.run") < _layer("profiles.model") < _layer("locustfiles.driver")
    assert _layer("planner.engine.kv") == _layer("locustfiles.driver") < _layer("planner.search")
    assert _layer("planner.search") < _layer("reports.pdf") < _layer("planner.commands.limit")
