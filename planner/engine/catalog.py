"""The catalogs of GPU and model specs by name: the built-in one, a user's file, and a model
read from a Hugging Face `config.json`.

The built-in catalog (`catalog.yaml` next to this file) names each figure's public source.
A user catalog (YAML or JSON of the same shape: `gpus:` and `models:` mappings; `--catalog
FILE` on every command that takes --gpu or --model) extends or overrides it; each field is
checked by name and type, and an error names the file, the entry and the field. Names are
matched case-insensitively; a short name matches when it is unique (`h100` -> `H100-80GB`),
and a Hugging Face id such as `meta-llama/Llama-3.1-8B-Instruct` matches its base model.
A model may also be given as the path of a Hugging Face `config.json` (or of the folder
holding one): its shape is read from the file (`planner.engine.hf_config`), never from the hub.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import yaml

from contracts.errors import ConfigError, InputError
from planner.engine.hf_config import model_from_hf_config
from planner.engine.parallel import LINK_KINDS
from planner.engine.specs import GpuSpec, ModelSpec, model_shape_problem

CATALOG_PATH = Path(__file__).with_name("catalog.yaml")


def _read_catalog_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"{path}: cannot read catalog ({err.strerror})") from err
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise InputError(f"{path}: not valid YAML/JSON ({err})") from err
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping with `gpus:` and/or `models:`")
    return data


_SECTIONS = ("gpus", "models")
VENDORS = ("nvidia", "amd")
# The least memory a board may state, in bytes: a figure below it was written in GB or GiB.
_MIN_MEMORY_BYTES = 2**30


def _section(path: Path, name: str, cls: type, required: tuple[str, ...]) -> dict[str, Any]:
    whole = _read_catalog_file(path)
    unknown = [str(k) for k in whole if k not in _SECTIONS]
    if unknown:
        raise InputError(
            f"{path}: unknown section(s) {', '.join(unknown)} (a catalog holds `gpus:` and "
            "`models:`)"
        )
    data = whole.get(name) or {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: `{name}` must be a mapping of name -> fields")
    out: dict[str, Any] = {}
    for key, fields in data.items():
        if not isinstance(fields, dict):
            raise InputError(f"{path}: {name}.{key}: expected a mapping of fields")
        missing = [f for f in required if f not in fields]
        if missing:
            raise InputError(f"{path}: {name}.{key}: missing field(s) {', '.join(missing)}")
        typed: dict[str, Any] = {}
        for field_name, value in fields.items():
            allowed = [f.name for f in dataclasses.fields(cls) if f.name != "name"]
            kind = _FIELD_TYPES.get(field_name)
            if kind is None or field_name not in allowed:
                known = ", ".join(allowed)
                raise InputError(
                    f"{path}: {name}.{key}.{field_name}: unknown field (known: {known})"
                )
            if kind is str:
                allowed_values = VENDORS if field_name == "vendor" else LINK_KINDS
                if value not in allowed_values:
                    raise InputError(
                        f"{path}: {name}.{key}.{field_name}: expected one of "
                        f"{', '.join(allowed_values)}, got {value!r}"
                    )
                typed[field_name] = value
                continue
            try:
                if isinstance(value, bool):
                    raise TypeError("a yes/no value")
                number = float(value)
            except (TypeError, ValueError) as err:
                raise InputError(
                    f"{path}: {name}.{key}.{field_name}: expected a number, got {value!r}"
                ) from err
            if not math.isfinite(number):
                raise InputError(
                    f"{path}: {name}.{key}.{field_name}: expected a finite number, got {value!r}"
                )
            if field_name == "memory_bytes" and 0 < number < _MIN_MEMORY_BYTES:
                raise InputError(
                    f"{path}: {name}.{key}.{field_name}: expected bytes (80 GB is "
                    f"80000000000), got {value!r}"
                )
            if number <= 0:
                raise InputError(f"{path}: {name}.{key}.{field_name}: must be > 0, got {value!r}")
            if kind is int and not number.is_integer():
                raise InputError(
                    f"{path}: {name}.{key}.{field_name}: expected a whole number, got {value!r}"
                )
            typed[field_name] = int(number) if kind is int else number
        try:
            out[str(key)] = cls(name=str(key), **typed)
        except TypeError as err:
            raise InputError(f"{path}: {name}.{key}: {err}") from err
        problem = model_shape_problem(out[str(key)]) if cls is ModelSpec else None
        if problem is not None:
            raise InputError(f"{path}: {name}.{key}.{problem}")
    return out


_FIELD_TYPES: dict[str, type] = {
    "fp8_flops": float,
    "fp4_flops": float,
    "experts": int,
    "active_experts": int,
    "active_params": int,
    "mla_kv_dim": int,
    "link_bandwidth_bytes_per_s": float,
    "link_latency_s": float,
    "link_kind": str,
    "vendor": str,
    "link_gpus": int,
    "pcie_bandwidth_bytes_per_s": float,
    "memory_bytes": int,
    "hbm_bandwidth_bytes_per_s": float,
    "bf16_flops": float,
    "attention_flops": float,
    "params": int,
    "layers": int,
    "hidden_size": int,
    "attention_heads": int,
    "kv_heads": int,
    "head_dim": int,
    "vocab_size": int,
    "max_context_tokens": int,
}

_GPU_FIELDS = ("memory_bytes", "hbm_bandwidth_bytes_per_s", "bf16_flops")
_MODEL_FIELDS = (
    "params",
    "layers",
    "hidden_size",
    "attention_heads",
    "kv_heads",
    "head_dim",
    "vocab_size",
)


def gpu_catalog(path: Path | str | None = None) -> dict[str, GpuSpec]:
    """Built-in GPUs, extended/overridden by the catalog file at `path` (YAML or JSON)."""
    specs = _section(CATALOG_PATH, "gpus", GpuSpec, _GPU_FIELDS)
    if path is not None:
        specs.update(_section(Path(path), "gpus", GpuSpec, _GPU_FIELDS))
    return specs


def model_catalog(path: Path | str | None = None) -> dict[str, ModelSpec]:
    """Built-in models, extended/overridden by the catalog file at `path` (YAML or JSON)."""
    specs = _section(CATALOG_PATH, "models", ModelSpec, _MODEL_FIELDS)
    if path is not None:
        specs.update(_section(Path(path), "models", ModelSpec, _MODEL_FIELDS))
    return specs


# Trailing parts of a hub name that do not change the shapes: tuning (-instruct, -chat,
# -thinking), format (-hf), release (-v0.3, -2507, -0528), a checkpoint's precision
# (-fp8, -awq, ...: the precision served is --quantization's, never read from the name) and
# the accuracy target benchmark suites add to a model's name (-99, -99.9).
_SHAPE_SAME = re.compile(
    r"(-(instruct|chat|thinking|hf|v\d+\.\d+|\d{4}|fp8|fp8-dynamic|awq|gptq|gptq-int4|int4|"
    r"int8|w8a8|w4a16|fp4|nvfp4|99|99\.9))+$"
)


def normal_name(name: str) -> str:
    """A catalog key as matched: lower case, no hub owner, no `meta-` prefix, a hyphen after
    `llama` (`Llama2-70B` -> `llama-2-70b`, as benchmark suites write it), none of the
    trailing parts that keep the shapes (`_SHAPE_SAME`): `meta-llama/Meta-Llama-3.1-8B-Instruct`
    -> `llama-3.1-8b`, `mistralai/Mixtral-8x7B-Instruct-v0.1` -> `mixtral-8x7b`,
    `Qwen/Qwen3-235B-A22B-Instruct-2507-FP8` -> `qwen3-235b-a22b`."""
    name = name.strip().lower().split("/")[-1]
    name = re.sub(r"[\s_]+", "-", name)
    name = re.sub(r"^meta-(?=llama)", "", name)
    name = re.sub(r"^llama(?=\d)", "llama-", name)  # Llama2-70B, llama3.1-8b
    return _SHAPE_SAME.sub("", name)


def normal_gpu_name(name: str) -> str:
    """A GPU's catalog key as matched: lower case, no vendor or product line (`NVIDIA`,
    `AMD Instinct`), no SXM form factor or HBM generation, which name the same board:
    `NVIDIA H100 80GB HBM3` and `H100-SXM5-80GB` -> `h100-80gb`. A PCIe or NVL board is
    another GPU (other clocks, memory and links): its tag stays (`NVIDIA H100 NVL` ->
    `h100-nvl`, the catalog's H100-NVL-94GB)."""
    parts = re.split(r"[\s_-]+", name.strip().lower())
    while parts and parts[0] in ("nvidia", "amd", "instinct"):
        parts = parts[1:]
    return "-".join(p for p in parts if p and not re.fullmatch(r"sxm\d*|hbm\d*e?", p))


# Tags that name another board of the same chip (other clocks, memory and links).
_FORM_TAGS = frozenset({"pcie", "nvl"})


def _gpu_matches(wanted: str, by_normal: dict[str, Any]) -> list[Any]:
    """The boards whose name holds every part typed, in any order (`NVIDIA H100 NVL` ->
    H100-NVL-94GB); where several do, those without a form tag (PCIe, NVL) that was not
    typed (`H100` -> H100-80GB, the SXM board)."""
    first, *rest = wanted.split("-")
    found = {
        k: v
        for k, v in by_normal.items()
        if k.split("-")[0] == first and set(rest) <= set(k.split("-")[1:])
    }
    if len(found) > 1:
        plain = {k: v for k, v in found.items() if not (set(k.split("-")) - set(rest)) & _FORM_TAGS}
        found = plain or found
    return list(found.values())


def lookup_spec(catalog: dict[str, Any], name: str, kind: str) -> Any:
    normal = normal_gpu_name if kind == "GPU" else normal_name
    wanted = normal(name)
    by_normal = {normal(k): v for k, v in catalog.items()}
    if wanted in by_normal:
        return by_normal[wanted]
    if kind == "GPU":
        prefixed = _gpu_matches(wanted, by_normal)
    else:
        prefixed = [v for k, v in by_normal.items() if k.split("-")[0] == wanted]
    if len(prefixed) == 1:
        return prefixed[0]
    if prefixed:
        several = ", ".join(sorted(v.name for v in prefixed))
        raise ConfigError(f"{kind} {name!r} could be any of {several}: name one")
    known = ", ".join(sorted(catalog))
    raise ConfigError(f"unknown {kind} {name!r}; known {kind}s: {known}")


def hf_config_path(name: str) -> Path | None:
    """The config.json `name` points at (the file, or a folder holding one), else None."""
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return path / "config.json"
    if path.suffix == ".json" and path.is_file():
        return path
    return None


def find_model(name: str, catalog: Path | str | None = None) -> ModelSpec:
    """The model called `name` in the catalog (built in, extended by `catalog`), or read from
    the Hugging Face config.json `name` points at. Raises ConfigError for an unknown name and
    InputError for an unreadable or incomplete config.json."""
    path = hf_config_path(name)
    if path is not None:
        return model_from_hf_config(path)
    try:
        found: ModelSpec = lookup_spec(model_catalog(catalog), name, "model")
    except ConfigError:
        given = Path(name).expanduser()
        if given.suffix == ".json":
            raise InputError(
                f"{name}: no such config.json (a model given as a file path)"
            ) from None
        if given.is_dir():
            raise InputError(f"{name}: the folder holds no config.json") from None
        raise
    return found


def find_gpu(name: str, catalog: Path | str | None = None) -> GpuSpec:
    """The GPU called `name` in the catalog (built in, extended by `catalog`)."""
    found: GpuSpec = lookup_spec(gpu_catalog(catalog), name, "GPU")
    return found


def gpu_name(name: str, catalog: Path | str | None = None) -> str:
    """The catalog's name of the GPU typed (`NVIDIA H100 80GB HBM3` -> H100-80GB), or the name
    as typed where the catalog does not hold it (whoever needs its specs says why then)."""
    try:
        return find_gpu(name, catalog).name
    except ConfigError:
        return name


def fp4_gpus(catalog: Path | str | None = None) -> list[str]:
    """Names of the catalog's GPUs with FP4 tensor cores."""
    return sorted(g.name for g in gpu_catalog(catalog).values() if g.fp4_flops)
