"""`capplan profile` through the CLI: outputs, charts, presets, and clean errors (exit 2)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from capplan.cli import app
from profiles.model import load_profile
from testkit.logs import build_openai_log

runner = CliRunner()


def test_profile_sample_writes_json_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    res = runner.invoke(
        app, ["profile", "sample:azure_conv", "-o", str(out), "--plots", str(tmp_path / "charts")]
    )
    assert res.exit_code == 0, res.output
    assert "mean rate" in res.output and "input tokens" in res.output
    p = load_profile(out)
    assert p.source.format == "azure" and p.source.rows > 2000
    pngs = sorted(x.name for x in (tmp_path / "charts").glob("*.png"))
    assert {"arrival_rate.png", "lengths.png", "window_rates.png"} <= set(pngs)
    assert all((tmp_path / "charts" / n).stat().st_size > 5000 for n in pngs)


def test_profile_options_reach_the_profile(tmp_path: Path) -> None:
    openai_log_path, _, _ = build_openai_log(tmp_path, n=80)
    out = tmp_path / "p.json"
    res = runner.invoke(
        app,
        [
            "profile",
            str(openai_log_path),
            "-o",
            str(out),
            "--block-tokens",
            "32",
            "--cache-tokens",
            "4Ki,1Mi",
            "--group-by",
            "model",
            "--seed",
            "5",
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    p = load_profile(out)
    assert p.prefix.block_tokens == 32
    assert [pt.cache_tokens for pt in p.prefix.lru_hit_ratio] == [4096, 1 << 20]
    assert p.group_by == "model" and set(p.groups) == {"m1", "m2"}
    assert p.lengths.sampler.seed == 5


def test_preset_via_cli(tmp_path: Path) -> None:
    out = tmp_path / "pre.json"
    res = runner.invoke(app, ["profile", "--preset", "rag", "--rate-rps", "12", "-o", str(out)])
    assert res.exit_code == 0, res.output
    p = load_profile(out)
    assert p.source.format == "preset" and p.arrivals.mean_rate_rps == 12


def test_bad_rows_are_reported_with_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text(
        "arrival_s,input_tokens,output_tokens\n"
        + "".join(f"{i},{'x' if i % 3 == 0 else 5},1\n" for i in range(30))
    )
    res = runner.invoke(app, ["profile", str(f), "-o", str(tmp_path / "p.json"), "-q"])
    assert res.exit_code == 0, res.output
    assert f"{f}:2: bad or missing input tokens" in res.output
    assert "... and 5 more" in res.output


def _fails_cleanly(args: list[str], match: str) -> None:
    res = runner.invoke(app, ["profile", *args])
    assert res.exit_code == 2, res.output
    assert match in res.output
    assert "Traceback" not in res.output


def test_errors_exit_2_with_one_message(tmp_path: Path) -> None:
    empty = tmp_path / "e.csv"
    empty.write_text("")
    out = str(tmp_path / "p.json")
    _fails_cleanly([str(empty), "-o", out], "empty file")
    _fails_cleanly(
        ["sample:azure_conv", "--log-format", "weblog", "-o", out], "unknown format 'weblog'"
    )
    _fails_cleanly(
        [
            "sample:azure_conv",
            "--log-format",
            "table",
            "--columns",
            "arrival=TIMESTAMP,input=X,output=Y",
            "-o",
            out,
        ],
        "missing column 'X'",
    )
    _fails_cleanly(["-o", out], "no log files given")
    _fails_cleanly(["--preset", "video", "-o", out], "unknown preset")
    _fails_cleanly(
        ["sample:azure_conv", "--peak-to-mean", "3", "-o", out], "only applies with --preset"
    )
    _fails_cleanly(["sample:azure_conv", "--cache-tokens", "lots", "-o", out], "--cache-tokens")
    _fails_cleanly(["sample:azure_conv", "--group-by", "region", "-o", out], "--group-by")
