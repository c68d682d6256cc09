"""`capplan calibrate` against a real engine: llama.cpp's server (xllamacpp) on a tiny Llama.

A short budget (three rounds of the probes, about half a minute on two shared cores); the
drift bound is loose because the machine is shared: this test checks the file, not the
server's steadiness (tests/planner/calibrate/test_calibrate_fit.py checks the refusal).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.calibration import CALIBRATION_SCHEMA, load_calibration_file

real_engine = pytest.importorskip("testkit.real_engine")
cpu_catalog = pytest.importorskip("testkit.cpu_catalog")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SLOTS = 2
N_CTX = 4096


def test_calibrate_writes_factors_probes_drift_and_held_out_error(tmp_path: Path) -> None:
    model = real_engine.build_random_llama(tmp_path / "tiny.gguf")
    catalog = cpu_catalog.write_cpu_catalog(
        tmp_path / "catalog.yaml", real_engine.LlamaShape(), N_CTX, SLOTS
    )
    server = real_engine.start_llama_server(
        model, n_parallel=SLOTS, n_ctx=N_CTX, log_path=tmp_path / "llama.log"
    )
    out = tmp_path / "cal.json"
    try:
        result = CliRunner().invoke(
            app,
            [
                "calibrate",
                "--host", server.url,
                "--model", server.model,
                "--engine", "llamacpp",
                "--gpu", "this-cpu",
                "--catalog", str(catalog),
                "--budget", "10",
                "--max-drift", "1.0",
                "-o", str(out),
            ],
        )  # fmt: skip
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    cal = load_calibration_file(out)
    assert cal.schema_ == CALIBRATION_SCHEMA
    assert cal.engine == "llamacpp"
    assert cal.kv.slots == SLOTS and cal.kv.tokens == N_CTX
    assert cal.factors["max_num_seqs"].value == SLOTS
    assert {"mfu", "mbu", "step_overhead_s", "seq_overhead_s", "frontend_s"} <= set(cal.factors)
    assert all(f.source for f in cal.factors.values())
    assert cal.drift.rounds >= 3
    assert cal.held_out.probes and cal.held_out.median_abs_error >= 0
    held = [p for p in cal.probes if p.held_out]
    assert held and all(p.error is not None for p in held)
    assert "held-out error" in result.output
