"""Arrival times for a table of lengths without them (a benchmark dataset): a seeded Poisson
process at `--rate-rps`, continued across chunks and files (ReaderContext holds its clock)."""

from __future__ import annotations

import numpy as np

from profiles.readers.base import ReaderContext

ARRIVAL_BLOCK = 4096  # rows per block of seeded inter-arrival draws


def poisson_arrivals(ctx: ReaderContext, n: int) -> np.ndarray:
    """The next `n` arrivals at ctx.arrival_rps, continuing the clock of the rows drawn
    before: gamma gaps of shape ctx.arrival_shape and mean 1 / rate (shape 1: a Poisson
    process), as vLLM's benchmark draws them. Row i's gap comes from block i //
    ARRIVAL_BLOCK of the seeded draws, so the gaps do not depend on how the table was cut
    into chunks."""
    assert ctx.arrival_rps is not None
    gaps = np.empty(n)
    done = 0
    while done < n:
        block, skip = divmod(ctx.arrivals_drawn + done, ARRIVAL_BLOCK)
        draws = (
            np.random.default_rng([ctx.arrival_seed, block]).standard_gamma(
                ctx.arrival_shape, ARRIVAL_BLOCK
            )
            / ctx.arrival_shape
        )
        take = min(ARRIVAL_BLOCK - skip, n - done)
        gaps[done : done + take] = draws[skip : skip + take]
        done += take
    times = ctx.arrival_clock_s + np.cumsum(gaps / ctx.arrival_rps)
    if n:
        ctx.arrival_clock_s = float(times[-1])
    ctx.arrivals_drawn += n
    return times
