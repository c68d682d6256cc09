"""One word for one thing across commands: every command's `-o` is `--output`; each old
spelling (capplan.cli.DEPRECATED_OPTIONS) still reaches its new option for one release and
says its new name on stderr; plan refuses a list where whatif compares one, whatif and compare
refuse a list of growth factors, each with the reason; fraction options take a percent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from capplan.cli import DEPRECATED_OPTIONS, app, parse_fraction, renamed_args
from contracts.errors import ConfigError
from testkit.report_inputs import planning_inputs

DEAD = "http://127.0.0.1:9"
LOAD = ["loadtest", "--host", DEAD, "--model", "m", "--rate", "1"]


def _commands() -> dict[str, object]:
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    inputs = planning_inputs(tmp_path_factory.mktemp("vocab"))
    inputs["taken"] = inputs["root"] / "taken"
    inputs["taken"].write_text("not a folder")
    return inputs


def test_every_output_option_is_spelled_output() -> None:
    """Would fail for a command whose -o is only --out (or anything else)."""
    seen = []
    for name, command in _commands().items():
        for param in command.params:  # type: ignore[attr-defined]
            opts = getattr(param, "opts", [])
            if "-o" in opts:
                assert "--output" in opts, (name, opts)
                seen.append(name)
    assert {"loadtest", "limit", "plan", "report", "demo"} <= set(seen)


def _alias_cases(f: dict[str, Path]) -> dict[tuple[str, str], tuple[list[str], str]]:
    """(command, old spelling) -> (arguments with the old spelling, what shows that the value
    reached the new option)."""
    profile, taken = str(f["profile"]), str(f["taken"])
    whatif = ["whatif", "--profile", profile, "--slo", "ttft:p95<=2s", "-o", str(f["root"] / "w")]
    missing = str(f["root"] / "missing.json")
    return {
        ("demo", "--out"): (["demo", "--out", str(taken), "--lang", "xx"], "--lang 'xx'"),
        ("emulate", "--speed"): (["emulate", "--speed", "0"], "--time-scale 0: expected"),
        ("emulate", "--host"): (
            ["emulate", "--host", "127.0.0.1", "--time-scale", "0"],
            "--time-scale 0: expected",
        ),
        ("profile", "--format"): (
            ["profile", "sample:azure_conv", "--format", "weblog", "-o", str(f["root"] / "q.json")],
            "unknown format 'weblog'",
        ),
        ("limit", "--out"): (
            ["limit", "--host", DEAD, "--model", "m", "--slo", "ttft:p95<=1s", "--out", taken],
            "a file exists there",
        ),
        ("loadtest", "--out"): ([*LOAD, "--duration", "1", "--out", taken], "a file exists there"),
        ("loadtest", "--plan"): (
            [*LOAD, "--plan", "nosuch", "-o", str(f["root"] / "r")],
            "unknown plan 'nosuch'",
        ),
        ("loadtest", "--speed"): ([*LOAD, "--speed", "0", "-o", taken], "--replay-speed 0"),
        ("profile", "--engine"): (
            ["profile", "--preset", "chat", "--engine", "vllm", "-o", str(f["root"] / "p.json")],
            "wrote",
        ),
        ("report", "--out"): (["report", "--profile", profile, "--out", missing], "missing --plan"),
        ("verify", "--out"): (
            ["verify", "--plan", missing, "--profile", profile, "--out", str(f["root"] / "v")],
            "missing.json",
        ),
        ("whatif", "--calibrate"): ([*whatif, "--calibrate", missing], "missing.json"),
        # time options: a bad duration named by the new spelling shows it reached it
        **{
            (command, old): ([command, old, "5x"], f"error: {new} '5x': expected a duration")
            for command, old, new in (
                ("calibrate", "--budget-s", "--budget"),
                ("emulate", "--step-overhead-s", "--step-overhead"),
                ("lb", "--wait-s", "--wait-timeout"),
                ("plan", "--cold-start-s", "--cold-start"),
                ("verify", "--steady-s", "--steady-duration"),
                ("verify", "--burst-s", "--burst-duration"),
                ("verify", "--recovery-s", "--recovery-timeout"),
                ("verify", "--wait-s", "--wait-timeout"),
                ("whatif", "--level-s", "--level-duration"),
            )
        },
    }


def test_every_deprecated_spelling_has_a_case() -> None:
    cases = _alias_cases({k: Path(k) for k in ("profile", "taken", "root")})
    assert set(cases) == {(c, old) for c, renames in DEPRECATED_OPTIONS.items() for old in renames}


@pytest.mark.parametrize(
    ("command", "old"), [(c, old) for c, renames in DEPRECATED_OPTIONS.items() for old in renames]
)
def test_a_deprecated_spelling_works_and_says_its_new_name(
    files: dict[str, Path], command: str, old: str
) -> None:
    """Would fail if the old spelling were dropped ('No such option'), reached another option,
    or worked in silence."""
    args, reached = _alias_cases(files)[(command, old)]
    result = CliRunner().invoke(app, args)
    new = DEPRECATED_OPTIONS[command][old]
    assert f"{old} is deprecated; use {new}" in result.stderr, result.output
    assert "No such option" not in result.output and "Traceback" not in result.output
    assert reached in result.output, result.output


def test_an_option_value_and_the_words_after_dashdash_keep_their_spelling() -> None:
    warned: list[str] = []
    args = ["--speed=3", "--model", "m", "--", "--speed"]
    assert renamed_args("emulate", args, warned.append) == [
        "--time-scale=3", "--model", "m", "--", "--speed"
    ]  # fmt: skip
    assert warned == ["--speed is deprecated; use --time-scale"]
    assert renamed_args("verify", ["--replay-speed", "2"], warned.append) == ["--replay-speed", "2"]


def _plan(f: dict[str, Path], out: Path) -> list[str]:
    limit = str(f["run"] / "limit.json")
    return ["plan", "--profile", str(f["profile"]), "--limit", limit, "-o", str(out)]


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("--gpu", "H100-80GB,A100-80GB", "use `capplan whatif --gpu H100-80GB,A100-80GB`"),
        ("--tp", "1,2", "use `capplan whatif --tp 1,2` to compare"),
        ("--pp", "1,2", "use `capplan whatif --pp 1,2` to compare"),
    ],
)
def test_plan_refuses_a_list_and_names_whatif(
    files: dict[str, Path], tmp_path: Path, option: str, value: str, reason: str
) -> None:
    """Would fail if plan took the first value, or refused without the reason."""
    result = CliRunner().invoke(app, [*_plan(files, tmp_path / "p.json"), option, value])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {option} {value}: plan sizes one configuration")
    assert reason in result.output and not (tmp_path / "p.json").exists()


@pytest.mark.parametrize(
    "args", [["emulate", "--tp", "1,2"], ["emulate", "--pp", "2,4"], ["calibrate", "--tp", "1,2"],
             ["compare", "--tp", "2,4"]],
)  # fmt: skip
def test_a_command_of_one_configuration_refuses_a_list_in_one_line(args: list[str]) -> None:
    """emulate, calibrate and compare serve or compare at one TP/PP: a list gets one `error:`
    line naming the option and where lists go (it got click's generic "Input should be a valid
    integer" box before)."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {args[1]} {args[2]}: this command takes one value; compare several with "
        "`capplan whatif`, which takes a list"
    ), result.output


