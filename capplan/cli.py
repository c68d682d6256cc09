"""The `capplan` command line: a thin typer app; each command lives in capplan/commands/<name>.py.

Each command module defines `register(app)` that adds one command. Commands parse options,
call one library function, and turn a CapplanError into a clean message and exit code.
"""

from __future__ import annotations

import functools
import gc
import importlib
import math
import operator
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import typer
import typer.core

from contracts import __version__
from contracts.duration import duration_s
from contracts.errors import CapplanError, ConfigError

if TYPE_CHECKING:
    from pydantic import BaseModel

# The order here is the order in `capplan --help`.
COMMAND_MODULES = (
    "demo",
    "profile",
    "emulate",
    "loadtest",
    "limit",
    "worker",
    "calibrate",
    "plan",
    "verify",
    "lb",
    "whatif",
    "compare",
    "report",
    "review",
)

_app = typer.Typer(
    name="capplan",
    help=(
        "Size LLM serving fleets from evidence: profile request logs, load-test an "
        "OpenAI-compatible endpoint with Locust, find the per-instance SLO limit, plan "
        "instances and cost, and write a PDF capacity baseline."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])


class _Signals:
    """SIGTERM read as Ctrl-C while a command runs, and which of the two came first.

    Python's default SIGTERM ends the process at once: no `finally` runs, so a load test's
    Locust processes (each in its own process group) would keep loading the target and the
    run directory would stay unfinished. Raised as KeyboardInterrupt, SIGTERM takes the path
    Ctrl-C takes: stop Locust, write what was measured, exit 128 + the signal's number.
    """

    def __init__(self) -> None:
        self.first: int | None = None
        self._saved: Any = None

    def _raise(self, signum: int, frame: object) -> None:
        if self.first is None:
            self.first = signum
        raise KeyboardInterrupt

    def __enter__(self) -> _Signals:
        self.first = None
        if threading.current_thread() is threading.main_thread():
            self._saved = signal.signal(signal.SIGTERM, self._raise)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            signal.signal(signal.SIGTERM, self._saved)

    def exit_code(self) -> int:
        """128 + the number of the first signal (SIGINT: 130, SIGTERM: 143)."""
        return 128 + (self.first or signal.SIGINT)


