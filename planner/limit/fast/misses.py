"""An SLO as miss shares: which requests miss which constraint, measured or modelled, and
the load at which the model's long-run miss share reaches what the SLO allows.

A percentile constraint `ttft:p95<=2s` holds when at most 5 % of requests have TTFT above
2 s, so each constraint becomes a per-request miss (0/1) and an allowed share: percentiles
(1 - q), attainment (1 - the attainment), errors (the error rate). Working on shares rather
than on percentiles lets the search subtract a measured request's miss from the model's miss
for the same request (the control variate of planner.limit.fast.search). Mean and max
statistics have no such form: the fast search declines them (`unsupported`).

A request still running when its records were read is unknown for a constraint unless it is
already past the threshold; unknown requests are left out on both sides of a comparison.
"""

from __future__ import annotations

import copy
import math
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import polars as pl

from planner.limit.fast.model import Model, Served
from planner.slo.spec import Slo

DELAY_CAP = 4.0  # a delay counts up to this many times its threshold (`_delays`)


@dataclass(frozen=True)
class Target:
    """One constraint as a miss share: `metrics` the thresholds a request must meet (one for
    a percentile, all for attainment, none for errors: failures only)."""

    name: str
    thresholds: tuple[tuple[str, float], ...]
    allowed: float


def unsupported(slo: Slo) -> str | None:
    """Why the fast search cannot take this SLO (None when it can)."""
    for c in slo.percentiles:
        q = c.quantile
        if q is None or q >= 1.0:
            return f"{c.name} is a mean or a maximum, not a share of requests"
        if c.metric not in ("ttft", "e2e", "tpot"):
            return f"the model has no {c.metric}"
    if any(t.metric not in ("ttft", "e2e", "tpot") for t in slo.request_thresholds):
        return "the model has ttft, e2e and tpot only"
    return None


def targets(slo: Slo) -> tuple[Target, ...]:
    out = [
        Target(c.name, ((c.metric, c.threshold_s),), 1.0 - float(c.quantile or 0.0))
        for c in slo.percentiles
    ]
    if slo.min_attainment is not None:
        bounds = tuple((t.metric, t.threshold_s) for t in slo.request_thresholds)
        out.append(Target("attainment", bounds, 1.0 - slo.min_attainment))
    if slo.max_error_rate is not None:
        out.append(Target("errors", (), slo.max_error_rate))
    return tuple(out)


DelayVerdict = Literal["agree", "unclear", "differ"]


@dataclass(frozen=True)
class Misses:
    """Per request and target: missed, and known (resolved, or already past a threshold)."""

    miss: np.ndarray  # (requests, targets) bool
    known: np.ndarray  # (requests, targets) bool


def _combine(
    slo: Slo,
    values: dict[str, np.ndarray],
    failed: np.ndarray,
    pending: dict[str, np.ndarray],
) -> Misses:
    """Misses from per-metric values (NaN: no value), failures, and per-metric pending
    masks (the value is a lower bound so far)."""
    n = failed.size
    none = np.zeros(n, dtype=bool)
    cols_miss, cols_known = [], []
    for target in targets(slo):
        counts_failures = not (target.thresholds and slo.success_only)
        miss = failed.copy() if counts_failures else none.copy()
        excluded = none.copy() if counts_failures else failed.copy()
        unknown = none.copy() if target.thresholds else pending["e2e"].copy()
        for metric, threshold in target.thresholds:
            v = values[metric]
            past = v > threshold  # NaN: not past
            miss |= past & ~failed
            unknown |= pending[metric] & ~past
            if target.name != "attainment":
                # a percentile leaves out requests without the value (one-token TPOT);
                # attainment counts them as within the bound (planner.slo.verdict.good_mask)
                excluded |= np.isnan(v) & ~failed & ~pending[metric]
        known = ~(unknown & ~miss) & ~excluded
        cols_miss.append(miss & known)
        cols_known.append(known)
    return Misses(np.column_stack(cols_miss), np.column_stack(cols_known))


def measured_misses(records: pl.DataFrame, slo: Slo, *, now_s: float) -> Misses:
    """Misses of load-test records read at `now_s` (columns sent_s, ttft_s, e2e_s, tpot_s,
    ok, error_class; a null `ok` is a request still running). A running or censored request
    (error class `cancelled`) has its age as a lower bound of TTFT (until its first token)
    and of E2E, and no TPOT yet: pending."""
    return _combine(slo, *_measured_values(records, now_s))