@pytest.mark.parametrize("command", ["whatif", "compare"])
def test_a_growth_list_is_refused_where_one_growth_is_compared(
    files: dict[str, Path], tmp_path: Path, command: str
) -> None:
    out = str(tmp_path / "out.json")
    base = {
        "whatif": ["whatif", "--profile", str(files["profile"]), "--slo", "ttft:p95<=2s"],
        "compare": ["compare", str(files["run"]), "--profile", str(files["profile"])],
    }[command]
    result = CliRunner().invoke(app, [*base, "-o", out, "--growth", "1.0,1.3"])
    assert result.exit_code == 2, result.output
    assert f"{command} compares at one growth factor" in result.output
    assert "`capplan plan --growth 1.0,1.3`" in result.output


def test_a_fraction_is_a_fraction_or_a_percent_within_its_bounds() -> None:
    assert parse_fraction("--peak-quantile", "99%") == parse_fraction("--peak-quantile", "0.99")
    with pytest.raises(ConfigError, match=r"^--peak-quantile 99: .* write 99% \(or 0\.99\)$"):
        parse_fraction("--peak-quantile", "99")
    with pytest.raises(ConfigError, match=r"^--peak-quantile 120%: expected a share >= 0 and <= 1"):
        parse_fraction("--peak-quantile", "120%")
    with pytest.raises(ConfigError, match=r"^--tolerance 0%: expected a share > 0 and < 1"):
        parse_fraction("--tolerance", "0%", positive=True, below_one=True)


def test_plan_reads_99_percent_as_the_0_99_quantile(files: dict[str, Path], tmp_path: Path) -> None:
    """Would fail if `99%` were refused or read as another quantile than 0.99."""
    quantiles = []
    for given in ("0.99", "99%"):
        out = tmp_path / f"plan-{given}.json"
        args = [*_plan(files, out), "--peak-quantile", given, "--no-fleet-check"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        quantiles.append(json.loads(out.read_text())["inputs"]["peak_quantile"])
    assert quantiles == [0.99, 0.99]


def test_a_preset_reads_80_percent_as_a_share_of_0_8(tmp_path: Path) -> None:
    """Would fail if `80%` were refused or read as another share than 0.8 (0.5 differs)."""
    shares = []
    for given in ("0.8", "80%", "0.5"):
        out = tmp_path / f"p-{given}.json"
        args = ["profile", "--preset", "rag", "--shared-prefix-tokens", "512"]
        args += ["--shared-prefix-share", given, "-o", str(out), "-q"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        shares.append(out.read_bytes())
    assert shares[0] == shares[1] != shares[2]
    result = CliRunner().invoke(app, ["profile", "--preset", "rag", "--shared-prefix-tokens", "512",
                                      "--shared-prefix-share", "80",
                                      "-o", str(tmp_path / "x.json")])  # fmt: skip
    assert result.exit_code == 2 and "write 80% (or 0.8)" in result.output, result.output


def test_a_command_names_its_deprecated_spellings_in_its_help() -> None:
    result = CliRunner().invoke(app, ["loadtest", "--help"], terminal_width=200)
    text = " ".join(result.output.split())
    assert "--plan (use --stage-plan)" in text and "--speed (use --replay-speed)" in text, text
