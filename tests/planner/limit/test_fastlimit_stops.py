"""The fast search's stop rules (planner.limit.fast.stops), one by one: each planted
condition decides as the rule says, the standing without it leaves the rule silent, and
`decide` asks them in order."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from planner.limit.fast import stops
from planner.limit.fast.misses import MissCurve
from planner.limit.fast.model import ServerModel
from planner.limit.fast.steps import Confirmation, FastConfig
from planner.limit.fast.stops import MEASURE, MOVE, Standing, Stop, decide
from planner.slo.spec import parse_slo

SLO = parse_slo("ttft:p95<=300ms")
CONFIG = FastConfig(SLO)  # tolerance 5 %, half-width 3 %, 8 chunks, 3 moves, shift 35 %
Z = 1.645
_CURVE: list[MissCurve] = []


def _curve() -> MissCurve:
    """A small model's miss curve (8 slots, 64 decode tokens a request), built once."""
    if not _CURVE:
        outputs = np.random.default_rng(4).integers(32, 97, 2000).astype(float)
        model = ServerModel(8, (0.05, 0.0), (0.01, 0.01), (1.0,) * 8)
        _CURVE.append(MissCurve(model=model, input_tokens=np.full(outputs.size, 100.0),
                                output_tokens=outputs, slo=SLO, requests=4000, seed=1))  # fmt: skip
    return _CURVE[0]


def _standing(conf: dict[str, Any] | None = None, **changes: Any) -> Standing:
    """A level at 10 req/s whose corrected limit is 10 +/- 0.1 on 200 paired requests, no
    bias and no delay: converged. `conf` and `changes` plant one condition."""
    base = Confirmation(rate=10.0, chunks=1, requests=200, warmup_cut=0, bias=(0.0,),
                        bias_se=(0.001,), limit=10.0, low=9.9, high=10.1, sampled=(0.05,),
                        delay_bias_s=0.0, delay_se_s=0.001)  # fmt: skip
    fields: dict[str, Any] = dict(config=CONFIG, conf=replace(base, **(conf or {})),
                                  curve=_curve(), predicted=10.0, rate=10.0, chunks=1,
                                  moves=0, chained=False, profile_sizes=False,
                                  bias_narrow=True, z=Z)  # fmt: skip
    fields.update(changes)
    return Standing(**fields)


def test_the_base_standing_converges_every_rule_before_converged_silent() -> None:
    """The rules are asked in order: those after `converged` may decide on its standing
    too (a narrow level), they are never reached there."""
    assert decide(_standing()) == Stop("converged")
    deciding = [rule.__name__ for rule in stops.RULES if rule(_standing()) is not None]
    assert deciding[0] == "converged"


def test_misses_other_requests() -> None:
    # a bias of 0.08 +/- 0.01: beyond two errors by 0.06, more than the 5 % the SLO allows
    planted = _standing({"bias": (0.08,), "bias_se": (0.01,)})
    decision = stops.misses_other_requests(planted)
    assert isinstance(decision, Stop) and not decision.adequate
    assert "other requests than the server does (bias +0.080)" in decision.stopped
    # within the allowance (0.06 - 2 x 0.01 = 0.04 <= 0.05): silent
    assert stops.misses_other_requests(_standing({"bias": (0.06,), "bias_se": (0.01,)})) is None


def test_bias_moves_the_limit() -> None:
    decision = stops.bias_moves_the_limit(_standing({"limit": 14.0}))  # 40 % > 35 %
    assert decision == Stop(
        "model inadequate: its measured bias moves the limit 40% from the model's 10 req/s",
        adequate=False,
    )
    assert stops.bias_moves_the_limit(_standing({"limit": 13.0})) is None  # 30 %


def test_nothing_compared() -> None:
    assert stops.nothing_compared(_standing({"requests": 0})) == MEASURE
    capped = stops.nothing_compared(_standing({"requests": 0}, chunks=8))
    assert capped == Stop("model inadequate: no request to compare", adequate=False)
    assert stops.nothing_compared(_standing(chunks=8)) is None


def test_too_few_batches() -> None:
    thin = {"high": math.inf, "low": 0.0}
    assert stops.too_few_batches(_standing(thin, rate=9.1)) == MEASURE  # step 9.9 % <= 10 %
    assert stops.too_few_batches(_standing(thin, rate=8.9)) is None  # 12.4 %: move instead
    assert stops.too_few_batches(_standing(thin, chunks=8)) is None  # capped
    assert decide(_standing(thin, chunks=8)).stopped.startswith("time cap")  # type: ignore[union-attr]


