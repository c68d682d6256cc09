"""Reading capplan's JSON files into their typed models, and writing them, with one error shape.

Every loader (profile, limit, run, stages, plan) reports a bad file the same way: the path,
then either why it cannot be read or the first field that fails validation. Every writer
goes through `write_atomic`: a reader (or a crash) never sees half a file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from contracts.errors import InputError

M = TypeVar("M", bound=BaseModel)


def first_error(err: ValidationError) -> str:
    """`field a.b: message` for the first problem pydantic found."""
    first = err.errors()[0]
    loc = ".".join(str(x) for x in first["loc"])
    return f"field {loc}: {first['msg']}"


def read_json(path: Path, what: str) -> Any:
    """Parsed JSON of `path`; InputError '<path>: <what> not found' or '... not a <what> JSON'."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise InputError(f"{path}: {what} not found") from err
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not a {what} JSON file ({err})") from err


def validate(model: type[M], data: Any, path: Path, schema: str | None = None) -> M:
    """`data` as `model`, checking its "schema" tag first when `schema` is given."""
    if schema is not None and (not isinstance(data, dict) or data.get("schema") != schema):
        raise InputError(f'{path}: expected "schema": "{schema}"')
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise InputError(f"{path}: {first_error(err)}") from err


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and a rename: a reader never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_model(path: Path, model: BaseModel, what: str = "") -> None:
    """Write `model` as indented JSON (by alias) to `path` atomically, making its folder;
    InputError '<path>: cannot write[ <what>] (<reason>)' when the file cannot be written."""
    write_json_text(path, model.model_dump_json(by_alias=True, indent=2) + "\n", what)


def write_json_text(path: Path, text: str, what: str = "") -> None:
    """Write JSON `text` to `path` atomically, making its folder; InputError as write_model."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    except OSError as err:
        named = f" {what}" if what else ""
        raise InputError(f"{path}: cannot write{named} ({err.strerror})") from err
