"""The fast search's interval widened by the model's own uncertainty (planner.limit.fast.search
step 5): the corrected root's spread over bootstrap curves, or over the parts of one curve's
run, and the noise of the curve's finite run."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy.stats import t as student_t

from planner.limit.fast.misses import MissCurve, share, targets
from planner.limit.fast.stats import batch_means_se
from planner.limit.fast.steps import Confirmation, FastConfig


def with_model_spread(
    config: FastConfig,
    conf: Confirmation,
    curve: MissCurve,
    inputs: np.ndarray,
    outputs: np.ndarray,
    z: float,
    resample: bool = True,
) -> Confirmation:
    """The interval widened by the model's own uncertainty: the spread of the corrected root
    over `bootstrap` curves, each on resampled request sizes and its own random numbers
    (with `resample`: the sizes are a sample), and at least the noise of this curve's miss
    share at the limit (batch means) over its slope. Without `resample` (the profile's
    sizes, an engine model too costly for more curves) the noise is that of the roots of
    five consecutive parts of this curve's run (`MissCurve.batch_roots`)."""
    bias = np.array(conf.bias)
    if resample:
        spread = _bootstrap_spread(config, curve, inputs, outputs, bias)
        spread = max(spread, z * _curve_noise(curve, conf.limit, bias))
    else:
        parts = curve.batch_roots(bias)
        t = float(student_t.ppf(0.5 + config.confidence / 2, len(parts) - 1))
        spread = t * float(np.std(parts, ddof=1)) / math.sqrt(len(parts))
    below = math.hypot(conf.limit - conf.low, spread)
    above = math.hypot(conf.high - conf.limit, spread)
    return replace(conf, low=conf.limit - below, high=conf.limit + above)


def _bootstrap_spread(
    config: FastConfig, curve: MissCurve, inputs: np.ndarray, outputs: np.ndarray,
    bias: np.ndarray,
) -> float:  # fmt: skip
    """Student's t times the spread of the corrected root over `bootstrap` curves, each on
    resampled request sizes and its own random numbers (0 for fewer than two)."""
    roots = []
    for b in range(config.bootstrap):
        rng = np.random.default_rng([config.seed, 17, b])
        pick = rng.integers(0, inputs.size, inputs.size)
        other = MissCurve(
            model=curve.model,
            input_tokens=inputs[pick],
            output_tokens=outputs[pick],
            slo=config.slo,
            requests=config.curve_requests,
            seed=config.seed + 1 + b,
        )
        roots.append(other.root(bias, rel_tol=0.005))
    if len(roots) < 2:
        return 0.0
    # Student's t for the few curves: their spread is itself uncertain
    t = float(student_t.ppf(0.5 + config.confidence / 2, len(roots) - 1))
    return t * float(np.std(roots, ddof=1))


def _curve_noise(curve: MissCurve, rate: float, bias: np.ndarray) -> float:
    """The root's standard error from the curve's own finite run: the batch-means error of
    its binding miss share at `rate` over the share's slope there (req/s)."""
    allowed = np.array([t.allowed for t in targets(curve.slo)])
    j = int(np.argmax(share(curve.misses(rate)) + bias - allowed))
    step = 0.02 * rate
    slope = (share(curve.misses(rate + step))[j] - share(curve.misses(rate - step))[j]) / (2 * step)
    m = curve.misses(rate)
    err = batch_means_se(m.miss[m.known[:, j], j].astype(float))
    if err is None or slope <= 0:
        return 0.0
    return float(err / slope)
