"""The fast search's steps and records: what the pure search (planner.limit.fast.search)
asks a driver to run (`Closed`, `Open`), what the driver sends back (`Taken`), its knobs
(`FastConfig`) and what it finds (`Confirmation` per level, `FastResult`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from planner.limit.fast.model import Model
from planner.slo.spec import Slo


@dataclass(frozen=True)
class Closed:
    """Hold `users` closed-loop clients until `requests` requests ended after the first
    round and `min_s` passed (at most `max_s`)."""

    users: int
    requests: int
    min_s: float = 10.0
    max_s: float = 600.0


@dataclass(frozen=True)
class Open:
    """Offer `rate` req/s (Poisson) for `duration_s`; `burst` requests at once at the start
    (the warm start); `fresh`: start a new chain on an idle server (else continue the last
    chain's schedule without a pause)."""

    rate: float
    duration_s: float
    burst: int = 0
    fresh: bool = False


Step = Closed | Open


@dataclass(frozen=True, kw_only=True)
class Taken:
    """What a step measured. Closed: that step's requests. Open: every request of the chain
    so far (null `ok`: still running at `end_s`). Columns: sent_s, ttft_s, e2e_s, tpot_s,
    end_s, ok, error_class, input_tokens, output_tokens; times on the driver's clock."""

    records: pl.DataFrame
    start_s: float
    end_s: float


@dataclass(frozen=True, kw_only=True)
class Asked:
    """The request sizes the load test draws (the profile's): with them the model's curve
    has no sample of answers to bootstrap, where the server counts tokens as they are asked
    (planner.limit.fast.engine_model `counted_as_asked`)."""

    input_tokens: np.ndarray
    output_tokens: np.ndarray


@dataclass(frozen=True, kw_only=True)
class KnownModel(Asked):
    """A model the search need not characterise (the engine model of a calibrated server)
    and the request sizes the load test draws."""

    model: Model


@dataclass(frozen=True)
class FastConfig:
    """Knobs of the fast search (see the module). Each closed-loop step lasts at least
    `step_s`, each confirmation chunk at least `chunk_s`, `chunk_requests` requests and
    `chunk_e2es` mean requests' work. `correct=False` offsets the curve by the
    measured share minus the model's long-run share instead of the paired difference (the
    ablation without the control variate); `warm=False` starts every level on an idle server
    without a burst; `confirm=False` answers with the model's prediction alone;
    `queue_check=False` never refits the model on a level's queue."""

    slo: Slo
    tolerance: float = 0.05
    half_width: float = 0.03
    confidence: float = 0.90
    max_users: int = 256
    step_s: float = 10.0
    chunk_s: float = 30.0
    chunk_requests: int = 150
    chunk_e2es: float = 5.0
    max_chunks: int = 8
    max_moves: int = 3
    inadequate_shift: float = 0.35
    curve_requests: int = 60_000
    # a cheap model's (no grid) curve of the limit: a steep curve's root from a run of
    # 60,000 requests came out above the long run's, its miss shares skewed low by the rare
    # long busy periods such a run mostly misses (16 slots, CV 0.2, TTFT within two mean
    # services: +0.4 % over 10 seeds, +0.2 % at 200,000; bench/curve_length.py); the
    # bootstrap curves, which give only a spread, keep `curve_requests`
    root_requests: int = 200_000
    bootstrap: int = 12
    warm: bool = True
    chained: bool = True
    correct: bool = True
    confirm: bool = True
    # the queue check (planner.limit.fast.queue): a level whose paired delays differ from
    # the model's beyond the confidence refits the model's pace of work on that level, at
    # most `max_refits` times; False: the ablation without it
    queue_check: bool = True
    max_refits: int = 2
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class Confirmation:
    """One confirmation level after its latest chunk."""

    rate: float
    chunks: int
    requests: int  # paired requests in the estimate
    warmup_cut: int  # requests MSER-5 cut from the level's start
    bias: tuple[float, ...]  # measured - model miss share, per target
    bias_se: tuple[float, ...]
    limit: float
    low: float
    high: float
    # per target, the model's own miss share on the level's requests (its replay)
    sampled: tuple[float, ...] = ()
    # the server's delay minus the model's for the same requests (planner.limit.fast.misses
    # `_delays`: the SLO's first latency, capped), its mean and batch-means error
    delay_bias_s: float = 0.0
    delay_se_s: float = math.inf
    # how far that delay bias, as a constant offset of the model's latencies on the level's
    # requests, moves the limit (|root with it / root without - 1|); and how far the bias's
    # lower bound in magnitude (|bias| - z x error, at least 0) moves it
    delay_shift: float = 0.0
    delay_shift_low: float = 0.0


@dataclass(frozen=True, kw_only=True)
class FastResult:
    model: Model | None
    predicted: float | None  # the model alone
    limit: float | None
    low: float | None
    high: float | None
    confirmations: tuple[Confirmation, ...]
    stopped: str
    adequate: bool
    characterise_s: float
    confirm_s: float
    # the sizes the model predicted on: "profile", as the load test draws them; "measured",
    # as the server returned them; None: no model
    sizes: Literal["profile", "measured"] | None = None
    # the queue check's refit of the characterised model's work (planner.limit.fast.queue):
    # 1.05 = each request's work 5 % longer under the open-loop load; 1.0: not refitted
    pace: float = 1.0