def handle_errors(func: F) -> F:
    """Wrap a command so a CapplanError prints `error: ...` on stderr and exits with its code,
    and Ctrl-C or SIGTERM prints `interrupted` and exits 130 or 143."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _Signals() as signals:
            try:
                return func(*args, **kwargs)
            except CapplanError as err:
                typer.echo(f"error: {err}", err=True)
                raise typer.Exit(err.exit_code) from None
            except KeyboardInterrupt:
                typer.echo("interrupted", err=True)
                raise typer.Exit(signals.exit_code()) from None

    return wrapper  # type: ignore[return-value]


ModelT = TypeVar("ModelT", bound="BaseModel")


def build_options(model: type[ModelT], flags: Mapping[str, str], /, **values: Any) -> ModelT:
    """A command's options model from its CLI values: the model holds each option's bounds and
    default once; a value it refuses becomes the project's error (exit 2) naming the option
    as the user typed it (`flags`: field -> --option, for fields named otherwise than
    `--field-name`; a nested field by its dotted path), in check_number's words where the
    refusal is a bound."""
    from contracts.options import build

    def flag(path: str) -> str:
        field = path.split(".", 1)[0]
        return flags.get(path) or flags.get(field) or "--" + field.replace("_", "-")

    return build(model, flag, **values)


def check_number(
    option: str,
    value: float | None,
    *,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
) -> None:
    """Raise ConfigError `OPTION VALUE: expected a finite number > GT ...` unless `value` is
    None (not given) or finite and within every bound given (NaN and infinities never are)."""
    if value is None:
        return
    bounds = [
        f"{op} {bound:g}"
        for op, bound in ((">", gt), (">=", ge), ("<", lt), ("<=", le))
        if bound is not None
    ]
    inside = math.isfinite(value) and all(
        bound is None or test(value, bound)
        for bound, test in (
            (gt, operator.gt),
            (ge, operator.ge),
            (lt, operator.lt),
            (le, operator.le),
        )
    )
    if not inside:
        kind = "a whole number" if isinstance(value, int) else "a finite number"
        raise ConfigError(f"{option} {value:g}: expected {kind} {' and '.join(bounds)}".rstrip())


def parse_share(option: str, text: str) -> float:
    """A share given as a fraction (`0.2`, at most 1) or a percent (`20%`, any size >= 0).

    A bare number above 1 is refused with a hint (`--headroom 20` meant 20 %, not 2000 %):
    raises ConfigError naming the option and both accepted forms.
    """
    given = text.strip()
    percent = given.endswith("%")
    try:
        value = float(given[:-1] if percent else given)
    except ValueError:
        raise ConfigError(
            f"{option} {text!r}: expected a fraction such as 0.2 or a percent such as 20%"
        ) from None
    share = value / 100.0 if percent else value
    if not math.isfinite(share) or share < 0:
        raise ConfigError(f"{option} {text}: expected a share >= 0, e.g. 0.2 or 20%")
    if not percent and share > 1:
        raise ConfigError(
            f"{option} {text}: a fraction is at most 1; for {value:g} percent write {value:g}% "
            f"(or {value / 100:g})"
        )
    return share


def parse_fraction(
    option: str, text: str, *, positive: bool = False, below_one: bool = False
) -> float:
    """A share of a whole, at most 1 (below 1 with `below_one`, above 0 with `positive`),
    written as a fraction (`0.99`) or a percent (`99%`): the one parser of every fraction
    option. `parse_share` reads the text (a bare `99` gets the hint `write 99% (or 0.99)`);
    ConfigError names the option and the bounds."""
    share = parse_share(option, text)
    if (positive and share <= 0) or share > 1 or (below_one and share >= 1):
        low, high = ("> 0" if positive else ">= 0"), ("< 1" if below_one else "<= 1")
        raise ConfigError(
            f"{option} {text.strip()}: expected a share {low} and {high}, e.g. 0.95 or 95%"
        )
    return share


FRACTION_HINT = "A fraction (0.2) or a percent (20%)."

# A duration as Prometheus, Locust and Kubernetes write one: 500ms, 90s, 5m, 2h, 1h30m (parts
# largest first), or bare seconds (90, 0.5). Every time option of capplan takes one, and its
# name carries no unit (`--steady-duration 2m`, not `--steady-s 120`).
_CLI_UNITS = ("ms", "s", "m", "h", "d")


def duration(text: str | float) -> float:
    """Seconds from a duration (`90`, `0.5`, `500ms`, `90s`, `5m`, `1h30m`; units largest
    first, each once); ValueError `TEXT: expected ...` otherwise, and for a negative or
    non-finite value (for "no limit", write a long duration). `duration_option` reads every
    time option with it and names the option in the refusal."""
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        given = text.strip().lower()
        try:
            seconds = float(given)
        except ValueError:
            seconds = _duration_parts(text, given)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{text}: expected a duration >= 0, e.g. 90s or 5m")
    return seconds


def _duration_parts(text: str, given: str) -> float:
    seconds = duration_s(given, _CLI_UNITS, combined=True)
    if seconds is None:
        raise ValueError(
            f"{text!r}: expected a duration: seconds (90) or with a unit (500ms, 90s, 5m, 1h30m)"
        )
    return seconds


def _duration_option(text: str | float) -> float:
    """typer's `parser` of a time option: `duration`; its refusal (not wrapped in pydantic's
    "Value error," as a plain ValueError would be) becomes `error: --OPTION '5x': expected a
    duration ...`, exit 2, in `_RenamedOptions.parse_args`."""
    from pydantic_core import PydanticCustomError

    try:
        return duration(text)
    except ValueError as err:
        raise PydanticCustomError("duration", str(err).replace("{", "{{")) from None


DURATION = _duration_option


def _one_whole_option(text: str | int) -> int:
    """typer's `parser` of a whole-number option where a command takes one configuration
    (emulate, calibrate, compare `--tp`/`--pp`): a list is refused with where lists go."""
    from pydantic_core import PydanticCustomError

    given = str(text).strip()
    if "," in given:
        raise PydanticCustomError(
            "one_value",
            f"{given}: this command takes one value; compare several with `capplan whatif`, "
            "which takes a list",
        )
    try:
        return int(given)
    except ValueError:
        raise PydanticCustomError("whole", f"{given!r}: expected a whole number") from None


ONE_WHOLE = _one_whole_option

# parsers whose refusal `_RenamedOptions` prints as the project's one `error:` line
_ONE_LINE_PARSERS = (DURATION, ONE_WHOLE)


def _parser(param: Any) -> Any:
    info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
    return getattr(info, "parser", None)


def is_duration(param: Any) -> bool:
    """Whether a typer parameter is a time option (its parser is DURATION)."""
    return _parser(param) is DURATION


DURATION_METAVAR = "<duration>"


def duration_option(*default_and_names: Any, help: str) -> Any:
    """A time option: `typer.Option(default, "--name", help=...)` read by DURATION (90, 90s,
    5m) and shown as <duration>; in an `Annotated` type, `duration_option("--name", help=...)`."""
    return typer.Option(*default_and_names, parser=DURATION, metavar=DURATION_METAVAR, help=help)


def one_value(option: str, text: str, reason: str) -> str:
    """`text` stripped, or ConfigError `OPTION A,B: REASON` when it is a comma-separated list
    where the command takes one value (the reason names the command that takes the list)."""
    if "," in text:
        raise ConfigError(f"{option} {text}: {reason}")
    return text.strip()


def one_growth(command: str, text: str) -> float:
    """The --growth of a command that compares at one growth factor: a number > 0; a list is
    refused with the reason and the command that takes one (ConfigError)."""
    reason = (
        f"{command} compares at one growth factor; for growth scenarios use "
        f"`capplan plan --growth {text}`"
    )
    value = one_value("--growth", text, reason)
    try:
        factor = float(value)
    except ValueError:
        raise ConfigError(f"--growth {text!r}: expected a factor such as 1.3") from None
    check_number("--growth", factor, gt=0)
    return factor


# Old spellings kept for one release (command -> old -> new): each still works and says its
# new name on stderr. The CLI reference lists them (scripts/gen_cli_docs.py).
DEPRECATED_OPTIONS: dict[str, dict[str, str]] = {
    "calibrate": {"--budget-s": "--budget"},
    "demo": {"--out": "--output"},
    "emulate": {
        "--host": "--bind",
        "--speed": "--time-scale",
        "--step-overhead-s": "--step-overhead",
    },
    "lb": {"--wait-s": "--wait-timeout"},
    "limit": {"--out": "--output"},
    "loadtest": {"--out": "--output", "--plan": "--stage-plan", "--speed": "--replay-speed"},
    "plan": {"--cold-start-s": "--cold-start"},
    "profile": {"--engine": "--metric-names", "--format": "--log-format"},
    "report": {"--out": "--output"},
    "verify": {
        "--out": "--output",
        "--steady-s": "--steady-duration",
        "--burst-s": "--burst-duration",
        "--recovery-s": "--recovery-timeout",
        "--wait-s": "--wait-timeout",
    },
    "whatif": {"--calibrate": "--measured-limit", "--level-s": "--level-duration"},
}


def renamed_args(command: str, args: list[str], warn: Callable[[str], None]) -> list[str]:
    """`args` with each deprecated spelling of `command` (`--old` or `--old=VALUE`) replaced by
    its new name, calling `warn("--old is deprecated; use --new")` once per use. Arguments
    after `--` are left as they are."""
    renames = DEPRECATED_OPTIONS.get(command, {})
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        name, eq, value = arg.partition("=")
        new = renames.get(name)
        if new is not None:
            warn(f"{name} is deprecated; use {new}")
            arg = new + eq + value
        out.append(arg)
    return out


class _RenamedOptions(typer.core.TyperCommand):
    """A command that still takes its deprecated option spellings (DEPRECATED_OPTIONS) and
    names them at the end of its --help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        renames = DEPRECATED_OPTIONS.get(self.name or "", {})
        if renames and not self.epilog:
            old = ", ".join(f"{before} (use {after})" for before, after in renames.items())
            self.epilog = f"Deprecated spellings, still taken for one release: {old}."

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from typer._click.exceptions import BadParameter

        warn = functools.partial(typer.echo, err=True)
        try:
            return super().parse_args(ctx, renamed_args(self.name or "", args, warn))
        except BadParameter as err:
            # a bad duration or list gets the project's one `error:` line, as a bad share does
            if err.param is None or _parser(err.param) not in _ONE_LINE_PARSERS:
                raise
            typer.echo(f"error: {max(err.param.opts, key=len)} {err.message}", err=True)
            raise typer.Exit(2) from None


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"capplan {__version__}")
        raise typer.Exit()


