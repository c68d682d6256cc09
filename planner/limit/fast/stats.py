"""Steady-state statistics of one level's per-request series: where its warm-up ends
(MSER-5) and the standard error of a mean of correlated values (batch means)."""

from __future__ import annotations

import math

import numpy as np

from planner.limit.measured.steady import integrated_autocorrelation


def mser5(values: np.ndarray) -> int:
    """How many leading values to cut as warm-up (White's MSER-5): over batch means of 5,
    the truncation in the first half that minimises the remaining batches' squared error
    over their count squared."""
    m = values.size // 5
    if m < 4:
        return 0
    batches = values[: m * 5].reshape(m, 5).mean(axis=1)
    # suffix sums give every truncation's mean and squared error at once
    rest = np.arange(m, 0, -1, dtype=float)
    total = np.cumsum(batches[::-1])[::-1]
    squares = np.cumsum((batches**2)[::-1])[::-1]
    error = squares - total**2 / rest
    score = error / rest**2
    cut = int(np.argmin(score[: m // 2 + 1]))
    return 5 * cut


def batch_means_se(values: np.ndarray, *, min_batches: int = 5) -> float | None:
    """Standard error of the mean of a correlated series: batches of at least five
    correlation times (or n / 30), their means taken as independent. None when fewer than
    `min_batches` batches fit."""
    n = values.size
    if n < 2 * min_batches:
        return None
    if np.all(values == values[0]):
        return 0.0
    tau = integrated_autocorrelation(values.astype(float))
    size = max(math.ceil(5.0 * tau), n // 30, 1)
    batches = n // size
    if batches < min_batches:
        return None
    means = values[: batches * size].reshape(batches, size).mean(axis=1)
    return float(means.std(ddof=1) / math.sqrt(batches))
