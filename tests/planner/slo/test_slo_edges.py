"""The SLO is a `Slo` from the edge down: `parse_slo` is called only by the CLI (capplan/) and
the modules that read an SLO's text (listed below), and no planner, profiles or locustfiles
field or parameter holds the SLO as text. Read from the source with `ast`.

contracts/ and reports/ keep the text: they may not import planner (tests/contracts/
test_layers.py), and what they hold is a file's SLO as written or a page's words.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BELOW_CLI = ("contracts", "profiles", "locustfiles", "planner", "reports")
TYPED = ("profiles", "locustfiles", "planner")  # may hold a Slo (contracts, reports: text)
# The edges below the CLI where an SLO's text becomes a Slo, each with what it reads.
READERS = {
    "planner/slo/spec.py": "parse_slo itself; SloField, an options model read from a file",
    "planner/slo/recorded.py": "the SLO a plan.json, limit.json or search.json recorded",
}


def _calls_parse_slo(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "parse_slo":
                lines.append(node.lineno)
    return lines


def _names_an_slo(name: str) -> bool:
    """`slo`, `limit_slo`, `slo_text`, `slo_spec`; not `slo_words` (a sentence's words)."""
    name = name.lower()
    return name.split("_")[-1] == "slo" or name in ("slo_text", "slo_spec")


def _text_slo_annotations(tree: ast.AST) -> list[int]:
    """Lines of a field or parameter named like an SLO (`_names_an_slo`) annotated with `str`
    (alone, optional or in a union)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name, annotation = node.target.id, node.annotation
        elif isinstance(node, ast.arg) and node.annotation is not None:
            name, annotation = node.arg, node.annotation
        else:
            continue
        words = set(ast.unparse(annotation).replace("|", " ").replace("[", " ").split())
        if _names_an_slo(name) and "str" in words:
            found.append(node.lineno)
    return found


@cache
def _trees() -> dict[str, ast.AST]:
    """Every module below the CLI, parsed once for the tests of this file."""
    return {
        path.relative_to(ROOT).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
        for layer in BELOW_CLI
        for path in sorted((ROOT / layer).rglob("*.py"))
    }


def _sources(layers: tuple[str, ...]) -> list[tuple[str, ast.AST]]:
    return [(name, tree) for name, tree in _trees().items() if name.split("/")[0] in layers]


def test_parse_slo_is_called_only_at_the_edges() -> None:
    calls = [
        f"{name}:{line}"
        for name, tree in _sources(BELOW_CLI)
        if name not in READERS
        for line in _calls_parse_slo(tree)
    ]
    assert not calls, f"parse_slo below the CLI outside the readers {sorted(READERS)}: {calls}"


def test_every_listed_reader_parses() -> None:
    # a stale entry would let a module parse again later without review
    assert all(_calls_parse_slo(_trees()[name]) for name in READERS)


def test_no_slo_held_as_text_below_the_cli() -> None:
    held = [
        f"{name}:{line}" for name, tree in _sources(TYPED) for line in _text_slo_annotations(tree)
    ]
    assert not held, f"an SLO annotated as str (hold a planner.slo.spec.Slo): {held}"


def test_the_scan_sees_a_text_slo() -> None:
    tree = ast.parse("class A:\n    slo: str | None = None\n\ndef f(x, slo_text: str): ...\n")
    assert _text_slo_annotations(tree) == [2, 4]
    assert _calls_parse_slo(ast.parse("from m import parse_slo\nparse_slo('x')\n")) == [2]
