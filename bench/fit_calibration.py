"""Fit the engine model's roofline factors to GPU measurements from bench/gpu_calibrate.py.

Reads the measurement JSON (prefill time against prompt length, decode step time against
batch and context), fits (mfu, mbu, step_overhead_s) so that the engine's own step-time
function `Engine.step_time_s` (max(compute, memory) + overhead) reproduces every measured
point with the least relative error, prints each point's prediction next to the measurement,
and writes the engine's calibration files for the measured GPU and, by transfer, for the
H100 (same GH100 compute die and HBM kernel behaviour; only the bandwidth differs, which the
catalog carries, so the utilisation factors carry over — an assumption, stated in the file).

Usage: python bench/fit_calibration.py bench/results/h200_llama-3.1-8b_calibration.json [--write]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from planner.engine import Engine, build_engine_config
from planner.engine.build import calibration_path

# Prefill ran eagerly (no CUDA graph): below ~1k tokens its time is kernel-launch bound
# (18 ms for 128 to 512 tokens alike), which a served engine hides; those points are left out.
MIN_PREFILL_TOKENS = 1024


def _points(measured: dict) -> list[tuple[str, int, float, int, float]]:
    """(label, tokens, attention pairs, kv tokens read, measured seconds) per measurement."""
    pts = []
    for p in measured["prefill"]:
        n = int(p["prompt_tokens"])
        if n < MIN_PREFILL_TOKENS:
            continue
        pts.append((f"prefill {n}", n, n * (n + 1) / 2.0, n, float(p["time_s"])))
    for d in measured["decode"]:
        b, ctx = int(d["batch"]), int(d["context_tokens"])
        pts.append((f"decode b={b} ctx={ctx}", b, float(b * ctx), b * ctx, float(d["time_s"])))
    return pts


def _predict(gpu: str, model: str, x: np.ndarray, pts: list) -> np.ndarray:
    # seq_overhead_s = 0: the measurement holds GPU time only (no server scheduling or sampling
    # CPU time per request); the engine adds its per-request CPU cost on top.
    cfg = build_engine_config(
        gpu, model, mfu=x[0], mbu=x[1], step_overhead_s=x[2], seq_overhead_s=0.0
    )
    eng = Engine(cfg)
    return np.array([eng.step_time_s(t, a, kv) for _, t, a, kv, _ in pts])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measurements")
    ap.add_argument("--gpu", default="H200-141GB")
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--write", action="store_true", help="write the engine calibration files")
    args = ap.parse_args()

    measured = json.loads(Path(args.measurements).read_text())
    pts = _points(measured)
    y = np.array([p[4] for p in pts])

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(_predict(args.gpu, args.model, x, pts) / y)

    fit = least_squares(
        residuals, x0=[0.5, 0.8, 0.001], bounds=([0.05, 0.05, 0.0], [1.0, 1.0, 0.05])
    )
    mfu, mbu, overhead = (float(v) for v in fit.x)
    pred = _predict(args.gpu, args.model, fit.x, pts)
    default = _predict(args.gpu, args.model, np.array([0.5, 0.8, 0.001]), pts)
    print(
        f"{'point':<24}{'measured ms':>12}{'fitted ms':>11}{'err':>8}{'defaults ms':>13}{'err':>8}"
    )
    for (label, *_rest), m, p, d in zip(pts, y, pred, default, strict=True):
        print(
            f"{label:<24}{m * 1e3:>12.2f}{p * 1e3:>11.2f}{(p / m - 1):>8.1%}"
            f"{d * 1e3:>13.2f}{(d / m - 1):>8.1%}"
        )
    rel = np.abs(pred / y - 1)
    rel_default = np.abs(default / y - 1)
    print(
        f"fit: mfu={mfu:.3f} mbu={mbu:.3f} step_overhead_s={overhead * 1e3:.2f} ms; "
        f"mean |error| {rel.mean():.1%} (max {rel.max():.1%}); "
        f"with the uncalibrated defaults {rel_default.mean():.1%} (max {rel_default.max():.1%})"
    )
    if not args.write:
        return
    source = (
        f"measured on {measured['device']} with bench/gpu_calibrate.py (Llama-3.1-8B shape, "
        f"random bf16 weights, PyTorch {measured['torch']}, decode in CUDA graphs), fitted by "
        f"bench/fit_calibration.py: mean |error| {rel.mean():.1%} over {len(pts)} points"
    )
    for gpu, note in (
        (args.gpu, ""),
        (
            "H100-80GB",
            " Transferred to H100 SXM: same compute "
            "die; utilisation factors assumed equal, bandwidth from the catalog.",
        ),
    ):
        out = calibration_path(build_engine_config(gpu, args.model).gpu.name, args.model)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            json.dumps(
                {
                    "gpu": gpu,
                    "model": args.model,
                    "mfu": round(mfu, 4),
                    "mbu": round(mbu, 4),
                    "step_overhead_s": round(overhead, 6),
                    "source": source + note,
                },
                indent=2,
            )
            + "\n"
        )
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