def measured_delays(records: pl.DataFrame, slo: Slo, *, now_s: float) -> np.ndarray:
    """Per request, the delay (`_delays`) of load-test records read at `now_s`: a pending
    request's is known once its lower bound reached the cap, else NaN."""
    return _delays(slo, *_measured_values(records, now_s))


def _measured_values(
    records: pl.DataFrame, now_s: float
) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
    """(per-metric values, failed, per-metric pending) of load-test records read at `now_s`
    (see `measured_misses`)."""
    n = records.height
    ok_col = records["ok"]
    running = ok_col.is_null().to_numpy()
    ok = ok_col.fill_null(False).to_numpy().astype(bool)
    censored = np.zeros(n, dtype=bool)
    if "error_class" in records.columns:
        censored = records["error_class"].is_in(["cancelled"]).fill_null(False).to_numpy() & ~ok
    failed = ~ok & ~censored & ~running
    open_ = running | censored
    sent = _column(records, "sent_s")
    ended = _column(records, "end_s")
    age = np.where(running, now_s - sent, ended - sent)
    values: dict[str, np.ndarray] = {}
    pending: dict[str, np.ndarray] = {}
    for metric in ("ttft", "e2e", "tpot"):
        v = np.where(ok | open_, _column(records, f"{metric}_s"), np.nan)
        waiting = open_ & np.isnan(v) if metric == "ttft" else open_
        # TTFT and E2E of an open request are at least its age; its TPOT is unknown
        v = np.where(waiting, age if metric in ("ttft", "e2e") else np.nan, v)
        values[metric] = v
        pending[metric] = waiting
    return values, failed, pending


def _column(records: pl.DataFrame, name: str) -> np.ndarray:
    if name not in records.columns:
        return np.full(records.height, np.nan)
    return records[name].cast(pl.Float64).fill_null(np.nan).to_numpy()


def model_misses(served: Served, slo: Slo) -> Misses:
    """Misses of the model's requests (all resolved)."""
    return _combine(slo, *_model_values(served))


def model_delays(served: Served, slo: Slo) -> np.ndarray:
    """Per request, the delay (`_delays`) of the model's requests."""
    return _delays(slo, *_model_values(served))


def _model_values(
    served: Served,
) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
    values = {"ttft": served.ttft_s, "e2e": served.e2e_s, "tpot": served.tpot_s}
    none = np.zeros(served.refused.size, dtype=bool)
    return values, served.refused, dict.fromkeys(values, none)


def delay_bound(slo: Slo) -> tuple[str, float] | None:
    """The latency whose delay is compared (`_delays`): the SLO's first bound, as (metric,
    threshold seconds); None for an SLO on errors alone."""
    bounds = [(c.metric, c.threshold_s) for c in slo.percentiles]
    bounds += [(t.metric, t.threshold_s) for t in slo.request_thresholds]
    return bounds[0] if bounds else None


def _delays(
    slo: Slo, values: dict[str, np.ndarray], failed: np.ndarray, pending: dict[str, np.ndarray]
) -> np.ndarray:
    """Per request, its delay: the SLO's first latency capped at `DELAY_CAP` times the
    threshold, a failure at the cap (left out, NaN, when the SLO counts successes only); for
    an SLO on errors alone, 1 for a failure and 0 otherwise. Unlike a miss (0/1 past the
    threshold), a delay moves with every queue, not only with the rare ones that cross the
    threshold: below a model's knee, a server with more slots than it shows shorter delays
    on the same arrivals although neither misses (Little's law: at the same throughput, fewer
    in flight)."""
    bound = delay_bound(slo)
    if bound is None:
        return np.where(pending["e2e"], np.nan, failed.astype(float))
    metric, threshold = bound
    cap = DELAY_CAP * threshold
    value = np.minimum(values[metric], cap)  # NaN stays NaN: no value
    value = np.where(pending[metric] & ~(value >= cap), np.nan, value)
    return np.where(failed, np.nan if slo.success_only else cap, value)


