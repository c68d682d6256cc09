"""Every time option takes a duration as Prometheus, Locust and Kubernetes write one (90, 90s,
5m, 1h30m) and carries no unit in its name (issue 61: `--steady-s` beside `--level-duration`
was one meaning in two styles); bad durations exit 2 naming the option."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from capplan.cli import DEPRECATED_OPTIONS, app, duration
from tests.docs.test_generated import load_script

gen = load_script("gen_cli_docs")

# help words that say an option is a number of seconds: "(s)" or "(s; ..." after a space
_SECONDS = re.compile(r"(?<!\w)\(s[);]")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("0.5", 0.5), ("500ms", 0.5), ("90s", 90.0), ("5m", 300.0),
     ("1h30m", 5400.0), ("1.5m", 90.0), ("2h", 7200.0), ("1d", 86400.0), (" 5M ", 300.0)],
)  # fmt: skip
def test_a_duration_is_read_in_seconds(text: str, seconds: float) -> None:
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5m1h", "1m1m", "90x", "m", "", "1h 30m", "-3", "inf", "nan"])
def test_a_bad_duration_is_refused(text: str) -> None:
    """(The CLI names the option: the last test here.)"""
    with pytest.raises(ValueError, match=r"expected a duration"):
        duration(text)


def test_every_time_option_takes_a_duration_and_has_no_unit_in_its_name() -> None:
    """Would fail for verify's old `--steady-s` (a float, the unit in the name) and for any
    option whose help says it is seconds but that reads a bare float."""
    wrong = []
    for option, uses in gen.option_uses(gen.app_commands()).items():
        for use in uses:
            timed = (use.type == "duration" or _SECONDS.search(use.meaning or "")
                     or (option.endswith("-s") and use.type == "float"))  # fmt: skip
            if timed and (use.type != "duration" or option.endswith("-s")):
                wrong.append(f"{use.command} {option} ({use.type}): {use.meaning}")
    assert not wrong, "time options that are not durations:\n" + "\n".join(wrong)


def test_the_old_spellings_still_work_and_say_the_new_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`verify --steady-s 60` still parses (one release) and names --steady-duration."""
    assert DEPRECATED_OPTIONS["verify"]["--steady-s"] == "--steady-duration"
    result = CliRunner().invoke(
        app, ["verify", "--plan", str(tmp_path / "p.json"), "--profile", str(tmp_path / "x.json"),
              "-o", str(tmp_path / "run"), "--host", "http://127.0.0.1:9", "--steady-s", "5x"],
    )  # fmt: skip
    assert result.exit_code == 2
    output = " ".join(result.output.split())
    assert "--steady-s is deprecated; use --steady-duration" in output
    assert "error: --steady-duration '5x': expected a duration" in output
