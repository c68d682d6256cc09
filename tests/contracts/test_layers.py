"""The folders are the layers, lowest first: a module imports only from its own folder or one
before it in LAYERS, and no two modules import each other, however far round. Read from the
source with `ast`, imports inside functions and under TYPE_CHECKING included (a lazy import is
still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("contracts", "profiles", "locustfiles", "planner", "reports", "capplan")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(path): path for layer in LAYERS for path in sorted((ROOT / layer).rglob("*.py"))
}


def _resolve(name: str) -> str | None:
    """The project module `name` loads: itself, or its longest prefix that is a module."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """The project modules `module` imports; `from package import submodule` is the
    submodule, `from package import name` the package."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(filter(None, (_resolve(alias.name) for alias in node.names)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                target = _resolve(f"{base}.{alias.name}") or _resolve(base)
                if target is not None:
                    found.add(target)
    found.discard(module)
    return found


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_module_imports_a_layer_above_its_own() -> None:
    wrong = [
        f"{module} imports {imported}"
        for module in sorted(MODULES)
        for imported in sorted(_imports(module))
        if _layer(imported) > _layer(module)
    ]
    assert wrong == []


def test_no_import_cycle() -> None:
    assert _cycles({module: _imports(module) for module in MODULES}) == []


def test_the_rules_see_an_upward_import_and_a_cycle() -> None:
    assert _layer("contracts.run") < _layer("profiles.model") < _layer("locustfiles.driver")
    assert _layer("locustfiles.driver") < _layer("planner.engine.kv") == _layer("planner.limit")
    assert _layer("planner.limit") < _layer("reports.pdf") < _layer("capplan.commands.limit")
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
