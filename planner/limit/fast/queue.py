"""The confirmation's queue check: whether the server's queue at a level is longer or
shorter than the model's for the same arrivals, and the pace of work that makes them agree.

Misses show a high answer only once the queue reaches its steady state: at utilisation 0.9
a 30 s chunk often holds no busy period long enough for a p95 miss on either side, so the
miss bias reads 0 (issue 60: a server working 5 % slower open loop than in the closed-loop
steps, an answer 7.5 % above the truth, "bias +0.000"). The waits before the first token
show it at once: the model replays the level's own arrivals with the sizes the server
returned, and every request's delay (the SLO's first latency, capped:
planner.limit.fast.misses `_delays`) is paired with the server's; arrival noise, which both
sides share, cancels.

The test (`QueueVerdict.differs`) asks both: is the server's queue longer than the model's
(the mean paired delay), and did the server work the level's requests slower (the paired
decode time, end to end less first token: no queue in it, its requests independent, against
its error)? When it says so, the model's work is refitted on the level itself (`fit_pace`):
the factor on every request's work (first token and decode alike) whose replay of the same
arrivals gives the server's mean delay. That is the service time the server showed under the
open-loop load it is confirmed under, TTFT less the queueing the model puts before it, not
the closed-loop steps' (planner.limit.fast.characterise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from planner.limit.fast.misses import MissCurve, replay
from planner.limit.fast.model import ServerModel
from planner.limit.fast.paired import paired
from planner.limit.fast.steps import FastConfig, Taken

PACE_BOUNDS = (0.75, 1.35)  # the paces a refit tries; beyond them the model is not a pace off
MIN_PACE_SHIFT = 0.01  # a fitted pace closer to 1 leaves the model as it is


@dataclass(frozen=True, kw_only=True)
class QueueVerdict:
    """The queue check of one level: the mean paired delay (server - model, seconds) and its
    batch-means error (infinite where the level is too short for batches of five correlation
    times: near the knee, one chunk's queue is one long busy period); and the paired decode
    pace (`decode_pace`) with its error over independent requests."""

    delay_bias_s: float
    delay_se_s: float
    decode_pace: float = 1.0
    decode_se: float = math.inf

    @property
    def z(self) -> float:
        """The delays' z (0 where their error is unknown)."""
        return _z(self.delay_bias_s, self.delay_se_s)

    @property
    def decode_z(self) -> float:
        return _z(self.decode_pace - 1.0, self.decode_se)

    def differs(self, z_crit: float) -> bool:
        """The server's queue is longer (or shorter) than the model's for the same arrivals,
        and the server worked the level's requests slower (or faster) than the model, by a
        decode pace beyond `z_crit` errors and MIN_PACE_SHIFT from 1. The delays alone are
        no test: near the knee one chunk is one long busy period, its batch-means error is
        unknown (too few batches) or too small (in `bench/queue_check_power.py`, 1 seed in
        12 at the true pace showed z 3.6); the decode pace's requests are independent."""
        off = self.decode_pace - 1.0
        same_way = off * self.delay_bias_s > 0 and abs(off) > MIN_PACE_SHIFT
        return same_way and abs(self.decode_z) > z_crit


def _z(value: float, se: float) -> float:
    if math.isnan(value):
        return 0.0
    if se > 0 and math.isfinite(se):
        return value / se
    return 0.0 if se > 0 or value == 0 else math.copysign(math.inf, value)


def paced(model: ServerModel, pace: float) -> ServerModel:
    """`model` with every request's solo work (first token and decode) `pace` times as long."""
    return replace(
        model,
        first_s=(pace * model.first_s[0], pace * model.first_s[1]),
        decode_s=(pace * model.decode_s[0], pace * model.decode_s[1]),
    )


def _mean_delay_gap(
    config: FastConfig,
    curve: MissCurve,
    model: ServerModel,
    chains: list[tuple[float, Taken]],
    level_start: float,
    rate: float,
) -> float:
    """Mean (server - model) delay over the level's requests of `chains`; the model draws
    the sizes of unfinished requests with the same random numbers on every call, so two
    paces differ only by the pace."""
    rng = np.random.default_rng([config.seed, 17])
    gaps = [
        paired(config, curve, model, taken, start, level_start, rate, rng).delays_s
        for start, taken in chains
    ]
    values = np.concatenate(gaps) if gaps else np.zeros(0)
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else math.nan


def fit_pace(
    config: FastConfig,
    curve: MissCurve,
    model: ServerModel,
    chains: list[tuple[float, Taken]],
    level_start: float,
    rate: float,
    *,
    rel_tol: float = 0.002,
) -> float | None:
    """The pace (`paced`) whose replay of the level's requests gives the server's mean delay:
    bisection on PACE_BOUNDS (a longer work makes every FIFO wait and first token longer);
    None where no pace within them does, or no request is compared."""

    def gap(pace: float) -> float:
        return _mean_delay_gap(config, curve, paced(model, pace), chains, level_start, rate)

    low, high = PACE_BOUNDS
    at_low, at_high = gap(low), gap(high)
    if not (math.isfinite(at_low) and math.isfinite(at_high)) or at_low < 0 or at_high > 0:
        return None
    while high / low > 1.0 + rel_tol:
        mid = math.sqrt(low * high)
        if gap(mid) > 0:
            low = mid
        else:
            high = mid
    return math.sqrt(low * high)


def decode_pace(
    model: ServerModel, chains: list[tuple[float, Taken]], level_start: float, curve: MissCurve
) -> tuple[float, float]:
    """The server's decode time (end to end less first token) over the model's for the
    level's finished requests, replayed on the same arrivals and sizes: the service the
    open-loop load saw where no queue hides it. Returns (the ratio of their sums, its error
    from the per-request ratios taken as independent); (1, inf) without two requests."""
    measured, modelled = [], []
    rng = np.random.default_rng(0)
    for start, taken in chains:
        records = taken.records.filter(pl.col("sent_s") >= start).sort("sent_s")
        sent = records["sent_s"].cast(pl.Float64).to_numpy()
        ok = records["ok"].fill_null(False).to_numpy().astype(bool)
        inputs = records["input_tokens"].cast(pl.Float64).fill_null(np.nan).to_numpy().copy()
        outputs = records["output_tokens"].cast(pl.Float64).fill_null(np.nan).to_numpy().copy()
        inputs[~ok], outputs[~ok] = np.nan, np.nan
        never = np.full(sent.size, np.nan)
        served, _, _ = replay(model, sent - start, inputs, outputs, open_s=never,
                              sizes=(curve.input_tokens, curve.output_tokens), rng=rng)  # fmt: skip
        decode = (records["e2e_s"] - records["ttft_s"]).cast(pl.Float64).fill_null(np.nan)
        theirs, ours = decode.to_numpy(), served.e2e_s - served.ttft_s
        keep = ok & (sent >= level_start) & ~np.isnan(theirs) & (ours > 0)
        measured.append(theirs[keep])
        modelled.append(ours[keep])
    m = np.concatenate(measured) if measured else np.zeros(0)
    d = np.concatenate(modelled) if modelled else np.zeros(0)
    if m.size < 2:
        return 1.0, math.inf
    ratios = m / d
    return float(m.sum() / d.sum()), float(ratios.std(ddof=1) / math.sqrt(ratios.size))
