"""The one exception tree of capplan: everything the project raises derives from CapplanError."""

from __future__ import annotations

from typing import Literal

# Why a configuration cannot run at all (CannotServeError.reason).
CannotServeReason = Literal["fit", "fp4", "heads"]


class CapplanError(Exception):
    """Base of every error capplan raises on purpose; the CLI prints its message, no traceback.

    `exit_code` is what the CLI exits with: 2 for bad input or configuration (the user can fix
    it), 1 for a failure while running (a target that went away, a run that produced nothing).
    """

    exit_code = 1


class InputError(CapplanError):
    """A file, row, field or option that is not what capplan expects (exit code 2)."""

    exit_code = 2


class ConfigError(InputError):
    """A configuration value (stage plan, SLO spec, catalog entry, option) that fails validation."""


class CannotServeError(ConfigError):
    """A configuration no engine can serve at all, with the reason as a field for whoever
    reports it: `reason` "fit" (the weights do not fit; `short_bytes` per GPU), "fp4" (the
    format needs FP4 tensor cores the board has not) or "heads" (tp does not split the
    attention heads)."""

    def __init__(
        self, message: str, *, reason: CannotServeReason, short_bytes: float | None = None
    ) -> None:
        super().__init__(message)
        self.reason: CannotServeReason = reason
        self.short_bytes = short_bytes


class TargetError(CapplanError):
    """The system under test misbehaved in a way that stops the command (exit code 1)."""


class RunError(CapplanError):
    """A run, search or simulation could not produce its result (exit code 1)."""


class PreflightError(InputError):
    """The target as given cannot be load-tested: a bad URL, no answer, a model it does not
    serve, a test request that streams nothing (exit code 2: fix --host, --model or the key)."""


class FailedRunError(RunError):
    """The run finished and its directory was written, but no request succeeded, or more
    failed than the share the user allowed (exit code 3)."""

    exit_code = 3
