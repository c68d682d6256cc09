"""`capplan calibrate` against the emulator over HTTP: runs repeated against one server (its
prefix cache keeps every prompt it has seen) and the precision the emulator states."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from planner.emulator import running_emulator
from planner.engine import build_engine_config

pytestmark = pytest.mark.integration

runner = CliRunner()
MODEL = "llama-3.1-8b"
SPEED = 10.0  # the emulator's time scale: a round of probes in well under a second


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    config = build_engine_config("H100-80GB", MODEL, engine="vllm", quantization="fp8")
    with running_emulator(config, speed=SPEED) as url:
        yield url


def _calibrate(url: str, out: Path, *extra: str) -> tuple[int, str]:
    result = runner.invoke(
        app,
        ["calibrate", "--host", url, "--model", MODEL, "--gpu", "H100-80GB", "--engine", "vllm",
         "--quantization", "fp8", "--budget", "1", "--max-drift", "0.9", "-o", str(out), *extra],
    )  # fmt: skip
    return result.exit_code, result.output


def test_two_runs_draw_their_own_prompts_and_a_repeated_seed_is_refused(
    emulator: str, tmp_path: Path
) -> None:
    """Would fail with a fixed default seed (the second run's prompts are cache hits) or
    without the hit counter's check (the repeated --seed would be fitted, exit 0)."""
    seeds = []
    for i in (1, 2):
        code, output = _calibrate(emulator, tmp_path / f"cal{i}.json")
        assert code == 0, output
        seeds.append(json.loads((tmp_path / f"cal{i}.json").read_text())["seed"])
    assert seeds[0] != seeds[1]
    code, output = _calibrate(emulator, tmp_path / "again.json", "--seed", str(seeds[0]))
    assert code == 1, output
    assert "prefix cache" in output and "vllm:prefix_cache_hits_total" in output
    assert not (tmp_path / "again.json").exists()


def test_a_precision_other_than_the_emulators_is_refused_naming_both(
    emulator: str, tmp_path: Path
) -> None:
    code, output = _calibrate(emulator, tmp_path / "x.json", "--quantization", "none")
    assert code == 2, output
    assert "--quantization none" in output and "states quantization fp8" in output
    code, output = _calibrate(emulator, tmp_path / "y.json", "--kv-cache-dtype", "fp8")
    assert code == 2, output
    assert "--kv-cache-dtype fp8" in output and "states kv-cache-dtype auto" in output
