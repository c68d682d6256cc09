"""The generated reference pages (CLI, file schemas, catalogue) are what their generators
print today, and the SLO page quotes the grammar capplan prints: none can drift."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from planner.slo.spec import GRAMMAR

ROOT = Path(__file__).resolve().parents[2]


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses look their module up there
    spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def test_the_cli_reference_is_generated_from_the_app() -> None:
    gen = load_script("gen_cli_docs")
    assert gen.PAGE.read_text(encoding="utf-8") == gen.render(), (
        "docs/reference/cli.md is out of date: run python scripts/gen_cli_docs.py"
    )


def test_the_schema_and_catalogue_pages_are_generated_from_the_models() -> None:
    gen = load_script("gen_schema_docs")
    for path, text in gen.pages().items():
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.name} is out of date: run python scripts/gen_schema_docs.py"
        )


def test_the_cli_reference_lists_every_command_and_option() -> None:
    text = (ROOT / "docs/reference/cli.md").read_text(encoding="utf-8")
    for needle in ("## `capplan limit`", "--api-key-env", "## `capplan review`", "--slo"):
        assert needle in text


def test_the_slo_page_quotes_the_grammar() -> None:
    text = (ROOT / "docs/reference/slo.md").read_text(encoding="utf-8")
    assert GRAMMAR in text
