"""The fast search's stop rules: after each confirmation chunk, what the level's standing
decides (stop, fall back, move the level, or measure on), as a list of small named rules.

`decide` asks `RULES` in order; the first that decides wins, and none deciding means
measure on. Each rule reads a `Standing` (the level after its latest chunk) and returns a
`Stop` (an answer, or the model found inadequate: the caller falls back to the measured
search), `MOVE` (the next level at the corrected limit), `MEASURE` (another chunk at this
level) or None (not its case). Pure: the delays' verdict is computed once, when a rule
first needs it (the level settled or capped), and `Standing.conf` then holds the
confirmation with its delay shifts (planner.limit.fast.search keeps it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

from planner.limit.fast.misses import (
    DelayVerdict,
    MissCurve,
    delays_differ,
    delays_verdict,
    offset_shift,
    share,
    targets,
)
from planner.limit.fast.stats import batch_means_se
from planner.limit.fast.steps import Confirmation, FastConfig


@dataclass(frozen=True)
class Stop:
    """The search ends here: `stopped` says why; `adequate` False sends the caller to the
    measured search."""

    stopped: str
    adequate: bool = True


MOVE: Literal["move"] = "move"
MEASURE: Literal["measure"] = "measure"
Decision = Stop | Literal["move", "measure"]


@dataclass
class Standing:
    """A confirmation level after its latest chunk: what the stop rules read. `predicted`:
    the model's own limit; `rate`: the level; `chunks`/`moves`: taken at this level / moves
    of the level so far; `chained`: levels run warm and chained; `profile_sizes`: the model
    predicts on the profile's sizes; `bias_narrow`: the bias's interval alone was within
    the half-width (before the model's own spread was added); `z`: the confidence's
    normal quantile."""

    config: FastConfig
    conf: Confirmation
    curve: MissCurve
    predicted: float
    rate: float
    chunks: int
    moves: int
    chained: bool
    profile_sizes: bool
    bias_narrow: bool
    z: float
    _delays: DelayVerdict | None = None

    @property
    def shift(self) -> float:
        """How far the measured bias moves the limit from the model's, as a share."""
        return abs(self.conf.limit / self.predicted - 1.0)

    @property
    def step(self) -> float:
        """How far the corrected limit lies from the level, as a share."""
        return abs(self.conf.limit / self.rate - 1.0)

    @property
    def capped(self) -> bool:
        return self.chunks >= self.config.max_chunks

    @property
    def narrow(self) -> bool:
        conf = self.conf
        return (conf.high - conf.low) / 2 <= self.config.half_width * conf.limit

    @property
    def model_bound(self) -> bool:
        """With the profile's sizes more load narrows the bias, never the model's own noise."""
        return self.profile_sizes and self.bias_narrow and not self.narrow

    @cached_property
    def settled(self) -> bool:
        """Narrow (or bound by the model's noise) on a level that held the busy periods the
        tail is made of. Only a warm, chained level is compared with the long run: a chunk
        on an idle server starts below it by design (the model replays the same cold start
        for the bias)."""
        if not (self.narrow or self.model_bound):
            return False
        return not self.chained or sampled_the_tail(self.conf, self.curve, self.z)

    def delays(self) -> DelayVerdict:
        """The level's delays against the model's (misses.delays_verdict), computed once;
        `conf` then carries the delay shifts. Each shift is a curve's root: asked only
        where the level settled or is capped."""
        if self._delays is None:
            self.conf = with_delay_shift(self.conf, self.curve, self.z)
            self._delays = delays_verdict(
                self.conf.delay_shift, self.conf.delay_shift_low, self.config.tolerance
            )
        return self._delays


Rule = Callable[[Standing], Decision | None]


def misses_other_requests(s: Standing) -> Decision | None:
    """Inadequate: the model misses the SLO's share for other requests than the server
    does (a bias beyond two errors and the share the target allows)."""
    off = [
        (abs(b) - 2 * e, t.allowed)
        for b, e, t in zip(s.conf.bias, s.conf.bias_se, targets(s.config.slo), strict=True)
    ]
    if any(excess > allowed for excess, allowed in off):
        return Stop(
            "model inadequate: it misses the SLO's share for other requests than the "
            f"server does (bias {max(s.conf.bias, key=abs):+.3f})",
            adequate=False,
        )
    return None


def bias_moves_the_limit(s: Standing) -> Decision | None:
    """Inadequate: the measured bias moves the limit more than `inadequate_shift`."""
    if s.shift > s.config.inadequate_shift:
        return Stop(
            f"model inadequate: its measured bias moves the limit {s.shift:.0%} from the "
            f"model's {s.predicted:.3g} req/s",
            adequate=False,
        )
    return None


def nothing_compared(s: Standing) -> Decision | None:
    """No request paired yet: measure on, inadequate once the level is capped."""
    if s.conf.requests != 0:
        return None
    if s.capped:
        return Stop("model inadequate: no request to compare", adequate=False)
    return MEASURE


def too_few_batches(s: Standing) -> Decision | None:
    """Too few batches to judge the bias (no upper bound yet) near the level: measure on."""
    if math.isinf(s.conf.high) and s.step <= 2 * s.config.tolerance and not s.capped:
        return MEASURE
    return None


def limit_off_the_level(s: Standing) -> Decision | None:
    """The corrected limit lies more than half the tolerance off the level: move there,
    inadequate after `max_moves` moves."""
    if s.step <= s.config.tolerance / 2:
        return None
    if s.moves >= s.config.max_moves:
        return Stop(f"model inadequate: not settled after {s.moves} moves", adequate=False)
    return MOVE


def delays_contradict(s: Standing) -> Decision | None:
    """Inadequate: on a settled or capped level the server's delays differ from the
    model's (or are still unclear at the cap) by more than moves the limit `tolerance`."""
    if not (s.settled or s.capped):
        return None
    delays = s.delays()
    if delays == "differ" or (delays == "unclear" and s.capped):
        conf = s.conf
        why = delays_differ(s.config.slo, conf.delay_bias_s, conf.delay_se_s,
                            conf.delay_shift, s.config.tolerance)  # fmt: skip
        return Stop(f"model inadequate: {why}", adequate=False)
    return None


def delays_unclear(s: Standing) -> Decision | None:
    """Settled, but the delays' best estimate is off, not yet clearly: measure on."""
    if s.settled and s.delays() == "unclear":
        return MEASURE
    return None


def converged_on_model_noise(s: Standing) -> Decision | None:
    """Converged where the interval is the model's own noise: more load would not narrow
    it."""
    if s.settled and s.model_bound:
        return Stop(
            "converged: the interval is the model's own noise (more load would not narrow it)"
        )
    return None


def converged(s: Standing) -> Decision | None:
    """Converged: the interval is within the half-width on a level that held the tail."""
    return Stop("converged") if s.settled else None


def tail_not_yet_seen(s: Standing) -> Decision | None:
    """Narrow, but the level has not yet seen the busy periods that decide the tail:
    measure on."""
    return MEASURE if s.narrow and not s.capped else None


def tail_never_seen(s: Standing) -> Decision | None:
    """Inadequate: narrow, and in every chunk the level never held the busy periods the
    model's tail is made of."""
    if s.narrow:
        return Stop(
            f"model inadequate: in {s.chunks} chunks the level never held the busy periods "
            "the model's tail is made of",
            adequate=False,
        )
    return None


def time_cap(s: Standing) -> Decision | None:
    """The level is capped with the interval still wide: answer with it (adequate)."""
    if s.capped:
        wide = (s.conf.high - s.conf.low) / 2 / s.conf.limit
        return Stop(f"time cap: interval +/-{wide:.0%} after {s.chunks} chunks")
    return None


RULES: tuple[Rule, ...] = (
    misses_other_requests,
    bias_moves_the_limit,
    nothing_compared,
    too_few_batches,
    limit_off_the_level,
    delays_contradict,
    delays_unclear,
    converged_on_model_noise,
    converged,
    tail_not_yet_seen,
    tail_never_seen,
    time_cap,
)


def decide(standing: Standing, rules: tuple[Rule, ...] = RULES) -> Decision:
    """The first rule's decision; MEASURE when none decides."""
    for rule in rules:
        decision = rule(standing)
        if decision is not None:
            return decision
    return MEASURE


def with_delay_shift(conf: Confirmation, curve: MissCurve, z: float) -> Confirmation:
    """The confirmation with how far its delay bias, and that bias's lower bound in magnitude
    (|bias| - z x error), move the model's limit (misses.offset_shift)."""
    bias, se = conf.delay_bias_s, conf.delay_se_s
    low_s = max(abs(bias) - z * se, 0.0)  # an unknown (infinite) error: 0
    return replace(
        conf,
        delay_shift=offset_shift(curve, bias),
        delay_shift_low=offset_shift(curve, math.copysign(low_s, bias)),
    )


def sampled_the_tail(conf: Confirmation, curve: MissCurve, z: float) -> bool:
    """The level's requests held the busy periods the tail is made of: on them the model did
    not miss clearly less than its long-run share at that rate (by more than `z` standard
    errors of a sample of that many requests, from the curve's batch means). A model that
    misdescribes the server where its queue forms agrees with it on a sample without one
    (both miss nothing), so its bias could not show there."""
    m = curve.misses(conf.rate)
    long_run = share(m)
    for j, sampled in enumerate(conf.sampled):
        known = m.miss[m.known[:, j], j].astype(float)
        err = batch_means_se(known)
        if err is None or conf.requests == 0:
            continue
        sample_se = err * math.sqrt(known.size / conf.requests)
        if sampled < long_run[j] - z * sample_se:
            return False
    return True
