"""Does the engine model's prediction hold on a real engine? llama.cpp on this CPU, tiny Llama.

    python bench/real_engine_prediction.py [--out DIR] [--result FILE.json]

1. Builds the random tiny Llama of testkit/real_engine.py and serves it with llama.cpp
   (xllamacpp, SLOTS slots, 1 thread, continuous batching).
2. A hardware entry of our own for this CPU (`this-cpu`), from measurements, written as a
   catalog (`catalog.yaml` in --out) next to the tiny model's shape (`tiny-llama`):
   - bf16_flops and attention_flops: from llama.cpp's own prefill times (`timings.prompt_ms`)
     of 128 and 1024 tokens, split into a cost per token (the matrix multiplies, 2 x params
     FLOPs) and a cost per (query, key) pair (attention, 4 x layers x heads x head_dim
     FLOPs); see measured_compute. What one thread of this CPU reaches on these matrices
     (mfu 1 means those rates);
   - hbm_bandwidth_bytes_per_s: a numpy copy of an array the size of the weights (read +
     write bytes / time; the weights one step reads stay in the CPU's caches);
   - memory_bytes: weights + the KV cache llama.cpp allocates (n_ctx tokens), so the
     engine model's KV capacity is the server's (utilisation 1, no activation reserve).
3. Measures the limit of preset A (short prompts, long answers: decode-bound) with
   `capplan limit --dimension rate`, calibrates the engine model to it
   (planner.fleet.calibration.calibrate: mfu, mbu, step overhead), then predicts the limit of
   preset B (long prompts, short answers: prefill-bound) with the same search and steady
   rules in virtual time (planner.limit.predict.predict_limit), and measures B with
   `capplan limit`.
   `--reanalyse DIR` repeats steps 3-4's model side over a finished run's work directory.
4. Prints both figures of B, the ratio, and the uncalibrated prediction; writes them with
   the hardware entry and the calibration to --result (the model, profiles, catalog and
   both run directories stay in --out, a temporary directory by default).

Takes about 10-15 minutes on two shared cores; the load average is printed before and
after (the Locust client shares the machine with the server).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contracts.limit import load_limit  # noqa: E402
from planner.engine import build_engine_config  # noqa: E402
from planner.fleet.calibration import Calibration, calibrate  # noqa: E402
from planner.limit.measured.search import SearchConfig  # noqa: E402
from planner.limit.measured.steady import SteadyRules  # noqa: E402
from planner.limit.predict import predict_limit  # noqa: E402
from planner.slo.spec import parse_slo  # noqa: E402
from profiles.model import save_profile  # noqa: E402
from testkit.cpu_catalog import model_params, write_cpu_catalog  # noqa: E402
from testkit.profiles import make_profile  # noqa: E402
from testkit.real_engine import (  # noqa: E402
    LlamaShape,
    build_random_llama,
    start_llama_server,
)

SLOTS = 4
N_CTX = 8192
PREFILL_TOKENS = (128, 1024)
# A: decode-bound chat; B: prefill-bound (long prompts, short answers). Prompt lengths as
# the profile asks them; the server counts about 3x as many (see served_lengths).
PRESET_A = [(24, 64), (32, 48), (16, 80)]
PRESET_B = [(96, 8), (128, 6), (64, 12)]
SLO = "e2e:p95<=4s"
LEVEL = ["--level-duration", "10", "--level-requests", "24", "--warmup", "3"]
LEVEL += ["--effective-requests", "0", "--tail-requests", "0"]
LEVEL += ["--min-completed", "20"]
# Short windows without the correlation-time window rules (the warm-up rules and certain
# passes stay at `capplan limit`'s defaults), the same for the prediction and the measurement.
RULES = SteadyRules(
    min_warmup_s=3.0,
    min_window_s=10.0,
    min_window_requests=24,
    effective_requests=0.0,
    tail_requests=0.0,
)


def _post(url: str, body: dict[str, object]) -> dict[str, object]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def _prompt_seconds(url: str, n: int, seed: int) -> float:
    """llama.cpp's own time (`timings.prompt_ms`) to prefill `n` random token ids."""
    ids = [int(x) for x in np.random.default_rng(seed).integers(10, 4000, n)]
    out = _post(url + "/completion", {"prompt": ids, "n_predict": 1, "cache_prompt": False})
    t = out["timings"]
    assert isinstance(t, dict) and int(t["prompt_n"]) == n
    return float(t["prompt_ms"]) / 1e3


