"""`float_values` and `bool_values` read a column as polars' own fills would (fill_nan,
fill_null), nulls and NaNs kept apart, on every mix of the two."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from contracts.latency import bool_values, float_values


def _polars(series: pl.Series, null: float, nan: float) -> np.ndarray:
    return series.cast(pl.Float64).fill_nan(nan).fill_null(null).to_numpy()


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize(("null", "nan"), [(np.nan, np.nan), (-np.inf, np.inf), (np.inf, -np.inf),
                                           (np.inf, np.nan), (0.0, 1.0)])  # fmt: skip
def test_float_values_are_polars_fills(seed: int, null: float, nan: float) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    kind = rng.integers(0, 4, size=n)  # 0 value, 1 null, 2 NaN, 3 inf
    values = [
        None if k == 1 else float("nan") if k == 2 else float("inf") if k == 3 else float(v)
        for k, v in zip(kind, rng.normal(size=n), strict=True)
    ]
    series = pl.Series("x", values, dtype=pl.Float64)
    got, want = float_values(series, null=null, nan=nan), _polars(series, null, nan)
    assert got.dtype == np.float64 and np.array_equal(got, want, equal_nan=True)
    ints = pl.Series("i", [None if k == 1 else int(k) for k in kind], dtype=pl.Int64)
    assert np.array_equal(float_values(ints, null=null), _polars(ints, null, nan), True)
    flags = pl.Series("b", [None if k == 1 else bool(k % 2) for k in kind], dtype=pl.Boolean)
    assert np.array_equal(bool_values(flags), flags.fill_null(False).to_numpy().astype(bool))
