"""`capplan compare` over two real measured configurations: llama.cpp with 2 and 4 slots.

Each configuration is measured by `capplan limit` (concurrency, TTFT SLO) on the same
profile, the search held to the two levels around the slot count (`--start SLOTS --max
SLOTS+1`; a request beyond the slots waits for a whole answer, see
tests/integration/test_limit_real_engine.py) to keep the test short. The TTFT threshold is
a lone request's whole time on the server just before (llama.cpp's own timings) plus
100 ms, so one user passes however busy the shared machine is; where each knee falls is left to
the measurement. compare then plans both for the profile's peak, ranks them by monthly cost
with the planner's arithmetic, and refuses a run of another profile with exit code 2.
"""

from __future__ import annotations

import json
import math
import os
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.limit import load_limit
from profiles.model import save_profile
from testkit.profiles import make_profile

real_engine = pytest.importorskip("testkit.real_engine")

# Left out of CI (its 30 minutes) unless CAPPLAN_LONG_TESTS=1.
LONG = "about 2 minutes of llama.cpp: set CAPPLAN_LONG_TESTS=1 (test_compare.py stays)"
pytestmark = [pytest.mark.integration, pytest.mark.slow]
pytestmark.append(pytest.mark.skipif(os.environ.get("CAPPLAN_LONG_TESTS") != "1", reason=LONG))

PROMPT, OUTPUT = 16, 128


def _threshold_ms(url: str) -> int:
    """A lone request's whole time (prefill + answer; median of 3) + 100 ms for the HTTP
    client and the chat template, in ms."""
    times = []
    for _ in range(3):
        body = {"prompt": "def main():" * 8, "n_predict": OUTPUT, "ignore_eos": True}
        req = urllib.request.Request(
            url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=120) as resp:
            t = json.loads(resp.read())["timings"]
        times.append(t["prompt_ms"] + t["predicted_ms"])
    return round(sorted(times)[1] + 100)


def _measure(model: Path, slots: int, profile: Path, out: Path, slo: str | None) -> str:
    """Measure one slot count; the SLO is made on the first server when not given."""
    server = real_engine.start_llama_server(
        model, n_parallel=slots, log_path=out.with_suffix(".log")
    )
    try:
        slo = slo or f"ttft:p95<={_threshold_ms(server.url)}ms"
        result = CliRunner().invoke(
            app,
            [
                "limit", "--host", server.url, "--model", server.model,
                "--profile", str(profile), "--slo", slo, "--dimension", "concurrency",
                "--start", str(slots), "--max", str(slots + 1), "--level-duration", "4",
                "--level-requests", "12", "--warmup", "1", "--min-completed", "10",
                "--effective-requests", "10", "--tail-requests", "0",
                "-o", str(out),
            ],
        )  # fmt: skip
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    return slo


def test_compare_ranks_two_llama_cpp_slot_counts(tmp_path: Path) -> None:
    model = real_engine.build_random_llama(tmp_path / "tiny.gguf")
    profile = tmp_path / "profile.json"
    save_profile(make_profile([(PROMPT, OUTPUT)], rate_rps=5.0), profile)
    runs = {slots: tmp_path / f"llama-{slots}slots" for slots in (2, 4)}
    slo = None
    for slots, out in runs.items():
        slo = _measure(model, slots, profile, out, slo)
        limit = load_limit(out)
        # One user always meets a threshold of a lone request's whole time.
        assert limit.feasible_max is not None and 1 <= limit.feasible_max <= slots + 1

    out = tmp_path / "compare.json"
    result = CliRunner().invoke(
        app,
        [
            "compare", str(runs[2]), str(runs[4]), "--profile", str(profile),
            "--gpu", "CPU-1core", "--gpu-hour-price", "0.05", "--peak-rps", "2",
            "--label", "2 slots,4 slots",
            "-o", str(out),
        ],
    )  # fmt: skip
    print(result.output)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    rows = {r["label"]: r for r in data["rows"]}
    for slots in (2, 4):
        row = rows[f"{slots} slots"]
        limit = load_limit(runs[slots])
        assert row["limit"] == limit.feasible_max and row["unit"] == "users"
        # The planner's arithmetic: peak users = peak rate x mean E2E at the limit
        # (Little's law), ceil(peak x 1.2 / limit) + 1 instances, 730 h x $0.05 each.
        assert limit.littles_law is not None
        users = data["peak_rps"] * limit.littles_law.mean_e2e_s
        assert row["instances"] == math.ceil(users * 1.2 / row["limit"] - 1e-9) + 1
        assert row["monthly_cost_usd"] == pytest.approx(row["gpus"] * 0.05 * 730)
    ranked = sorted(data["rows"], key=lambda r: r["rank"])
    assert [r["rank"] for r in ranked] == [1, 2]
    assert ranked[0]["monthly_cost_usd"] <= ranked[1]["monthly_cost_usd"]

    other = tmp_path / "other.json"
    save_profile(make_profile([(512, 64)], rate_rps=5.0), other)
    refused = CliRunner().invoke(
        app,
        ["compare", str(runs[2]), str(runs[4]), "--profile", str(other),
         "--gpu-hour-price", "0.05", "--peak-rps", "2", "-o", str(tmp_path / "c.json")],
    )  # fmt: skip
    assert refused.exit_code == 2
    assert "not comparable" in refused.output and "Traceback" not in refused.output
