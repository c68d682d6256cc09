"""One confirmation chain replayed through the model: per request of the level, the
measured miss and delay against the model's for the same arrivals and sizes (the pairs the
fast search's control variate and its queue check are made of)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from planner.limit.fast.characterise import still_open
from planner.limit.fast.misses import (
    DELAY_CAP,
    MissCurve,
    delay_bound,
    measured_delays,
    measured_misses,
    model_delays,
    model_misses,
    replay,
    share,
)
from planner.limit.fast.model import Model
from planner.limit.fast.stats import mser5
from planner.limit.fast.steps import FastConfig, Taken
from planner.slo.spec import Slo


@dataclass(frozen=True)
class Paired:
    """One chain's pairs on the level (see `paired`)."""

    diffs: np.ndarray  # (requests, targets): measured miss - the model's, NaN where unknown
    seen: np.ndarray  # (requests, targets): the model's own miss, NaN where unknown
    delays_s: np.ndarray  # (requests,): measured delay - the model's, NaN where unknown
    cut: int  # the warm-up MSER-5 cut


def paired(
    config: FastConfig,
    curve: MissCurve,
    model: Model,
    taken: Taken,
    chain_start: float,
    level_start: float,
    rate: float,
    rng: np.random.Generator,
) -> Paired:
    """Per request of the level in one chain (after MSER-5's warm-up) and per target: the
    measured miss minus the model's for the same request (NaN where either is unknown), or
    minus the model's long-run share without the correction; the model's own miss for the
    same request (NaN where either is unknown); per request, the measured delay minus the
    model's (NaN where the measured one is unknown); and the warm-up cut."""
    records = taken.records.filter(pl.col("sent_s") >= chain_start).sort("sent_s")
    sent = records["sent_s"].cast(pl.Float64).to_numpy()
    inputs = records["input_tokens"].cast(pl.Float64).fill_null(np.nan).to_numpy().copy()
    outputs = records["output_tokens"].cast(pl.Float64).fill_null(np.nan).to_numpy().copy()
    ok = records["ok"].fill_null(False).to_numpy().astype(bool)
    # Requests the server did not finish have no size: the model draws one (`replay`)
    inputs[~ok], outputs[~ok] = np.nan, np.nan
    end = records["end_s"].cast(pl.Float64).fill_null(taken.end_s).to_numpy()
    open_s = np.where(still_open(records).to_numpy(), np.minimum(end, taken.end_s) - sent, np.nan)
    served, inputs, outputs = replay(
        model, sent - chain_start, inputs, outputs, open_s=open_s,
        sizes=(curve.input_tokens, curve.output_tokens), rng=rng,
    )  # fmt: skip
    modelled = model_misses(served, config.slo)
    measured = measured_misses(records, config.slo, now_s=taken.end_s)
    level = sent >= level_start
    first = int(np.argmax(level)) if level.any() else sent.size
    cut = mser5(warmup_series(records[first:], config.slo))
    keep = np.zeros(sent.size, dtype=bool)
    keep[first + cut :] = True
    long_run = share(curve.misses(rate))
    out = np.full((int(keep.sum()), measured.miss.shape[1]), np.nan)
    seen = np.full(out.shape, np.nan)
    for j in range(measured.miss.shape[1]):
        m = measured.miss[keep, j].astype(float)
        if config.correct:
            d = m - modelled.miss[keep, j].astype(float)
            known = measured.known[keep, j] & modelled.known[keep, j]
        else:
            d = m - float(long_run[j])
            known = measured.known[keep, j]
        out[:, j] = np.where(known, d, np.nan)
        modelled_j = modelled.miss[keep, j].astype(float)
        seen[:, j] = np.where(measured.known[keep, j] & modelled.known[keep, j], modelled_j, np.nan)
    delays = measured_delays(records, config.slo, now_s=taken.end_s) - model_delays(
        served, config.slo
    )
    return Paired(diffs=out, seen=seen, delays_s=delays[keep], cut=cut)


def warmup_series(records: pl.DataFrame, slo: Slo) -> np.ndarray:
    """The level's SLO latencies in send order, capped at four times the threshold (a
    failure or a request still running at the cap): what a warm-up inflates."""
    bound = delay_bound(slo)
    if bound is None:
        return (~records["ok"].fill_null(True)).to_numpy().astype(float)
    metric, threshold = bound
    values = records[f"{metric}_s"].cast(pl.Float64).fill_null(np.inf).to_numpy()
    return np.minimum(values, DELAY_CAP * threshold)