def replay(
    model: Model,
    arrival_s: np.ndarray,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    *,
    open_s: np.ndarray,
    sizes: tuple[np.ndarray, np.ndarray],
    rng: np.random.Generator,
    rounds: int = 3,
) -> tuple[Served, np.ndarray, np.ndarray]:
    """The model over requests whose size is NaN where the server did not return one: such
    a request gets an (input, output) pair drawn from `sizes`. One still open after
    `open_s` seconds (NaN: not open) needed at least that long on the server: where the
    model ends it sooner, its answer is drawn again among the pairs at least as long as the
    model's own pace says it needs to run that long (or that length where no pair is), up
    to `rounds` times. Drawn from all pairs, a long answer still running at a chunk's end
    (the heavy tail that holds slots) came back typical, and the model freed its slot
    early. Returns what the model served and the sizes it served."""
    inputs, outputs = input_tokens.copy(), output_tokens.copy()
    unsized = np.isnan(inputs) | np.isnan(outputs)
    picks = rng.integers(0, sizes[0].size, int(unsized.sum()))
    inputs[unsized], outputs[unsized] = sizes[0][picks], sizes[1][picks]
    served = model.serve(arrival_s, inputs, outputs)
    order = np.argsort(sizes[1], kind="stable")
    ranked = sizes[1][order]
    for _ in range(rounds):
        short = unsized & (served.e2e_s < open_s)  # NaN (not open, refused): False
        if not short.any():
            break
        with np.errstate(invalid="ignore", divide="ignore"):
            pace = served.tpot_s[short]
            need = 1.0 + (open_s[short] - served.ttft_s[short]) / pace
        need = np.ceil(np.where(np.isfinite(need) & (pace > 0), need, 0.0))
        need = np.maximum(need, outputs[short] + 1.0)
        above = np.searchsorted(ranked, need, side="left")
        room = ranked.size - above
        pick = order[np.minimum(above + (rng.random(room.size) * room).astype(int),
                                ranked.size - 1)]  # fmt: skip
        inputs[short] = sizes[0][pick]
        outputs[short] = np.where(room > 0, sizes[1][pick], need)
        served = model.serve(arrival_s, inputs, outputs)
    return served, inputs, outputs


def share(m: Misses) -> np.ndarray:
    """Miss share per target among known requests (0 where none is known)."""
    known = m.known.sum(axis=0)
    return np.where(known > 0, m.miss.sum(axis=0) / np.maximum(known, 1), 0.0)


