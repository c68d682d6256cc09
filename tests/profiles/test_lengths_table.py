"""A table of lengths without arrival times (a benchmark dataset) sent at --rate-rps as a
Poisson process, as vLLM's benchmark (--request-rate) and guidellm (poisson) send one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from capplan.cli import app

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture(scope="module")
def lengths(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    inp = rng.integers(20, 2000, 4000)
    out = rng.integers(5, 800, 4000)
    path = tmp_path_factory.mktemp("lengths") / "dataset.csv"
    rows = "".join(f"{i},{o}\n" for i, o in zip(inp, out, strict=True))
    path.write_text("input_tokens,output_tokens\n" + rows)
    return path, inp, out


def _profile(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["profile", *args])
    return result.exit_code, result.output


def test_a_lengths_table_is_sent_as_a_poisson_stream_at_the_rate(
    lengths: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path
) -> None:
    """4,000 rows at 4 req/s: the profile's mean rate is 4 within 5 % (a Poisson count's
    sd is 1.6 %), its inter-arrival CV within 0.1 of 1 (Poisson's), its lengths the file's
    own, and source.limitations says the arrivals were assumed. Read whole or in chunks of
    700 rows, the arrivals are the same. Fails if the rate or the gaps' law are wrong, or
    if chunks restart the clock."""
    path, inp, out = lengths
    whole, chunked = tmp_path / "whole.json", tmp_path / "chunked.json"
    code, output = _profile(str(path), "--rate-rps", "4", "-o", str(whole), "--quiet")
    assert code == 0, output
    args = [str(path), "--rate-rps", "4", "--chunk-rows", "700", "-o", str(chunked), "--quiet"]
    code, output = _profile(*args)
    assert code == 0, output
    p, c = json.loads(whole.read_text()), json.loads(chunked.read_text())
    arrivals = p["arrivals"]
    assert arrivals["mean_rate_rps"] == pytest.approx(4.0, rel=0.05)
    assert arrivals["interarrival_cv"] == pytest.approx(1.0, abs=0.1)
    assert p["lengths"]["input"]["mean"] == pytest.approx(inp.mean())
    assert p["lengths"]["output"]["mean"] == pytest.approx(out.mean())
    (lim,) = p["source"]["limitations"]
    assert "Poisson arrivals at 4 req/s" in lim["assumption"]
    assert c["source"]["read_in_chunks"]["chunks"] == 6  # not a fallback to the whole read
    for key in ("mean_rate_rps", "interarrival_cv", "duration_s"):
        assert c["arrivals"][key] == pytest.approx(arrivals[key], rel=1e-9), key


def test_rate_rps_refuses_logs_with_their_own_arrivals(tmp_path: Path) -> None:
    """A table with a timestamp column, or an Azure trace, keeps its own arrivals: --rate-rps
    there exits 2 naming why; a rate <= 0 exits 2; a lengths table without --rate-rps says
    how to send it."""
    timed = tmp_path / "timed.csv"
    timed.write_text("timestamp,input_tokens,output_tokens\n0.5,10,5\n1.0,20,6\n")
    code, output = _profile(str(timed), "--rate-rps", "2", "-o", str(tmp_path / "p.json"))
    assert code == 2 and "has arrival times of its own (column 'timestamp')" in output
    azure = SHARED / "AzureLLMInferenceTrace_conv.csv"
    code, output = _profile(str(azure), "--rate-rps", "2", "-o", str(tmp_path / "p.json"))
    assert code == 2 and "these logs are azure" in output
    plain = tmp_path / "plain.csv"
    plain.write_text("input_tokens,output_tokens\n10,5\n20,6\n")
    code, output = _profile(str(plain), "--rate-rps", "0", "-o", str(tmp_path / "p.json"))
    assert code == 2 and "--rate-rps 0: expected a finite number > 0" in output
    code, output = _profile(str(plain), "-o", str(tmp_path / "p.json"))
    assert code == 2 and "--rate-rps R sends it as a Poisson process" in " ".join(output.split())
    code, output = _profile(str(plain), "--rate-rps", "2", "--peak-to-mean", "3", "-o", "p.json")
    assert code == 2 and "--peak-to-mean only applies with --preset" in output


@pytest.mark.parametrize(("burstiness", "cv"), [(0.25, 2.0), (4.0, 0.5)])
def test_burstiness_draws_gamma_gaps_as_vllms_benchmark_does(
    lengths: tuple[Path, np.ndarray, np.ndarray], tmp_path: Path, burstiness: float, cv: float
) -> None:
    """vLLM's benchmark draws the gaps from a gamma law of shape `burstiness` and mean
    1 / rate: the inter-arrival CV is 1 / sqrt(shape), 2 at 0.25 and 0.5 at 4, and the mean
    rate stays the one asked (within 10 %, three standard errors at shape 0.25). Fails if the
    shape is ignored or the mean drifts with it."""
    path, _, _ = lengths
    out = tmp_path / "p.json"
    args = [str(path), "--rate-rps", "4", "--burstiness", str(burstiness), "-o", str(out)]
    code, output = _profile(*args, "--quiet")
    assert code == 0, output
    arrivals = json.loads(out.read_text())["arrivals"]
    assert arrivals["interarrival_cv"] == pytest.approx(cv, rel=0.15)
    assert arrivals["mean_rate_rps"] == pytest.approx(4.0, rel=0.10)
    assert f"gamma gaps of shape {burstiness:g}" in " ".join(output.split())


def test_burstiness_needs_a_rate_and_a_lengths_table(tmp_path: Path) -> None:
    out = str(tmp_path / "p.json")
    code, output = _profile(str(SHARED / "AzureLLMInferenceTrace_conv.csv"), "--burstiness", "2",
                            "-o", out)  # fmt: skip
    assert code == 2 and "--burstiness shapes the gaps of --rate-rps: give both" in output
    code, output = _profile("--preset", "chat", "--burstiness", "2", "-o", out)
    assert code == 2 and "--burstiness applies to a table of lengths" in output
    code, output = _profile("--preset", "chat", "--burstiness", "0", "-o", out)
    assert code == 2 and "--burstiness" in output
