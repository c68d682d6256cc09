"""The fast limit search: characterise, predict, confirm on warm levels, correct the model
by its own error, stop by the interval.

Pure, like planner.limit.measured.search: a generator (`fast_search`) yields the next step and is
sent back what was measured there (`Taken`); a driver runs the steps against a live endpoint or a
simulated server. The phases:

1. Characterise (closed loop, 1, 2, 4, ... users until the server stops taking more):
   planner.limit.fast.characterise turns the steps into a ServerModel.
   With a known engine model instead (a calibrated server's, or the emulator's own:
   planner.limit.fast.engine_model), one user's requests measure what the client and the
   network add to its latencies, and the model sizes its requests by the profile while the
   server counts tokens as the profile asks them.
2. Predict: the model's long-run miss shares against the rate (planner.limit.fast.misses,
   common random numbers), and the rate where one reaches what the SLO allows.
3. Confirm: open-loop levels at the prediction, the first started warm (a burst of as many
   requests as the model holds in service there), later ones chained without a drain; each
   runs in chunks, its warm-up cut by MSER-5.
4. Correct: the model replays the chain's actual arrivals with the request sizes the server
   returned; per request and constraint, the measured miss minus the model's miss for the
   same request is a control variate (Lavenberg and Welch): queueing noise that both share
   cancels, and what remains is the model's bias. Its mean offsets the model's curve, and
   the limit is the corrected curve's root; a Newton step moves the next level there.
   Queue check (planner.limit.fast.queue): before the misses settle, the same replay shows
   whether the server's queue is longer than the model's (paired delays; where one chunk is
   too short for their error, the paired decode times). When it is, the model's pace of
   work is refitted on the level (the pace whose replay gives the server's mean delay: the
   service time under the open-loop load, not the closed loop's) and the level moves to the
   refitted model's limit, at most `max_refits` times.
5. Stop when the limit's interval (the bias's batch-means error and the model's own, at
   `confidence`) is within `half_width` of it; extend by chunks up to `max_chunks` a level.
   When the bias moves the answer more than `inadequate_shift` from the model's, the
   levels do not settle in `max_moves`, or the level's delays contradict the model's (the
   server's mean capped SLO latency for the same requests, as a constant offset of the
   model's latencies, moves the model's limit more than `tolerance`: misses are rare events,
   delays show every queue; a misfit counts by what it does to the answer), the model is
   inadequate: the caller falls back to the measured search
   (planner.limit.measured.search), never to a guess. These stop rules are named functions in
   planner.limit.fast.stops, asked in order after each chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator

import numpy as np
import polars as pl
from scipy.stats import norm

from planner.limit.fast.characterise import (
    Characterise,
    build_model,
    characterised,
    floats,
    sized,
)
from planner.limit.fast.engine_model import counted_as_asked, one_user
from planner.limit.fast.misses import MissCurve, targets, unsupported
from planner.limit.fast.model import Model, ServerModel
from planner.limit.fast.paired import paired
from planner.limit.fast.queue import MIN_PACE_SHIFT, QueueVerdict, decode_pace, fit_pace, paced
from planner.limit.fast.spread import with_model_spread
from planner.limit.fast.stats import batch_means_se
from planner.limit.fast.steps import (
    Asked,
    Confirmation,
    FastConfig,
    FastResult,
    KnownModel,
    Open,
    Step,
    Taken,
)
from planner.limit.fast.stops import MOVE, Standing, Stop, decide


def fast_search(
    config: FastConfig,
    *,
    characterise: Characterise = build_model,
    known: KnownModel | None = None,
    asked: Asked | None = None,
    note: Callable[[str], None] = lambda _: None,
) -> Generator[Step, Taken, FastResult]:
    """The search as a generator (see the module); returns the FastResult. `note` is told
    the model and each confirmation chunk's estimate in a line. With a `known` model (the
    engine model of a calibrated server) there is no closed-loop characterisation: the
    search predicts with that model on the request sizes the load test draws. Without one,
    the characterised model predicts on the `asked` sizes where the server counts the
    closed loop's requests as asked, else on the sizes it returns."""
    why = unsupported(config.slo)
    if why is not None:
        return FastResult(
            model=None,
            predicted=None,
            limit=None,
            low=None,
            high=None,
            confirmations=(),
            stopped=f"unsupported: {why}",
            adequate=False,
            characterise_s=0,
            confirm_s=0,
        )
    if known is None:
        model, inputs, outputs, horizon, characterise_s = yield from characterised(
            config, characterise
        )
        first = pl.DataFrame({"input_tokens": inputs, "output_tokens": outputs})
        # True: the sizes the load test draws (no sample to bootstrap)
        profile_sizes = asked is not None and counted_as_asked(
            asked, first, alpha=0.01, answers_below=0.75
        )
    else:
        start = yield from one_user(config, known)
        model, first, horizon, characterise_s = start.model, start.first, start.horizon, start.s
        profile_sizes, asked = start.profile_sizes, known
    closed_inputs, closed_outputs = floats(first, "input_tokens"), floats(first, "output_tokens")
    inputs, outputs = closed_inputs, closed_outputs
    if profile_sizes and asked is not None:
        inputs, outputs = asked.input_tokens, asked.output_tokens

    def new_curve(inputs: np.ndarray, outputs: np.ndarray) -> MissCurve:
        return MissCurve(
            model=model, input_tokens=inputs, output_tokens=outputs, slo=config.slo,
            requests=config.root_requests if model.grid_step is None else config.curve_requests,
            seed=config.seed,
        )  # fmt: skip

    curve = new_curve(inputs, outputs)
    count = len(targets(config.slo))
    predicted = curve.root(np.zeros(count))
    if not config.confirm:
        return FastResult(
            model=model,
            predicted=predicted,
            limit=predicted,
            low=None,
            high=None,
            confirmations=(),
            stopped="model only",
            adequate=True,
            characterise_s=characterise_s,
            confirm_s=0.0,
            sizes="profile" if profile_sizes else "measured",
        )
    mean_work = model.mean_work_s(inputs, outputs)
    z = float(norm.ppf(0.5 + config.confidence / 2))
    rng = np.random.default_rng([config.seed, 5])
    sizes = "the profile's" if profile_sizes else f"{inputs.size} measured"
    note(f"model: {model.describe()}, {mean_work:.3g} s of work a request ({sizes} sizes); "
         f"predicts {predicted:.4g} req/s")  # fmt: skip
    rate = predicted
    confirmations: list[Confirmation] = []
    chains: dict[float, Taken] = {}  # chain start -> its records so far
    level_start = chain_start = 0.0
    chunks = moves = refits = 0
    paced_by = 1.0  # the product of the queue check's refits
    chained = config.warm and config.chained
    fresh = True
    confirm_started: float | None = None
    while True:
        chunk = max(config.chunk_s, config.chunk_requests / rate, config.chunk_e2es * mean_work)
        burst = model.in_service(rate, mean_work) if fresh and chained else 0
        taken = yield Open(rate, chunk, burst=burst, fresh=fresh)
        confirm_started = taken.start_s if confirm_started is None else confirm_started
        if fresh:
            chain_start = taken.start_s
        chains[chain_start] = taken
        if chunks == 0:
            level_start = taken.start_s
        fresh = not chained
        chunks += 1
        done_ok = [sized(t, horizon) for t in chains.values()]
        if profile_sizes and asked is not None:
            # hundreds of prompts show what one user's few could not: every request sent,
            # as the successful ones are those short enough to end, long prompts among them
            sent = [t.records.filter(pl.col("input_tokens").is_not_null()) for t in chains.values()]
            so_far = pl.concat([first, *sent], how="diagonal_relaxed")
            if not counted_as_asked(asked, so_far, alpha=0.001, answers=False):
                profile_sizes = False
                note("the server counts tokens otherwise than the profile asks: the model's "
                     "request sizes are now those it returns")  # fmt: skip
        if not profile_sizes:  # the model's sizes: every answer measured so far
            inputs = np.concatenate([closed_inputs, *(floats(r, "input_tokens") for r in done_ok)])
            outputs = np.concatenate(
                [closed_outputs, *(floats(r, "output_tokens") for r in done_ok)]
            )
            curve = new_curve(inputs, outputs)
        level = [(start, t) for start, t in chains.items() if t.end_s > level_start]
        conf = _confirm(config, curve, model, level, level_start, rate, chunks, rng, z)
        bias_narrow = (conf.high - conf.low) / 2 <= config.half_width * conf.limit
        if bias_narrow:
            resample = not profile_sizes or model.grid_step is None  # a cheap model: curves
            conf = with_model_spread(config, conf, curve, inputs, outputs, z, resample)
        confirmations.append(conf)
        confirm_s = taken.end_s - confirm_started
        interval = f"{conf.low:.4g}-{conf.high:.4g}" if math.isfinite(conf.high) else "not yet"
        note(f"level {rate:.4g} req/s, {conf.requests} requests compared: bias "
             f"{', '.join(f'{b:+.3f}' for b in conf.bias)}, delay {conf.delay_bias_s:+.3g} s; "
             f"limit {conf.limit:.4g} req/s ({interval})")  # fmt: skip

        def done(stopped: str, adequate: bool = True, c: Confirmation = conf,
                 took_s: float = confirm_s,
                 profile: bool = profile_sizes, m: Model = model,
                 pace: float = paced_by) -> FastResult:  # fmt: skip
            return FastResult(
                model=m,
                predicted=predicted,
                limit=c.limit,
                low=c.low,
                high=c.high,
                confirmations=tuple(confirmations),
                stopped=stopped,
                adequate=adequate,
                characterise_s=characterise_s,
                confirm_s=took_s,
                sizes="profile" if profile else "measured",
                pace=pace,
            )

        # the queue check (planner.limit.fast.queue): a queue the model does not show refits
        # its pace of work on the level, and the level moves to the refitted model's limit
        refit = config.queue_check and refits < config.max_refits and conf.requests > 0
        if refit and isinstance(model, ServerModel):
            service, service_se = decode_pace(model, level, level_start, curve)
            queue = QueueVerdict(delay_bias_s=conf.delay_bias_s, delay_se_s=conf.delay_se_s,
                                 decode_pace=service, decode_se=service_se)  # fmt: skip
            pace = None
            if queue.differs(z):
                pace = fit_pace(config, curve, model, level, level_start, rate)
            if pace is not None and abs(pace - 1.0) > MIN_PACE_SHIFT:
                model, refits, paced_by = paced(model, pace), refits + 1, paced_by * pace
                curve = new_curve(inputs, outputs)  # the curve of the refitted model
                mean_work = model.mean_work_s(inputs, outputs)
                rate = float(f"{curve.root(np.zeros(count)):.4g}")
                note(f"queue check: delays {queue.delay_bias_s:+.3g} s against the model's for "
                     f"the same arrivals, decode x{service:.3f} +/- {service_se:.2g}; its work "
                     f"refitted x{pace:.3f} on the level: predicts {rate:.4g} req/s")  # fmt: skip
                chunks, fresh = 0, not chained
                continue
        standing = Standing(
            config=config, conf=conf, curve=curve, predicted=predicted, rate=rate,
            chunks=chunks, moves=moves, chained=chained, profile_sizes=profile_sizes,
            bias_narrow=bias_narrow, z=z,
        )  # fmt: skip
        decision = decide(standing)  # planner.limit.fast.stops: the first rule that decides
        confirmations[-1] = standing.conf  # with its delay shifts where a rule asked for them
        if isinstance(decision, Stop):
            return done(decision.stopped, adequate=decision.adequate)
        if decision == MOVE:
            moves += 1
            rate = float(f"{conf.limit:.4g}")
            chunks = 0
            fresh = not chained
        # MEASURE: another chunk at this level


