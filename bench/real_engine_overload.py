"""How repeatable is llama.cpp's throughput on this machine, in closed loop and overloaded?

    python bench/real_engine_overload.py [--rate 22] [--repeats 3] [--out DIR]

On a fresh server each time (the random tiny Llama of testkit/real_engine.py, 4 slots,
1 thread, preset A of bench/real_engine_prediction.py): 15 s of 8 closed-loop users, then
40 s of open-loop Poisson arrivals at `--rate` req/s, as `capplan limit` runs its steps
(planner.limit.measured.live.run_stage). Prints per run the requests a second each stage ended and
its TTFT, and the server's own time per decoded token (its log's `eval time`, median and
90th percentile over the run). A real engine with no computed truth is checked against a
long measured search (issue 28); this says how far that reference itself moves from one
server to the next.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from bench.settle_real_engine import preset_a_target  # noqa: E402
from contracts.run import Stage  # noqa: E402
from contracts.rundir import read_records  # noqa: E402
from planner.limit.measured.live import run_stage  # noqa: E402
from testkit.real_engine import build_random_llama  # noqa: E402

EVAL = re.compile(r"\|\s+eval time =\s+([\d.]+) ms /\s+(\d+) tokens")  # not "prompt eval"


def token_ms(log: Path) -> np.ndarray:
    """Per request, the server's milliseconds per decoded token (its `eval time` lines)."""
    found = [EVAL.search(line) for line in log.read_text(errors="replace").splitlines()]
    return np.array([float(m[1]) / int(m[2]) for m in found if m and int(m[2]) > 0])


def one_run(gguf: Path, out: Path, rate: float) -> None:
    server, config = preset_a_target(gguf, out, drain_s=2.0)
    stages = [
        Stage(name="closed-8", kind="closed", role="level", duration_s=15.0, users=8),
        Stage(name="open", kind="open", role="level", duration_s=40.0, rate_rps=rate),
    ]
    shown: list[str] = []
    try:
        for index, stage in enumerate(stages, 1):
            summary = run_stage(config, out / "run", stage, seed_index=index,
                                append=index > 1, progress=None)  # fmt: skip
            records = read_records(out / "run").filter(pl.col("stage") == stage.name)
            ok = records.filter(pl.col("ok").fill_null(False))
            shown.append(f"{stage.name} {ok.height / summary.duration_s:5.1f} req/s "
                         f"(TTFT p50 {ok['ttft_s'].quantile(0.5):.2f} s)")  # fmt: skip
    finally:
        server.stop()
    ms = token_ms(out / "llama.log")
    print(f"  {'; '.join(shown)}; server ms/token median {np.median(ms):.2f}, "
          f"p90 {np.quantile(ms, 0.9):.2f}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--rate", type=float, default=22.0, help="the open-loop stage's req/s")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="overload-"))
    out.mkdir(parents=True, exist_ok=True)
    gguf = out / "tiny.gguf"
    build_random_llama(gguf)
    print(f"8 closed-loop users for 15 s, then {a.rate:g} req/s open loop for 40 s, "
          f"a fresh llama.cpp server each run")  # fmt: skip
    for k in range(a.repeats):
        one_run(gguf, out / f"run-{k + 1}", a.rate)


if __name__ == "__main__":
    main()