def measured_compute(url: str, shape: LlamaShape) -> dict[str, float]:
    """The compute rates of this CPU on the model, from llama.cpp's prefill timings.

    A prefill of n tokens costs a x n (the matrix multiplies) + b x n (n + 1) / 2 (attention
    over every (query, key) pair); the best of three timings at two lengths fix a and b.
    bf16_flops = 2 x params / a; attention_flops = 4 x layers x heads x head_dim / b (the
    engine model's FLOPs per token and per pair). The decode time per token of one stream
    (`timings.predicted_per_token_ms`, 256 tokens) is kept for comparison with a.
    """
    n1, n2 = PREFILL_TOKENS
    t1 = min(_prompt_seconds(url, n1, i) for i in range(3))
    t2 = min(_prompt_seconds(url, n2, i) for i in range(3))
    pairs1, pairs2 = n1 * (n1 + 1) / 2, n2 * (n2 + 1) / 2
    a, b = np.linalg.solve(np.array([[n1, pairs1], [n2, pairs2]]), np.array([t1, t2]))
    decode = min(
        float(
            _post(
                url + "/completion",
                {"prompt": [5, 6, 7, 8], "n_predict": 256, "ignore_eos": True},
            )["timings"]["predicted_per_token_ms"]  # type: ignore[index]
        )
        for _ in range(3)
    )
    head_dim = shape.hidden // shape.heads
    return {
        "prefill_s": {n1: t1, n2: t2},  # type: ignore[dict-item]
        "linear_s_per_token": float(a),
        "attention_s_per_pair": float(b),
        "decode_s_per_token": decode / 1e3,
        "bf16_flops": 2.0 * model_params(shape) / float(a),
        "attention_flops": 4.0 * shape.layers * shape.heads * head_dim / float(b),
    }


