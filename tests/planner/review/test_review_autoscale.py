"""`autoscale: true` in a review file: each service's plan carries the autoscaling study, and
its section in the PDF shows the policies against the static plan."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from capplan.cli import app
from tests.helpers.missing import missing

REVIEW = {
    "name": "2026-Q4",
    "scale_up_delay_s": 180,
    "autoscale": True,
    "services": [
        {"name": "chat", "profile": "preset:chat", "limit": "4rps", "slo": "ttft:p95<=2s"}
    ],
}


@pytest.mark.parametrize("autoscale", [True, False])
def test_review_has_autoscaling_section(tmp_path: Path, autoscale: bool) -> None:
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({**REVIEW, "autoscale": autoscale}))
    out = tmp_path / "q4.pdf"
    result = CliRunner().invoke(app, ["review", str(tmp_path / "r.yaml"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    review = json.loads(out.with_suffix(".json").read_text())
    study = review["services"][0]["plan"].get("autoscale")
    assert (study is not None) == autoscale
    if not shutil.which("pdftotext"):
        missing("pdftotext (poppler-utils) not installed")
    text = subprocess.run(
        ["pdftotext", str(out), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert ("Autoscaling policies, simulated" in text) == autoscale
    if autoscale:
        assert study["cold_start_s"] == 180 and "180 s cold start" in text
        assert "* " + study["recommended"] in text