def test_limit_off_the_level() -> None:
    assert stops.limit_off_the_level(_standing(rate=9.7)) == MOVE  # 3.1 % > 2.5 %
    assert stops.limit_off_the_level(_standing(rate=9.8)) is None  # 2.0 %
    assert stops.limit_off_the_level(_standing(rate=9.7, moves=3)) == Stop(
        "model inadequate: not settled after 3 moves", adequate=False
    )


def test_delays_contradict_where_even_their_lower_bound_moves_the_limit() -> None:
    planted = _standing({"delay_bias_s": 0.1, "delay_se_s": 0.001})
    decision = stops.delays_contradict(planted)
    assert isinstance(decision, Stop) and not decision.adequate
    assert "server's mean ttft (capped) is +0.1 s" in decision.stopped
    assert "more than the tolerance 5%" in decision.stopped
    assert planted.conf.delay_shift > CONFIG.tolerance  # the shifts are kept on the level
    # unclear (error unknown: the lower bound moves nothing): silent until the cap
    unclear = {"delay_bias_s": 0.1, "delay_se_s": math.inf}
    assert stops.delays_contradict(_standing(unclear)) is None
    assert isinstance(stops.delays_contradict(_standing(unclear, chunks=8)), Stop)
    # neither settled nor capped: the delays are not asked (no shift computed)
    wide = _standing({"delay_bias_s": 0.1, "delay_se_s": 0.001, "low": 5.0, "high": 15.0})
    assert stops.delays_contradict(wide) is None and wide.conf.delay_shift == 0.0


def test_delays_unclear() -> None:
    unclear = _standing({"delay_bias_s": 0.1, "delay_se_s": math.inf})
    assert stops.delays_unclear(unclear) == MEASURE
    assert decide(unclear) == MEASURE  # not "converged"
    assert stops.delays_unclear(_standing({"delay_bias_s": 0.001, "delay_se_s": 0.001})) is None


def test_converged_on_model_noise() -> None:
    # the bias alone was narrow, the model's own spread widened the interval to +/-5 %
    planted = _standing({"low": 9.5, "high": 10.5}, profile_sizes=True)
    assert stops.converged_on_model_noise(planted) == Stop(
        "converged: the interval is the model's own noise (more load would not narrow it)"
    )
    assert stops.converged_on_model_noise(_standing({"low": 9.5, "high": 10.5})) is None
    assert stops.converged_on_model_noise(_standing(profile_sizes=True)) is None  # narrow


def test_converged() -> None:
    assert stops.converged(_standing()) == Stop("converged")
    assert stops.converged(_standing({"low": 9.6, "high": 10.4})) is None  # +/-4 % > 3 %


def _unsampled_tail() -> dict[str, Any]:
    """A chained level at the curve's own limit whose 2000 requests the model never missed:
    they held none of the busy periods its 5 % tail is made of."""
    root = _curve().root(np.zeros(1))
    return {"rate": root, "limit": root, "low": root * 0.99, "high": root * 1.01,
            "requests": 2000, "sampled": (0.0,)}  # fmt: skip


def test_tail_not_yet_seen() -> None:
    conf = _unsampled_tail()
    planted = _standing(conf, rate=conf["rate"], predicted=conf["rate"], chained=True)
    assert not planted.settled
    assert stops.tail_not_yet_seen(planted) == MEASURE
    assert decide(planted) == MEASURE
    sampled = _standing({**conf, "sampled": (0.05,)}, rate=conf["rate"],
                        predicted=conf["rate"], chained=True)  # fmt: skip
    assert sampled.settled and decide(sampled) == Stop("converged")


def test_tail_never_seen() -> None:
    conf = _unsampled_tail()
    planted = _standing(conf, rate=conf["rate"], predicted=conf["rate"], chained=True, chunks=8)
    assert decide(planted) == Stop(
        "model inadequate: in 8 chunks the level never held the busy periods the model's "
        "tail is made of",
        adequate=False,
    )
    assert stops.tail_never_seen(_standing({"low": 9.0, "high": 11.0}, chunks=8)) is None


def test_time_cap() -> None:
    planted = _standing({"low": 9.0, "high": 11.0}, chunks=8)  # +/-10 %
    assert stops.time_cap(planted) == Stop("time cap: interval +/-10% after 8 chunks")
    assert decide(planted) == Stop("time cap: interval +/-10% after 8 chunks")
    assert stops.time_cap(_standing({"low": 9.0, "high": 11.0}, chunks=7)) is None
    assert decide(_standing({"low": 9.0, "high": 11.0}, chunks=7)) == MEASURE  # none decides
