"""Calibration: the engine's efficiency factors fitted to a limit.json's measured levels.

`measured_levels` reads the levels the simulator can reproduce; `level_metrics` simulates
one instance at a level's load (open loop rate or closed loop users); `calibrate` fits mfu,
mbu and step overhead over a scrambled Sobol design with a ridge regression surrogate and
reports how well the fitted engine reproduces the levels and the limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from contracts.errors import ConfigError
from contracts.limit import Dimension, LimitResult
from planner.engine import EngineConfig
from planner.fleet.sim import judge, level_run, pool_runs, simulator_slo_problem
from planner.slo.recorded import limit_slo
from profiles.model import Profile

# Latency metrics a limit.json level may carry that one simulated instance also yields.
_CAL_METRICS: dict[str, tuple[str, float | None]] = {
    "ttft_p50_s": ("ttft", 0.50),
    "ttft_p95_s": ("ttft", 0.95),
    "ttft_p99_s": ("ttft", 0.99),
    "ttft_mean_s": ("ttft", None),
    "tpot_p50_s": ("tpot", 0.50),
    "tpot_p95_s": ("tpot", 0.95),
    "tpot_p99_s": ("tpot", 0.99),
    "tpot_mean_s": ("tpot", None),
    "e2e_p50_s": ("e2e", 0.50),
    "e2e_p95_s": ("e2e", 0.95),
    "e2e_mean_s": ("e2e", None),
}
# Search box of the efficiency factors (log-uniform design): mfu, mbu, step overhead (s).
_CAL_BOUNDS = ((0.1, 1.0), (0.2, 1.0), (2e-4, 2e-2))
# The limit search leaves out the first 20 % of each level by default; so do calibration runs.
_CAL_WARMUP = 0.2


@dataclass(frozen=True, kw_only=True)
class MeasuredLevel:
    """One measured load level: the load (req/s or users) and its latency metrics (seconds).

    `judged_s` is the measured time per run after warm-up (None when the level does not tell),
    `runs` how many runs were pooled.
    """

    load: float
    metrics: dict[str, float]
    judged_s: float | None = None
    runs: int = 1


@dataclass(frozen=True)
class Calibration:
    """Fitted efficiency factors and how well one simulated instance then matches the levels."""

    mfu: float
    mbu: float
    step_overhead_s: float
    mean_rel_error: float
    max_rel_error: float
    levels: int
    metrics: tuple[str, ...]
    default_mean_rel_error: float
    limit_reproduced: bool | None = None

    def as_dict(self) -> dict[str, float]:
        return {
            "mfu": self.mfu,
            "mbu": self.mbu,
            "step_overhead_s": self.step_overhead_s,
            "mean_rel_error": self.mean_rel_error,
            "max_rel_error": self.max_rel_error,
            "default_mean_rel_error": self.default_mean_rel_error,
            "levels": float(self.levels),
            **(
                {}
                if self.limit_reproduced is None
                else {"limit_reproduced": float(self.limit_reproduced)}
            ),
        }


def level_metrics(
    profile: Profile,
    config: EngineConfig,
    load: float,
    dimension: Dimension,
    duration_s: float,
    rng_seed: int = 0,
    runs: int = 1,
    warmup_frac: float = 0.1,
) -> dict[str, float]:
    """The `_CAL_METRICS` of one simulated instance at `load` (open loop rate or closed loop).

    `runs` independent runs (seeds rng_seed, rng_seed + 1, ...) are pooled, as the limit
    search pools repeated measurements of a level; the first `warmup_frac` of each is left out.
    """
    pooled: dict[str, list[np.ndarray]] = {"ttft": [], "tpot": [], "e2e": []}
    for r in range(max(1, runs)):
        run = level_run(profile, config, load, dimension, duration_s, rng_seed + r)
        keep = run.arrival_s >= warmup_frac * duration_s
        pooled["ttft"].append(run.ttft_s[keep])
        pooled["tpot"].append(run.tpot_s[keep])
        pooled["e2e"].append(run.e2e_s[keep])
    out: dict[str, float] = {}
    for name, (metric, q) in _CAL_METRICS.items():
        v = np.concatenate(pooled[metric])
        v = v[~np.isnan(v)]
        if len(v):
            out[name] = float(np.mean(v) if q is None else np.quantile(v, q))
    return out


def measured_levels(result: LimitResult) -> list[MeasuredLevel]:
    """The limit.json levels that carry latency metrics the simulator can reproduce.

    Overloaded levels far above the limit (latency dominated by a growing queue) teach the
    factors nothing, so levels above the lowest failing load are left out; so are invalid
    levels, whose latencies include a load generator that fell behind its schedule.
    """
    cap = result.infeasible_min if result.infeasible_min is not None else math.inf
    out: list[MeasuredLevel] = []
    for level in result.levels:
        if level.load > cap or level.load <= 0 or level.verdict == "invalid" or level.invalid:
            continue
        metrics = {
            k: float(v)
            for k, v in level.metrics.items()
            if k in _CAL_METRICS and v is not None and v > 0
        }
        if level.mean_e2e_s and "e2e_mean_s" not in metrics:
            metrics["e2e_mean_s"] = level.mean_e2e_s
        runs = level.repeats + 1
        # Requests per run over the rate they arrived at: the seconds each run was judged.
        rate = level.load if result.dimension == "rate" else level.achieved_rps
        judged = level.requests / runs / rate if rate else None
        if metrics:
            out.append(MeasuredLevel(load=level.load, metrics=metrics, judged_s=judged, runs=runs))
    return sorted(out, key=lambda m: m.load)


def _errors(levels: Sequence[MeasuredLevel], simulated: Sequence[dict[str, float]]) -> list[float]:
    out = []
    for level, sim in zip(levels, simulated, strict=True):
        for name, value in level.metrics.items():
            got = sim.get(name)
            out.append(abs(got - value) / value if got is not None else 1.0)
    return out


def calibrate(
    profile: Profile,
    config: EngineConfig,
    result: LimitResult,
    duration_s: float = 60.0,
    design_points: int = 16,
    rng_seed: int = 0,
) -> tuple[EngineConfig, Calibration]:
    """Fit mfu, mbu and step overhead so one simulated instance reproduces the measured levels.

    Method: simulate every measured level at `design_points` factor settings (a scrambled
    Sobol design, log-uniform within `_CAL_BOUNDS`); fit a scikit-learn regression (quadratic
    features of the log factors and log load, ridge) of each log metric; minimise the squared
    log error between the regression and the measured metrics over the factors; then simulate
    the levels once more with the fitted factors and report the relative error per metric
    (mean and max), next to the error of the uncalibrated config.
    Each level is simulated as it was measured: as long as it was held (`duration_s` when
    the level does not tell) and pooled over as many runs (at most 3), with a 20 % warm-up.
    Raises InputError when the limit.json has no level with latency metrics (a search
    stopped before it judged one: the file, not the run, cannot be used).
    """
    from scipy.optimize import minimize
    from scipy.stats import qmc
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    from contracts.errors import InputError, RunError

    levels = measured_levels(result)
    if not levels:
        raise InputError(
            "the limit.json has no level with latency metrics to calibrate against (its "
            "search stopped before it judged one: finish it with capplan limit --resume)"
        )
    names = sorted({n for lv in levels for n in lv.metrics})
    lo = np.log([b[0] for b in _CAL_BOUNDS])
    hi = np.log([b[1] for b in _CAL_BOUNDS])

    def with_factors(f: np.ndarray) -> EngineConfig:
        return config.model_copy(
            update={"mfu": float(f[0]), "mbu": float(f[1]), "step_overhead_s": float(f[2])}
        )

    def simulate_levels(cfg: EngineConfig) -> list[dict[str, float]]:
        # Each level as it was measured: as long (a short level has not built its steady
        # queue yet) and pooled over as many runs, with the limit search's 20 % warm-up.
        out = []
        for lv in levels:
            span = _level_span_s(lv, duration_s)
            out.append(
                level_metrics(
                    profile,
                    cfg,
                    lv.load,
                    result.dimension,
                    span,
                    rng_seed,
                    runs=min(lv.runs, 3),
                    warmup_frac=_CAL_WARMUP,
                )
            )
        return out

    def fit(design: np.ndarray, box_lo: np.ndarray, box_hi: np.ndarray) -> np.ndarray:
        """Regress each log metric on the factors and load; minimise the log error."""
        rows_x: list[list[float]] = []
        rows_y: dict[str, list[tuple[int, float]]] = {n: [] for n in names}
        for factors in design:
            sims = simulate_levels(with_factors(factors))
            for lv, sim in zip(levels, sims, strict=True):
                row = len(rows_x)
                rows_x.append([*np.log(factors), math.log(lv.load)])
                for n in names:
                    if n in sim and sim[n] > 0:
                        rows_y[n].append((row, math.log(sim[n])))
        x_all = np.array(rows_x)
        models = {}
        for n in names:
            idx = [r for r, _ in rows_y[n]]
            if len(idx) < 8:
                continue
            model = make_pipeline(StandardScaler(), PolynomialFeatures(2), Ridge(alpha=1e-3))
            model.fit(x_all[idx], [v for _, v in rows_y[n]])
            models[n] = model
        targets = [
            (n, math.log(lv.load), math.log(v))
            for lv in levels
            for n, v in lv.metrics.items()
            if n in models
        ]
        if not targets:
            raise RunError("the simulator yields none of the limit.json's latency metrics")

        def loss(logf: np.ndarray) -> float:
            total = 0.0
            for n, model in models.items():
                rows = [t for t in targets if t[0] == n]
                if rows:
                    feats = np.array([[*logf, load] for _, load, _ in rows])
                    pred = model.predict(feats)
                    total += float(np.sum((pred - np.array([t[2] for t in rows])) ** 2))
            return total

        ranked = design[np.argsort([loss(np.log(f)) for f in design])[:3]]
        bounds = list(zip(box_lo, box_hi, strict=True))
        best = min(
            (minimize(loss, np.log(f), method="L-BFGS-B", bounds=bounds) for f in ranked),
            key=lambda r: r.fun,
        )
        return np.exp(best.x)

    sobol = qmc.Sobol(3, seed=rng_seed)
    first = fit(np.exp(lo + sobol.random(design_points) * (hi - lo)), lo, hi)
    # Second round: the same fit in a box around the first answer, where quadratic is enough.
    lo2 = np.maximum(lo, np.log(first) - 0.4)
    hi2 = np.minimum(hi, np.log(first) + 0.4)
    factors = fit(np.exp(lo2 + sobol.random(design_points) * (hi2 - lo2)), lo2, hi2)
    fitted = with_factors(factors)
    errors = _errors(levels, simulate_levels(fitted))
    default_errors = _errors(levels, simulate_levels(config))
    fitted = fitted.model_copy(
        update={"calibration_source": f"fitted to {len(levels)} measured levels of the limit"}
    )
    return fitted, Calibration(
        limit_reproduced=_reproduces_limit(profile, fitted, result, duration_s, rng_seed),
        mfu=fitted.mfu,
        mbu=fitted.mbu,
        step_overhead_s=fitted.step_overhead_s,
        mean_rel_error=float(np.mean(errors)),
        max_rel_error=float(np.max(errors)),
        levels=len(levels),
        metrics=tuple(names),
        default_mean_rel_error=float(np.mean(default_errors)),
    )


def _level_span_s(level: MeasuredLevel, default_s: float) -> float:
    """Seconds to simulate a level for: its measured length (warm-up included), else default."""
    if level.judged_s is not None and level.judged_s >= 5.0:
        return level.judged_s / (1 - _CAL_WARMUP)
    return default_s


def _reproduces_limit(
    profile: Profile, config: EngineConfig, result: LimitResult, duration_s: float, rng_seed: int
) -> bool | None:
    """Does one simulated instance pass the SLO at feasible_max and fail at infeasible_min?

    Each bound is simulated as it was measured (length and runs pooled, when the level tells).
    None when the limit's SLO is not one the simulator can judge or a bound is missing.
    """
    try:
        slo = limit_slo(result)
    except ConfigError:
        return None
    if simulator_slo_problem(slo) is not None:
        return None
    if result.feasible_max is None or result.infeasible_min is None:
        return None

    by_load = {lv.load: lv for lv in measured_levels(result)}

    def meets(load: float) -> bool:
        level = by_load.get(load)
        span = _level_span_s(level, duration_s) if level is not None else duration_s
        runs = min(level.runs, 3) if level is not None else 1
        pooled = [
            level_run(profile, config, load, result.dimension, span, rng_seed + r)
            for r in range(runs)
        ]
        return judge(pool_runs(pooled), slo, _CAL_WARMUP * span).meets_slo

    return meets(result.feasible_max) and not meets(result.infeasible_min)
