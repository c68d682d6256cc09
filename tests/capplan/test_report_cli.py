"""`capplan report`: writes the PDF and prints its path; bad input exits 2 without a traceback."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from capplan.cli import app
from testkit.report_inputs import write_fixture

runner = CliRunner()


def test_report_command_writes_the_pdf(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    out = tmp_path / "reports" / "q1-zh.pdf"
    result = runner.invoke(
        app,
        [
            "report",
            "--profile",
            str(paths.profile),
            "--run",
            str(paths.run_dir),
            "--plan",
            str(paths.plan),
            "--previous",
            str(paths.previous),
            "--lang",
            "zh",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert str(out) in result.output
    assert out.read_bytes().startswith(b"%PDF")


def test_report_command_rejects_bad_input(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    base = [
        "report",
        "--profile",
        str(paths.profile),
        "--run",
        str(paths.run_dir),
        "-o",
        str(tmp_path / "x.pdf"),
    ]
    result = runner.invoke(app, [*base, "--plan", str(tmp_path / "missing.json")])
    assert result.exit_code == 2
    assert "missing.json: plan not found" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, [*base, "--plan", str(paths.plan), "--lang", "fr"])
    assert result.exit_code == 2 and "--lang 'fr': expected en or zh" in result.output


def test_report_command_rejects_an_unusable_cjk_font(tmp_path: Path) -> None:
    paths = write_fixture(tmp_path)
    not_a_font = tmp_path / "font.ttf"
    not_a_font.write_text("not a font")
    out = tmp_path / "x.pdf"
    inputs = ["--profile", str(paths.profile), "--run", str(paths.run_dir)]
    args = [*inputs, "--plan", str(paths.plan), "--cjk-font", str(not_a_font)]
    result = runner.invoke(app, ["report", *args, "--lang", "zh", "-o", str(out)])
    assert result.exit_code == 2
    assert f"--cjk-font {not_a_font}: reportlab cannot read it" in result.output
    assert "Traceback" not in result.output and not out.exists()
