"""Generate docs/reference/schemas.md (every file capplan reads or writes, from its pydantic
model's `model_json_schema()`) and docs/reference/catalogue.md (the engine model's GPUs and
models, from planner/engine/catalog.yaml), so neither page can drift from the code.

    python scripts/gen_schema_docs.py            # rewrite both pages
    python scripts/gen_schema_docs.py --check    # exit 1 when a checked-in page differs

tests/docs/test_generated.py runs the check on every test run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS_PAGE = ROOT / "docs" / "reference" / "schemas.md"
CATALOGUE_PAGE = ROOT / "docs" / "reference" / "catalogue.md"


def _files() -> list[tuple[str, str, type[BaseModel], str]]:
    """(file, schema tag, model, what it is) for every file with a pydantic model."""
    from contracts.calibration import CALIBRATION_SCHEMA, CalibrationFile
    from contracts.limit import LIMIT_SCHEMA, LimitResult
    from contracts.plan import PLAN_SCHEMA, Plan
    from contracts.review import REVIEW_SCHEMA, Review
    from contracts.run import RUN_SCHEMA, RunInfo, StagePlan, StageSummary
    from contracts.searchlog import SEARCH_SCHEMA, SearchLog
    from contracts.verify import VERIFY_SCHEMA, Verify
    from contracts.whatif import COMPARE_SCHEMA, WHATIF_SCHEMA, Compare, Whatif
    from planner.review.config import ReviewSpec
    from profiles.model import PROFILE_SCHEMA, Profile

    return [
        ("profile.json", PROFILE_SCHEMA, Profile, "`capplan profile`'s output: the workload."),
        ("stage plan (YAML/JSON)", "", StagePlan, "`capplan loadtest --stage-plan FILE`."),
        ("run.json", RUN_SCHEMA, RunInfo, "A run directory's metadata (`capplan loadtest`)."),
        (
            "stages.json",
            "",
            StageSummary,
            "A run directory's per-stage summaries: a list of these.",
        ),
        (
            "limit.json",
            LIMIT_SCHEMA,
            LimitResult,
            "`capplan limit`'s answer, in its run directory.",
        ),
        (
            "search.json",
            SEARCH_SCHEMA,
            SearchLog,
            "`capplan limit`'s log of its search, what `--resume` continues from.",
        ),
        ("plan.json", PLAN_SCHEMA, Plan, "`capplan plan`'s output."),
        ("verify.json", VERIFY_SCHEMA, Verify, "`capplan verify`'s output, in its run folder."),
        ("whatif.json", WHATIF_SCHEMA, Whatif, "`capplan whatif`'s output."),
        ("compare.json", COMPARE_SCHEMA, Compare, "`capplan compare`'s output."),
        ("cal.json", CALIBRATION_SCHEMA, CalibrationFile, "`capplan calibrate`'s output."),
        ("review.yaml", "", ReviewSpec, "`capplan review`'s input: the services to review."),
        ("review.json", REVIEW_SCHEMA, Review, "`capplan review`'s output beside the PDF."),
    ]


def _registered(registry: str) -> str:
    """The names a registry holds (contracts.names: the files hold their form), for the page."""
    from contracts.names import POLICIES, ROUTERS
    from planner.autoscale.policies import POLICIES as POLICY_KINDS
    from planner.fleet.routing import known_routings

    names = {ROUTERS: known_routings(), POLICIES: tuple(POLICY_KINDS)}[registry]
    return " / ".join(json.dumps(n) for n in names) + f" (registered in {registry})"


def _type(prop: dict[str, Any]) -> str:
    from contracts.names import REGISTRY_KEY

    if REGISTRY_KEY in prop:
        return _registered(prop[REGISTRY_KEY])
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " / ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map to {_type(prop['additionalProperties'])}"
    return str(kind)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _fields_table(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    out = ["| field | type | required / default | description |", "|---|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        if name in required:
            default = "required"
        elif "default" in prop:
            default = f"`{json.dumps(prop['default'])}`"
        else:
            default = ""
        desc = prop.get("description", "")
        out.append(f"| `{name}` | {_cell(_type(prop))} | {_cell(default)} | {_cell(desc)} |")
    return out


def render_schemas() -> str:
    lines = [
        "# File schemas",
        "",
        "<!-- Generated by scripts/gen_schema_docs.py from the pydantic models: "
        "do not edit by hand. -->",
        "",
        "Every JSON or YAML file capplan writes or reads, from the pydantic model that reads",
        'and writes it. Files with a schema tag carry it as `"schema"`; a file with another',
        'tag is refused. Unknown fields are refused too (`extra="forbid"`). The per-request',
        "table `records.parquet` is described in [the load-test guide](../guides/loadtest.md).",
        "",
        "| file | schema tag | model | what it is |",
        "|---|---|---|---|",
    ]
    files = _files()
    for name, tag, model, what in files:
        anchor = name.split(" ")[0].replace(".", "").lower()
        tag_text = f"`{tag}`" if tag else ""
        lines.append(
            f"| [{name}](#{anchor}) | {tag_text} | `{model.__module__}.{model.__name__}` | {what} |"
        )
    lines.append("")
    for name, tag, model, what in files:
        schema = model.model_json_schema(by_alias=True)
        lines += [f"## {name.split(' ')[0]}", "", what, ""]
        if tag:
            lines += [f"Schema tag: `{tag}`.", ""]
        lines += _fields_table(schema)
        for def_name, definition in schema.get("$defs", {}).items():
            if definition.get("properties"):
                lines += ["", f"**{def_name}**", ""]
                if definition.get("description"):
                    lines += [_cell(definition["description"]), ""]
                lines += _fields_table(definition)
        lines += ["", '??? note "Full JSON schema"', "", "    ```json"]
        text = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False)
        lines += [f"    {line}" if line else "" for line in text.splitlines()]
        lines += ["    ```", ""]
    return "\n".join(lines).rstrip() + "\n"


def render_catalogue() -> str:
    from planner.engine.catalog import gpu_catalog, model_catalog

    lines = [
        "# GPU and model catalogue",
        "",
        "<!-- Generated by scripts/gen_schema_docs.py from planner/engine/catalog.yaml: "
        "do not edit by hand. -->",
        "",
        "The GPUs and models the engine model knows (`--gpu` and `--model` of `emulate`,",
        "`plan`, `whatif`, `calibrate`; `--gpu` of `compare`). Names match without regard to",
        "case, a path before the last `/` (the hub's owner), `Meta-` before `Llama`, a",
        "hyphen after `Llama` (`Llama2-70B`, `llama3.1-8b`), and trailing parts that keep the",
        "shapes: tuning (`-instruct`, `-chat`, `-thinking`), `-hf`, a release (`-v0.3`, `-2507`,",
        "`-0528`), a checkpoint's precision (`-fp8`, `-awq`, `-nvfp4`, ...: the precision",
        "served is `--quantization`'s, never read from the name) and a benchmark's accuracy",
        "target (`-99`, `-99.9`). GPUs match as vendors and",
        "`nvidia-smi` write them (`NVIDIA H100 80GB HBM3`, `H100-SXM5-80GB`, `AMD Instinct",
        "MI300X`), the parts in any order. A PCIe or NVL board is another GPU, with its own",
        "clocks, memory and links (`NVIDIA H100 NVL` -> `H100-NVL-94GB`); the chip's name",
        "alone (`h100`, `a100`, `h200`) is its SXM board. An NVL board's NVLink bridge joins",
        "the boards of its group (TP links: the most it joins); a larger tensor-parallel group",
        "all-reduces across PCIe. The figures' sources are in `planner/engine/catalog.yaml`;",
        "boards with no published figure of their own take their die's fitted factors",
        "(`planner/engine/efficiency.yaml`). A board with no public price on file gets its",
        "limit from `whatif` and its cost once `--gpu-hour-price` is given. Add your own",
        "boards and models with `--catalog FILE` (YAML or JSON of the same shape; a GPU may",
        "set `link_gpus` and `pcie_bandwidth_bytes_per_s` for a bridged link).",
        "",
        "## GPUs",
        "",
        "| GPU | memory (GiB) | bandwidth (GB/s) | bf16 TFLOP/s | fp8 TFLOP/s "
        "| TP link (GB/s) | TP links | TP hop latency (us) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, gpu in gpu_catalog().items():
        fp8 = f"{gpu.fp8_flops / 1e12:g}" if gpu.fp8_flops else "-"
        link = gpu.link_bandwidth_bytes_per_s
        hop = gpu.link_latency_s
        lines.append(
            f"| `{name}` | {gpu.memory_bytes / 2**30:.1f} "
            f"| {gpu.hbm_bandwidth_bytes_per_s / 1e9:g} | {gpu.bf16_flops / 1e12:g} | {fp8} "
            f"| {f'{link / 1e9:g}' if link else '-'} "
            f"| {_joins(gpu.link_kind, gpu.link_gpus, gpu.pcie_bandwidth_bytes_per_s)} "
            f"| {f'{hop * 1e6:g}' if hop else '-'} |"
        )
    lines += [
        "",
        "## Models",
        "",
        "| model | parameters (B) | layers | hidden | attention heads | KV heads | head dim "
        "| max context |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, m in model_catalog().items():
        lines.append(
            f"| `{name}` | {m.params / 1e9:.2f} | {m.layers} | {m.hidden_size} "
            f"| {m.attention_heads} | {m.kv_heads} | {m.head_dim} | {m.max_context_tokens:,} |"
        )
    return "\n".join(lines) + "\n"


def _joins(kind: str, gpus: int | None, pcie: float | None) -> str:
    """What the TP link joins: every GPU of the group, or a bridged few and PCIe beyond."""
    if gpus is None:
        return f"{kind}, all"
    beyond = f"PCIe {pcie / 1e9:g} GB/s" if pcie else "PCIe"
    return f"{kind}, {gpus}; {beyond} beyond"


def pages() -> dict[Path, str]:
    return {SCHEMAS_PAGE: render_schemas(), CATALOGUE_PAGE: render_catalogue()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a page differs")
    args = parser.parse_args()
    stale = []
    for path, text in pages().items():
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    for path in stale:
        print(f"{path} is out of date: run python scripts/gen_schema_docs.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