def measured_copy_bandwidth(nbytes: int) -> float:
    """Bytes per second of a numpy copy of `nbytes` (read + write), best of 20.

    Sized as the weights one step reads: a tiny model's weights stay in the CPU's caches,
    so a DRAM-sized copy would understate what a step gets.
    """
    a = np.ones(max(1, nbytes // 8), dtype=np.float64)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(20):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * a.nbytes / best


def write_catalog(
    path: Path, shape: LlamaShape, compute: dict[str, float], bandwidth: float
) -> None:
    """The measured `this-cpu` entry beside `tiny-llama` (no activation reserve: see
    predict_b's config)."""
    write_cpu_catalog(
        path, shape, N_CTX, SLOTS, flops=compute["bf16_flops"],
        attention_flops=compute["attention_flops"], bandwidth_bytes_per_s=bandwidth,
        reserve_bytes=0,
    )  # fmt: skip


def served_lengths(limit_dir: Path, asked: list[tuple[int, int]]) -> np.ndarray:
    """(slope, intercept) of the prompt tokens the server counted against those asked.

    The load generator writes prose of the asked length for a generic tokenizer; this tiny
    model's BPE (trained on Python sources) and its chat template count more. A line through
    the three asked lengths of a preset (from its records' server-reported `input_tokens`)
    maps any asked length to the served one.
    """
    import polars as pl

    records = pl.read_parquet(limit_dir / "records.parquet").filter(pl.col("ok"))
    by_out = {o: i for i, o in asked}
    xs, ys = [], []
    for out_tokens, served in records.select("output_tokens", "input_tokens").iter_rows():
        if out_tokens in by_out and served:
            xs.append(by_out[out_tokens])
            ys.append(served)
    return np.polyfit(xs, ys, 1)


def served_profile(pairs: list[tuple[int, int]], line: np.ndarray, path: Path) -> Path:
    """The preset with the prompt lengths the server counts (line from served_lengths)."""
    served = [(round(float(np.polyval(line, i))), o) for i, o in pairs]
    save_profile(make_profile(served, rate_rps=5.0), path)
    return path


def run_limit(url: str, model: str, profile: Path, out: Path, start: float) -> None:
    cmd = [
        str(Path(sys.executable).with_name("capplan")), "limit", "--host", url,
        "--model", model, "--profile", str(profile), "--slo", SLO, "--dimension", "rate",
        "--start", f"{start:g}", *LEVEL, "-o", str(out),
    ]  # fmt: skip
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)


def predict_b(out: Path, start_a: float) -> tuple[Calibration, float | None, float | None]:
    """Calibrate on out/limit_A with out/catalog.yaml; B's limit predicted with and without."""
    from profiles.model import load_profile

    measured_a = load_limit(out / "limit_A")
    config = build_engine_config(
        "this-cpu", "tiny-llama", catalog=out / "catalog.yaml", max_num_seqs=SLOTS,
        max_num_batched_tokens=2048, gpu_memory_utilization=1.0,
        activation_reserve_bytes=0, prefix_caching=False,
    )  # fmt: skip
    line = served_lengths(out / "limit_A", PRESET_A)
    print(f"served prompt tokens = {line[0]:.3f} x asked + {line[1]:.1f}", flush=True)
    prof_a = load_profile(served_profile(PRESET_A, line, out / "served_A.json"))
    prof_b = load_profile(served_profile(PRESET_B, line, out / "served_B.json"))
    fitted, cal = calibrate(prof_a, config, measured_a)
    print(
        f"calibrated on A ({measured_a.feasible_max} req/s measured): mfu {cal.mfu:.3g}, "
        f"mbu {cal.mbu:.3g}, step overhead {cal.step_overhead_s * 1e3:.3g} ms; "
        f"mean level error {cal.mean_rel_error:.1%} (uncalibrated "
        f"{cal.default_mean_rel_error:.1%}); limit reproduced: {cal.limit_reproduced}",
        flush=True,
    )
    search = SearchConfig(slo=parse_slo(SLO), start=start_a / 2, tolerance=0.05, min_completed=20)
    predicted = predict_limit(prof_b, fitted, search, RULES).feasible_max
    uncalibrated = predict_limit(prof_b, config, search, RULES).feasible_max
    print(f"predicted B: {predicted} req/s (uncalibrated {uncalibrated})", flush=True)
    return cal, predicted, uncalibrated


def reanalyse(out: Path, start_a: float) -> None:
    """The model's side again over a finished run's work directory (no server, no load)."""
    cal, predicted, uncalibrated = predict_b(out, start_a)
    measured = load_limit(out / "limit_B").feasible_max
    for name, value in (("calibrated", predicted), ("hardware entry only", uncalibrated)):
        ratio = value / measured if value and measured else None
        print(f"preset B, {name}: predicted {value} req/s, measured {measured} req/s, ratio "
              f"{ratio if ratio is None else round(ratio, 3)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="work directory (default: temp)")
    parser.add_argument(
        "--result", type=Path, default=ROOT / "bench/results/real_engine_prediction.json"
    )
    parser.add_argument("--start-a", type=float, default=0.5)
    parser.add_argument(
        "--reanalyse", type=Path, help="a finished run's work directory: the model side only"
    )
    args = parser.parse_args()
    if args.reanalyse is not None:
        reanalyse(args.reanalyse, args.start_a)
        return
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="capplan-real-engine-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {out}", flush=True)
    load_before = os.getloadavg()
    print(f"load average before: {load_before}", flush=True)
    shape = LlamaShape()
    model = build_random_llama(out / "tiny.gguf", shape)
    server = start_llama_server(
        model, n_parallel=SLOTS, n_ctx=N_CTX, n_threads=1, log_path=out / "llama.log"
    )
    try:
        compute = measured_compute(server.url, shape)
        bandwidth = measured_copy_bandwidth(2 * model_params(shape))
        print(
            f"hardware entry this-cpu: prefill {compute['prefill_s']} s -> "
            f"{compute['linear_s_per_token'] * 1e3:.3f} ms per token + "
            f"{compute['attention_s_per_pair'] * 1e6:.3f} us per attention pair: matmuls "
            f"{compute['bf16_flops'] / 1e9:.2f} GFLOP/s, attention "
            f"{compute['attention_flops'] / 1e9:.2f} GFLOP/s; decode of one stream "
            f"{compute['decode_s_per_token'] * 1e3:.3f} ms per token; numpy copy "
            f"{bandwidth / 1e9:.2f} GB/s",
            flush=True,
        )
        catalog = out / "catalog.yaml"
        write_catalog(catalog, shape, compute, bandwidth)
        profiles = {}
        for name, pairs in (("A", PRESET_A), ("B", PRESET_B)):
            profiles[name] = out / f"preset_{name}.json"
            save_profile(make_profile(pairs, rate_rps=5.0), profiles[name])
        run_limit(server.url, server.model, profiles["A"], out / "limit_A", args.start_a)
        measured_a = load_limit(out / "limit_A")
        cal, predicted_b, uncalibrated_b = predict_b(out, args.start_a)
        run_limit(server.url, server.model, profiles["B"], out / "limit_B", predicted_b or 2.0)
        measured_b = load_limit(out / "limit_B").feasible_max
    finally:
        server.stop()
    ratio = predicted_b / measured_b if predicted_b and measured_b else None
    result = {
        "slo": SLO,
        "slots": SLOTS,
        "hardware": {**compute, "hbm_bandwidth_bytes_per_s": bandwidth},
        "calibration": cal.as_dict(),
        "measured_A_rps": measured_a.feasible_max,
        "predicted_B_rps": predicted_b,
        "uncalibrated_B_rps": uncalibrated_b,
        "measured_B_rps": measured_b,
        "ratio": ratio,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    args.result.parent.mkdir(parents=True, exist_ok=True)
    args.result.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"preset B: predicted {predicted_b} req/s, measured {measured_b} req/s, "
        f"ratio {ratio if ratio is None else round(ratio, 3)} "
        f"({'within' if ratio and abs(ratio - 1) <= 0.2 else 'NOT within'} 20 %)"
    )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