@dataclass(kw_only=True)
class MissCurve:
    """The model's long-run miss shares against the arrival rate (Poisson), with common
    random numbers: the same unit gaps and the same request sizes at every rate, so the curve
    is smooth in the rate and two rates differ only by the rate. Request sizes are drawn from
    the measured (input, output) pairs; the first `warmup_share` of requests is left out."""

    model: Model
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    slo: Slo
    requests: int = 20_000
    warmup_share: float = 0.1
    seed: int = 0
    # the SLO's first latency of every request this much longer (`with_delay_offset`)
    delay_offset_s: float = 0.0
    _cache: dict[float, Misses] = field(default_factory=dict)
    _served: dict[float, Served] = field(default_factory=dict)  # each rate's run, as served
    _capacity: float | None = None

    def __post_init__(self) -> None:
        rng = np.random.default_rng([self.seed, 11])
        self._gaps = np.cumsum(rng.exponential(1.0, self.requests))
        picks = rng.integers(0, self.input_tokens.size, self.requests)
        self._inputs = self.input_tokens[picks]
        self._outputs = self.output_tokens[picks]
        self._skip = int(self.warmup_share * self.requests)

    def misses(self, rate: float) -> Misses:
        key = float(f"{rate:.6g}")
        if key not in self._cache:
            self._store(key, self.model.serve(self._gaps / key, self._inputs, self._outputs))
        return self._cache[key]

    def _store(self, key: float, served: Served) -> None:
        self._served[key] = served
        m = model_misses(self._offset(served), self.slo)
        self._cache[key] = Misses(m.miss[self._skip :], m.known[self._skip :])

    def _offset(self, served: Served) -> Served:
        bound = delay_bound(self.slo)
        if self.delay_offset_s == 0.0 or bound is None:
            return served
        name = f"{bound[0]}_s"
        return replace(served, **{name: getattr(served, name) + self.delay_offset_s})

    def with_delay_offset(self, offset_s: float) -> MissCurve:
        """The same curve with the SLO's first latency of every request `offset_s` longer:
        the runs made so far are reused (their misses recounted), the rates it adds run
        for both."""
        other = copy.copy(self)
        other.delay_offset_s = offset_s
        other._cache = {}
        for key, served in self._served.items():
            other._store(key, served)
        other._served = self._served
        return other

    def _fill(self, rates: list[float]) -> None:
        """Run the uncached `rates` side by side, one process each (where `_side_by_side`)."""
        keys = [k for k in dict.fromkeys(float(f"{r:.6g}") for r in rates) if k not in self._cache]
        if len(keys) < 2:
            return  # one rate runs here, when asked
        fork = multiprocessing.get_context("fork")
        # Ctrl-C reaches the parent, which ends the search; the children finish their run
        with ProcessPoolExecutor(len(keys), mp_context=fork, initializer=_ignore_sigint) as pool:
            runs = [pool.submit(self.model.serve, self._gaps / k, self._inputs, self._outputs)
                    for k in keys]  # fmt: skip
            for key, run in zip(keys, runs, strict=True):
                self._store(key, run.result())

    def excess(self, rate: float, offset: np.ndarray) -> float:
        """max over targets of (model share + offset - allowed): > 0 fails."""
        allowed = np.array([t.allowed for t in targets(self.slo)])
        return float(np.max(share(self.misses(rate)) + offset - allowed))

    def capacity_rps(self) -> float:
        """The model's capacity with the curve's request sizes (cached: costly for an
        engine model)."""
        if self._capacity is None:
            self._capacity = self.model.capacity_rps(self._inputs, self._outputs)
        return self._capacity

    def root(self, offset: np.ndarray, *, rel_tol: float = 0.003) -> float:
        """The highest rate at which `excess` is <= 0: bisection on a log scale between a
        fifth of the capacity and the capacity (three times it for a server that refuses
        instead of queueing); the lower end if even that fails. For a model with a
        `grid_step` (an engine model), the bisection runs on the grid's rates (every root
        reuses them) up to 1.5 times the capacity (which it estimates from requests sent at
        once, not from a steady mix), and the root is interpolated linearly in the excess
        between the last two."""
        capacity = self.capacity_rps()
        low, high = 0.2 * capacity, (3.0 if self.model.refuses else 1.0) * capacity
        step = self.model.grid_step
        if step is not None:
            return self._grid_root(offset, low, 1.5 * capacity, step)
        if self.excess(low, offset) > 0:
            return low
        if self.excess(high, offset) <= 0:
            return high
        while high / low > 1.0 + rel_tol:
            mid = float(np.sqrt(low * high))
            if self.excess(mid, offset) <= 0:
                low = mid
            else:
                high = mid
        return low

    def batch_roots(self, offset: np.ndarray, batches: int = 5) -> list[float]:
        """The root of each of `batches` consecutive parts of the curve's run, from the
        rates already evaluated (interpolated between the two around its crossing; the end
        rate where a part does not cross among them): their spread is the root's own noise,
        without the slope's linearisation that understates it at a cliff (a continuously
        batching engine's first tokens stay short up to its capacity, then all grow)."""
        rates = sorted(self._cache)
        allowed = np.array([t.allowed for t in targets(self.slo)])
        n = self._cache[rates[0]].miss.shape[0]
        edges = np.linspace(0, n, batches + 1).astype(int)
        roots = []
        for b in range(batches):
            part = slice(edges[b], edges[b + 1])
            excess = [
                float(np.max(share(Misses(m.miss[part], m.known[part])) + offset - allowed))
                for m in (self._cache[r] for r in rates)
            ]
            crossing = next((k for k, e in enumerate(excess) if e > 0), None)
            if crossing is None:
                roots.append(rates[-1])
            elif crossing == 0:
                roots.append(rates[0])
            else:
                below, above = excess[crossing - 1], excess[crossing]
                lo, hi = rates[crossing - 1], rates[crossing]
                roots.append(lo + (hi - lo) * below / (below - above))
        return roots

    def _grid_root(self, offset: np.ndarray, low: float, high: float, step: float) -> float:
        """`root` on the rates low * (1 + step)^i. The bisection first brackets between
        half the capacity and `high` (where an engine's limit lies unless the SLO is tight),
        and only below that when half the capacity already fails: each rate is a costly run.
        With two cores (`_side_by_side`) the two ends run at once, and then two rates a
        round, at the thirds: five rounds instead of eight for the demo's engine (the same
        root where the curve is monotone)."""
        ratio = math.log1p(step)
        at = lambda i: float(f"{low * math.exp(i * ratio):.6g}")  # noqa: E731
        fails = lambda i: self.excess(at(i), offset) > 0  # noqa: E731
        lo, hi = 0, max(1, math.ceil(math.log(high / low) / ratio))
        half = math.ceil(math.log(0.5 * self.capacity_rps() / low) / ratio)
        pairs = _side_by_side()
        if 0 < half < hi:
            if pairs:
                self._fill([at(half), at(hi)])
            if fails(half):
                hi = half
            else:
                lo = half
        if lo == 0 and fails(lo):
            return at(lo)
        if hi > half and not fails(hi):
            return at(hi)
        while hi - lo > 1:
            if pairs and hi - lo >= 3:
                a, b = lo + (hi - lo) // 3, lo + 2 * (hi - lo) // 3
                self._fill([at(a), at(b)])
                lo, hi = (b, hi) if not fails(b) else (a, b) if not fails(a) else (lo, a)
                continue
            mid = (lo + hi) // 2
            if fails(mid):
                hi = mid
            else:
                lo = mid
        below, above = self.excess(at(lo), offset), self.excess(at(hi), offset)
        return at(lo) + (at(hi) - at(lo)) * below / (below - above)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _side_by_side() -> bool:
    """Whether an engine model's rates run in two processes at once: with two cores or
    more for this process, where processes fork (Linux; each run is seconds of Python)."""
    return sys.platform == "linux" and len(os.sched_getaffinity(0)) >= 2


