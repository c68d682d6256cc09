"""Building an options model from values a user gave: the model's refusal as the project's error.

A command's options model (pydantic, `extra="forbid"`) holds each option's bound and default
once; `build` turns the first value it refuses into a ConfigError (exit 2) that names the
option as the user wrote it (a CLI flag, a review file's field) and, for a bound, says it in
`capplan.cli.check_number`'s words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from contracts.errors import ConfigError

ModelT = TypeVar("ModelT", bound=BaseModel)

# pydantic's numeric-bound error types and the operator each states
_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


def build(model: type[ModelT], name_of: Callable[[str], str], /, **values: Any) -> ModelT:
    """`model(**values)`; ConfigError `NAME VALUE: expected ...` for the first value it refuses.

    `name_of` gets the refused field's path (`host_rule.cpu_cores_per_gpu` for a nested
    field, `growth` for an item of a list field) and returns what the user calls it."""
    try:
        return model(**values)
    except ValidationError as exc:
        error = exc.errors()[0]
        path = ".".join(str(part) for part in error["loc"] if isinstance(part, str))
        name = name_of(path)
        value = error.get("input")
        ctx = error.get("ctx") or {}
        key, op = _BOUNDS.get(error["type"], ("", ""))
        bound = f"{op} {ctx[key]:g}" if key in ctx else None
        if bound is not None or error["type"] == "finite_number":
            kind = "a whole number" if isinstance(value, int) else "a finite number"
            expected = f"{kind} {bound}" if bound else kind
            raise ConfigError(f"{name} {value:g}: expected {expected}") from None
        if error["type"] == "literal_error":  # one of a few words: say them as the bounds are
            raise ConfigError(f"{name} {value!r}: expected {ctx['expected']}") from None
        raise ConfigError(f"{name} {value!r}: {error['msg']}") from None