@_app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """capplan: evidence-based capacity planning for LLM serving."""


def _register_commands(names: tuple[str, ...] = COMMAND_MODULES) -> None:
    for name in names:
        importlib.import_module(f"capplan.commands.{name}").register(_app)
    for info in _app.registered_commands:
        if info.cls in (None, typer.core.TyperCommand):
            info.cls = _RenamedOptions


def _wanted_commands(argv: list[str]) -> tuple[str, ...]:
    """The one command named on the command line, or all of them (for --help and the like).

    Importing a command module pulls in its library (polars, locust, the engine, reportlab);
    `capplan profile` should not pay for `capplan report`'s imports at start-up.
    """
    first = next((a for a in argv if not a.startswith("-")), None)
    if first in COMMAND_MODULES:
        return (first,)
    return COMMAND_MODULES


def main() -> None:
    """Console-script entry point: registers only the command asked for, then runs it."""
    # numpy's OpenBLAS starts a worker thread per core that spins for about 0.1 s of CPU
    # after numpy's import, and capplan's vectors are too short for threaded BLAS to help.
    # Set before anything imports numpy; a user's own setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # The imports (typer, pydantic, polars) allocate objects by the hundred thousand: at the
    # default threshold of 700 the collector runs about 140 times during start-up.
    gc.set_threshold(10_000, 10, 10)
    _register_commands(_wanted_commands(sys.argv[1:]))
    sys.exit(_app())


def __getattr__(name: str) -> Any:
    # `from capplan.cli import app` (tests, docs) gets the app with every command registered.
    if name == "app":
        return full_app()
    raise AttributeError(name)


_registered_all = False


def full_app() -> typer.Typer:
    """The app with every command registered (for tests and documentation)."""
    global _registered_all
    if not _registered_all:
        _register_commands()
        _registered_all = True
    return _app
