"""The review file: one clear message naming the service and the field, exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.errors import InputError
from planner.review.config import load_review

GOOD = """
services:
  - name: chat
    profile: preset:chat
    limit: 2rps
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "review.yaml"
    path.write_text(text)
    return path


def test_headroom_as_a_percent_is_the_same_fraction(tmp_path: Path) -> None:
    spec = load_review(_write(tmp_path, GOOD + "    headroom: 20%\n"))
    assert spec.services[0].headroom == 0.2


def test_good_file_defaults(tmp_path: Path) -> None:
    spec = load_review(_write(tmp_path, GOOD))
    assert spec.services[0].headroom == 0.2
    assert spec.services[0].growth is None
    assert spec.confidence == 0.9


def test_the_slo_is_read_once_and_written_back_as_given(tmp_path: Path) -> None:
    spec = load_review(_write(tmp_path, GOOD + '    slo: "TTFT:p95 <= 2000ms"\n'))
    slo = spec.services[0].slo
    assert slo is not None and slo.ttft_bound_s == 2.0
    assert spec.model_dump(mode="json")["services"][0]["slo"] == "TTFT:p95 <= 2000ms"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD + "    headroom: -1\n", "service 'chat', field headroom"),
        (
            GOOD + "    headroom: 20\n",
            "field headroom: a fraction is at most 1; for 20 percent write '20%'",
        ),
        (GOOD + "    headroom: 2x%\n", "service 'chat', field headroom"),
        (GOOD + "    gpus: 4\n", "service 'chat', field gpus: Extra inputs"),
        (GOOD + '    slo: "ttft:p95<2s"\n', "service 'chat', field slo: SLO 'ttft:p95<2s'"),
        (GOOD.replace("    profile: preset:chat\n", ""), "give exactly one of profile or logs"),
        (GOOD.replace("    limit: 2rps\n", ""), "service 'chat', field limit: Field required"),
        (GOOD + GOOD.split("services:\n")[1], "service names must be unique; repeated: chat"),
        ("services: []\n", "field services"),
        ("- a\n", "expected a mapping"),
        ("services: [\n", "not valid YAML"),
    ],
)
def test_bad_file_names_service_and_field(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(InputError, match="review.yaml: ") as info:
        load_review(_write(tmp_path, text))
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("replace", "expected"),
    [
        (("2rps", "2"), "service 'chat', field limit: --limit '2': a number needs its unit"),
        (("2rps", "nope.json"), "service 'chat', field limit"),
        (("preset:chat", "preset:nosuch"), "service 'chat', field profile: unknown preset"),
        (("preset:chat", "missing.json"), "service 'chat', field profile"),
    ],
)
def test_cli_bad_service_exit_2(tmp_path: Path, replace: tuple[str, str], expected: str) -> None:
    path = _write(tmp_path, GOOD.replace(*replace))
    result = CliRunner().invoke(app, ["review", str(path), "-o", str(tmp_path / "r.pdf")])
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "r.pdf").exists()
