"""Does a level after an overloaded one measure its own load on llama.cpp?

    python bench/settle_real_engine.py [--out DIR] [--overload RPS] [--rate RPS]

llama.cpp learns that a request was cancelled only when a slot starts it. On a fresh server
each time (the random tiny Llama of testkit/real_engine.py, 4 slots, 1 thread, preset A of
bench/real_engine_prediction.py), two levels as `capplan limit` runs them
(planner.limit.measured.live.run_stage): 20 s at `--overload` req/s, whose queued requests the load
test cancels 1 s after it stops sending, then 20 s at `--rate` req/s. Once without the wait
for a settled server (the baseline), once with it (planner.limit.measured.settle). Prints, per run,
what the first level left cancelled, how long the wait took, and the second level's TTFT
percentiles; the second level of a settled server should show its idle TTFT.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import polars as pl  # noqa: E402

from bench.real_engine_prediction import PRESET_A  # noqa: E402
from contracts.run import Stage  # noqa: E402
from contracts.rundir import read_records  # noqa: E402
from planner.limit.measured.live import run_stage  # noqa: E402
from planner.loadtest.run import LoadTestConfig  # noqa: E402
from profiles.model import save_profile  # noqa: E402
from testkit.profiles import make_profile  # noqa: E402
from testkit.real_engine import LlamaServer, build_random_llama, start_llama_server  # noqa: E402

LEVEL_S = 20.0


def preset_a_target(gguf: Path, out: Path, drain_s: float) -> tuple[LlamaServer, LoadTestConfig]:
    """A fresh llama.cpp server on `gguf` (its log in `out`) and a load test of preset A
    against it."""
    out.mkdir(parents=True)
    profile = out / "preset_A.json"
    save_profile(make_profile(PRESET_A, rate_rps=5.0), profile)
    server = start_llama_server(gguf, log_path=out / "llama.log")
    config = LoadTestConfig(host=server.url, model=server.model, profile_path=str(profile),
                            drain_s=drain_s)  # fmt: skip
    return server, config


def two_levels(gguf: Path, out: Path, overload: float, rate: float, settle: bool) -> None:
    """The two levels on a fresh server; prints what they showed."""
    server, config = preset_a_target(gguf, out, drain_s=1.0)
    waits: list[str] = []
    try:
        for index, level_rate in ((1, overload), (2, rate)):
            stage = Stage(name=f"level-{index:02d}", kind="open", role="level",
                          duration_s=LEVEL_S, rate_rps=level_rate)  # fmt: skip
            started = time.monotonic()
            summary = run_stage(config, out / "run", stage, seed_index=index, append=index > 1,
                                progress=None, echo=waits.append, settle_first=settle)  # fmt: skip
            took = time.monotonic() - started
            print(f"  {stage.name} at {level_rate:g} req/s: {summary.completed} ended, "
                  f"{dict(summary.errors_by_class)} ({took:.0f} s)")  # fmt: skip
    finally:
        server.stop()
    for line in waits:
        print("  " + line)
    second = read_records(out / "run").filter(pl.col("stage") == "level-02")
    ttft = second["ttft_s"]
    print(f"  level-02 TTFT p50 {ttft.quantile(0.5):.3f} s, p95 {ttft.quantile(0.95):.3f} s, "
          f"max {ttft.max():.3f} s; {int(second['ok'].fill_null(False).sum())} of "
          f"{second.height} ended ok", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--overload", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=5.0)
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="settle-"))
    gguf = out / "tiny.gguf"
    out.mkdir(parents=True, exist_ok=True)
    build_random_llama(gguf)
    for settle in (False, True):
        print("with the wait for a settled server" if settle else "without it (baseline)")
        two_levels(gguf, out / ("settled" if settle else "baseline"), a.overload, a.rate, settle)


if __name__ == "__main__":
    main()