def offset_shift(curve: MissCurve, offset_s: float) -> float:
    """How far a constant `offset_s` on the SLO's first latency of every request moves the
    model's limit, as a share: the root of the curve so offset against the root without.
    A server slower than the model by a constant meets a threshold T where the model meets
    T - offset; the share of requests near T, not the raw offset, decides how far that is."""
    if offset_s == 0.0:
        return 0.0
    count = len(targets(curve.slo))
    base = curve.root(np.zeros(count))
    moved = curve.with_delay_offset(offset_s).root(np.zeros(count))
    return abs(moved / base - 1.0) if base > 0 else 0.0


def delays_verdict(shift: float, shift_low: float, tolerance: float) -> DelayVerdict:
    """Whether the server's delays at a level agree with the model's, by how far they move
    the limit: "agree" when their mean difference for the same requests, taken as a constant
    offset of the model's latencies, moves the limit (`shift`, a share) by no more than
    `tolerance`; "differ" when even the difference's lower bound in magnitude moves it more
    (`shift_low`); "unclear" between. The fast search answers only on "agree" (it measures
    on while "unclear", up to its chunk cap).

    The miss bias cannot see a model that misstates the server's capacity where both miss
    almost nothing (a model with a quarter fewer slots, at its own low prediction: the chunks
    held no queue long enough for a miss on either side), but the delays differ there
    already: the model queues requests the server serves at once, and its requests near the
    threshold cross it once that queue is added or taken away. A raw delay compared with how
    far the load moves it (the rule before) condemned a model whose limit a constant offset
    hardly moves: 20 ms of client overhead on a busy machine against a 2 s threshold."""
    if shift <= tolerance:
        return "agree"
    if shift_low > tolerance:
        return "differ"
    return "unclear"


def delays_differ(slo: Slo, bias_s: float, se_s: float, shift: float, tolerance: float) -> str:
    """Why a level's delays make the model inadequate, in one clause."""
    metric = (delay_bound(slo) or ("failure share", 0.0))[0]
    error = f"+/- {se_s:.2g}" if math.isfinite(se_s) else "(error unknown)"
    return (
        f"for the same requests the server's mean {metric} (capped) is {bias_s:+.3g} s "
        f"{error} off the model's, which moves the limit {shift:.1%}, more than the "
        f"tolerance {tolerance:.0%}"
    )