def _confirm(
    config: FastConfig,
    curve: MissCurve,
    model: Model,
    chains: list[tuple[float, Taken]],
    level_start: float,
    rate: float,
    chunks: int,
    rng: np.random.Generator,
    z: float,
) -> Confirmation:
    """The level at `rate` after its `chunks`-th chunk: the model replays each chain holding
    the level's requests from the chain's start."""
    count = len(targets(config.slo))
    pairs_of = [paired(config, curve, model, taken, chain_start, level_start, rate, rng)
                for chain_start, taken in chains]  # fmt: skip
    cuts = sum(p.cut for p in pairs_of)
    d_all = np.concatenate([p.diffs for p in pairs_of]) if pairs_of else np.zeros((0, count))
    seen_all = np.concatenate([p.seen for p in pairs_of]) if pairs_of else np.zeros((0, count))
    delays = np.concatenate([p.delays_s for p in pairs_of]) if pairs_of else np.zeros(0)
    delays = delays[~np.isnan(delays)]
    delay_se = batch_means_se(delays)
    delay_bias = float(delays.mean()) if delays.size else 0.0
    # the model's own miss share on the level's requests: a sample without the busy periods
    # its long run has says nothing yet about the tail
    sampled = tuple(float(np.nanmean(seen_all[:, j])) if seen_all.size else 0.0
                    for j in range(count))  # fmt: skip
    bias, se = np.zeros(count), np.zeros(count)
    pairs = 0
    for j in range(count):
        d = d_all[:, j]
        d = d[~np.isnan(d)]
        pairs = max(pairs, d.size)
        bias[j] = float(d.mean()) if d.size else 0.0
        err = batch_means_se(d)
        # n pairs that all agree still leave a disagreement rate of about 1 / n unseen
        se[j] = math.inf if err is None else max(err, 1.0 / max(d.size, 1))
    limit = curve.root(bias)
    certain = not np.isinf(se).any()
    return Confirmation(
        rate=rate,
        chunks=chunks,
        requests=pairs,
        warmup_cut=cuts,
        bias=tuple(bias),
        bias_se=tuple(se),
        limit=limit,
        low=curve.root(bias + z * se) if certain else 0.0,
        high=curve.root(bias - z * se) if certain else math.inf,
        sampled=sampled,
        delay_bias_s=delay_bias,
        delay_se_s=math.inf if delay_se is None else delay_se,
    )
