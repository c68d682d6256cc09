"""Arrival times for a table of lengths without them (a benchmark dataset), drawn as vLLM's
benchmark (--request-rate, --burstiness) and guidellm (--rate-type poisson) send a dataset:
gamma gaps (shape 1: Poisson) at a rate, seeded, continued across chunks and files
(ReaderContext holds the clock).

The load test's schedules (`locustfiles.arrivals.gamma_times`) span a stage's duration; these
are a fixed number of gaps, one per row, keyed by row block so that a table cut into chunks
gets the arrivals it gets whole.
"""

from __future__ import annotations

import numpy as np

from contracts.errors import InputError
from profiles.digest import LogFile
from profiles.readers.base import ArrivalDraw, ReaderContext

ARRIVAL_BLOCK = 4096  # rows per block of seeded inter-arrival draws
LENGTHS_ONLY_HINT = (
    " (a table of lengths only, such as a benchmark dataset: --rate-rps R sends it as a "
    "Poisson process at R req/s)"
)


def drawn_columns(path: LogFile, mapping: dict[str, str]) -> tuple[str, ...]:
    """The roles a table sent at --rate-rps must have (input, output); InputError where it
    has arrival times of its own, which stand."""
    if "arrival" in mapping:
        raise InputError(
            f"{path}: has arrival times of its own (column {mapping['arrival']!r}); "
            "--rate-rps is for a table of lengths without them"
        )
    return ("input", "output")


def drawn_arrivals(ctx: ReaderContext, n: int) -> np.ndarray:
    """The next `n` arrivals of ctx.draw, continuing the clock of the rows drawn before:
    gamma gaps of its shape and mean 1 / rate. Row i's gap comes from block i //
    ARRIVAL_BLOCK of the seeded draws, so the gaps do not depend on how the table was cut
    into chunks."""
    draw = ctx.draw
    assert draw is not None
    gaps = np.empty(n)
    done = 0
    while done < n:
        block, skip = divmod(ctx.arrivals_drawn + done, ARRIVAL_BLOCK)
        rng = np.random.default_rng([draw.seed, block])
        draws = rng.standard_gamma(draw.shape, ARRIVAL_BLOCK) / draw.shape
        take = min(ARRIVAL_BLOCK - skip, n - done)
        gaps[done : done + take] = draws[skip : skip + take]
        done += take
    times = ctx.arrival_clock_s + np.cumsum(gaps / draw.rate_rps)
    if n:
        ctx.arrival_clock_s = float(times[-1])
    ctx.arrivals_drawn += n
    return times


def drawn_assumption(draw: ArrivalDraw) -> str:
    """What a profile of drawn arrivals assumes (its `source.limitations`)."""
    law = (
        "Poisson arrivals"
        if draw.shape == 1.0
        else f"arrivals with gamma gaps of shape {draw.shape:g} (--burstiness; inter-arrival "
        f"CV {draw.shape**-0.5:.2f})"
    )
    return (
        f"{law} at {draw.rate_rps:g} req/s (--rate-rps, seed {draw.seed}), in the table's row "
        "order, as vLLM's benchmark (--request-rate) and guidellm (--rate-type poisson) send a "
        "dataset; its bursts and peaks are those of that stream, not your traffic's"
    )
