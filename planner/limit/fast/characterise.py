"""From closed-loop steps to a ServerModel: what one request costs alone, how much each
slows when more share the server, and how many the server serves at once.

Each step holds `users` clients that send their next request as soon as the last one ends.
Their first round is left out (it starts from an empty server). From what remains:

- alone (the 1-user step): first-token time against prompt length, and the rest of the
  answer against output length, each a least-squares line;
- slowdown at n users: the decode time measured over the decode time the solo lines predict
  for the same requests (a queue wait sits before the first token, never in the decode);
  it finds the requests in service, below. The model's slowdown, which stretches a
  request's whole work, is what makes its throughput the step's: the time requests held the
  server over their solo work (their end-to-end time where every user was served; where
  some waited, the slowdown that makes the requests in service the slots). llama.cpp with
  4 slots on two shared cores decoded 7.3 times slower at 4 users than alone but took only
  1.5 times as long to the first token: the decode ratio applied to the whole work gave it
  a capacity of 10.2 req/s where its 4-user step itself ended 16.1;
- in service: by Little's law, throughput x the time a request holds the server (its solo
  work x the slowdown). It equals the users while every user is served; once it stays
  clearly below them the server holds no more: its slots are then the most requests seen
  streaming at once (first token in, not ended) in that step. A server that fails requests
  (HTTP 429, or any failure) at a step where it no longer held all its users, and whose
  requests served there did not wait for a slot, is a refusing one, with the requests it
  admitted in service: a refusing server's admitted requests do not queue, so their first
  tokens come about as soon as in the step before. llama.cpp with 4 slots queued its 8 users
  (median first token 0.06 s at 4 users, 0.76 s at 8) and dropped 6 of 76 connections at
  once: a queue that sheds a few. In another run it dropped 1 of 77 at 4 users, all of them
  held: a failure where nobody was turned away.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

import numpy as np
import polars as pl

from contracts.latency import CENSORED_CLASSES
from planner.limit.fast.misses import measured_misses, share, targets
from planner.limit.fast.model import Model, ServerModel
from planner.limit.fast.steps import Closed, FastConfig, Step, Taken


@dataclass(frozen=True, kw_only=True)
class StepSummary:
    """What one closed-loop step showed (after its first round)."""

    users: int
    throughput_rps: float  # successful requests ending per second
    slowdown: float
    in_service: float
    failed_share: float
    peak: int = 0  # most of the step's requests seen between first token and end at once
    ttft_p50_s: float = 0.0  # median first-token time of the step's successful requests
    held_ratio: float = 1.0  # their end-to-end time over their solo work

    def held_slowdown(self, slots: int) -> float:
        """The slowdown of a request's whole work that gives this step's throughput: its
        end-to-end ratio where every user was served, else the one that would make the
        requests in service the slots (see the module)."""
        if not self.saturated or self.in_service <= 0:
            return max(self.held_ratio, 1.0)
        return max(self.slowdown * slots / self.in_service, 1.0)

    @property
    def saturated(self) -> bool:
        return self.in_service < 0.85 * self.users


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares intercept and slope (the mean alone when x does not vary)."""
    if x.size == 0:
        return 0.0, 0.0
    if np.ptp(x) == 0 or x.size < 3:
        return float(np.mean(y)), 0.0
    slope, intercept = np.polyfit(x.astype(float), y.astype(float), 1)
    return float(intercept), float(slope)


def _after_first_round(records: pl.DataFrame, users: int) -> pl.DataFrame:
    return records.sort("sent_s").slice(users)


def solo_costs(records: pl.DataFrame) -> tuple[tuple[float, float], tuple[float, float]]:
    """(first-token line, decode line) from a 1-user step's successful requests."""
    done = _after_first_round(records, 1).filter(pl.col("ok").fill_null(False))
    if done.height == 0:
        done = records.filter(pl.col("ok").fill_null(False))
    inputs = done["input_tokens"].to_numpy().astype(float)
    outputs = done["output_tokens"].to_numpy().astype(float)
    ttft = done["ttft_s"].to_numpy().astype(float)
    decode = done["e2e_s"].to_numpy().astype(float) - ttft
    return _line(inputs, ttft), _line(np.maximum(outputs - 1, 0), decode)


def summarise(
    records: pl.DataFrame,
    users: int,
    end_s: float,
    first_s: tuple[float, float],
    decode_s: tuple[float, float],
) -> StepSummary:
    """One step's throughput, slowdown and requests in service (see the module).

    The window opens when half the first round has ended (the server holds this step's
    requests by then) and closes at the step's end. A request holds the server for its solo
    work x the slowdown before it ends (one still running, from its first token less its
    first-token work); requests in service is the sum of those spans inside the window over
    its length.
    """
    ordered = records.sort("sent_s")
    first_round_end = ordered.head(users)["end_s"].cast(pl.Float64)
    start = float(first_round_end.median() or ordered["sent_s"].min() or 0.0)  # type: ignore[arg-type]
    span = max(end_s - start, 1e-9)
    kept = ordered.slice(users)
    ended = kept.filter(pl.col("end_s").is_not_null() & (pl.col("end_s") >= start))
    # a request cancelled at the stage's end (censored) did not fail
    over = ordered.filter(pl.col("ok").is_not_null())
    if "error_class" in over.columns:
        over = over.filter(~pl.col("error_class").is_in(list(CENSORED_CLASSES)).fill_null(False))
    failed_share = float((~over["ok"]).mean()) if over.height else 0.0  # type: ignore[arg-type]

    def first_work(frame: pl.DataFrame) -> np.ndarray:
        return first_s[0] + first_s[1] * _floats(frame, "input_tokens")

    def decode_work(frame: pl.DataFrame) -> np.ndarray:
        return decode_s[0] + decode_s[1] * np.maximum(_floats(frame, "output_tokens") - 1, 0)

    done = ended.filter(pl.col("ok").fill_null(False))
    measured = _floats(done, "e2e_s") - _floats(done, "ttft_s")
    predicted = decode_work(done)
    slowdown = float(measured.sum() / predicted.sum()) if predicted.sum() > 0 else 1.0
    slowdown = max(slowdown, 1.0)
    solo = float((first_work(done) + predicted).sum())
    # every request of the step that held the server inside the window
    finished = ordered.filter(pl.col("ok").fill_null(False) & pl.col("end_s").is_not_null())
    work = first_work(finished) + decode_work(finished)
    ends = np.minimum(_floats(finished, "end_s"), end_s)
    begins = _floats(finished, "end_s") - slowdown * work
    # still running, or cancelled at the stage's end (censored): held until then
    running = ordered.filter(still_open(ordered) & pl.col("ttft_s").is_not_null())
    run_begins = (
        _floats(running, "sent_s") + _floats(running, "ttft_s") - slowdown * first_work(running)
    )
    begins = np.concatenate([begins, run_begins])
    ends = np.concatenate([ends, np.full(run_begins.size, end_s)])
    held = np.clip(ends, start, end_s) - np.clip(begins, start, end_s)
    in_service = float(held.sum()) / span
    return StepSummary(
        users=users,
        throughput_rps=done.height / span,
        slowdown=slowdown,
        in_service=in_service,
        failed_share=failed_share,
        peak=_peak(ordered, start, end_s),
        ttft_p50_s=float(np.median(_floats(done, "ttft_s"))) if done.height else 0.0,
        held_ratio=float(_floats(done, "e2e_s").sum()) / solo if solo > 0 else 1.0,
    )


def _peak(records: pl.DataFrame, start_s: float, end_s: float) -> int:
    """The most requests of the step streaming at once (first token came, not ended) inside
    the window: a slot server's slot count once its users outnumber the slots. Requests
    still prefilling are not seen, so the most, not a typical count."""
    first = _floats(records, "sent_s") + _floats(records, "ttft_s")
    ends = np.where(np.isnan(_floats(records, "end_s")), end_s, _floats(records, "end_s"))
    streaming = ~np.isnan(first) & (records["ok"].fill_null(True) | still_open(records)).to_numpy()
    grid = np.linspace(start_s, end_s, 400)
    counts = ((first[streaming, None] <= grid) & (grid < ends[streaming, None])).sum(axis=0)
    return int(counts.max()) if counts.size else 0


def still_open(records: pl.DataFrame) -> pl.Series:
    """Per record: still running, or cancelled at the stage's end (a censored error class)."""
    running = records["ok"].is_null()
    if "error_class" not in records.columns:
        return running
    return running | records["error_class"].is_in(list(CENSORED_CLASSES)).fill_null(False)


def _floats(frame: pl.DataFrame, name: str) -> np.ndarray:
    return frame[name].cast(pl.Float64).to_numpy().astype(float)


def build_model(summaries: list[StepSummary], first_s: tuple[float, float],
                decode_s: tuple[float, float]) -> ServerModel:  # fmt: skip
    """The model the steps describe: slots where the in-service count stopped following the
    users (else the most users tried), the slowdown of a request's whole work (see the
    module) interpolated between the steps."""
    saturated = [s for s in summaries if s.saturated]
    refuses = _refuses(summaries)
    # the first step whose users the server no longer all held; else the most users tried
    most = max(s.users for s in summaries)
    slots = max(1, saturated[0].peak or round(saturated[0].in_service)) if saturated else most
    points = sorted({min(s.users, slots): s.held_slowdown(slots) for s in summaries}.items())
    ks = np.array([k for k, _ in points], dtype=float)
    gs = np.array([g for _, g in points], dtype=float)
    if ks[0] > 1:
        ks, gs = np.concatenate([[1.0], ks]), np.concatenate([[1.0], gs])
    slowdown = np.interp(np.arange(1, slots + 1, dtype=float), ks, gs)
    slowdown = np.maximum.accumulate(np.maximum(slowdown, 1.0))
    return ServerModel(
        slots=slots,
        first_s=first_s,
        decode_s=decode_s,
        slowdown=tuple(float(g) for g in slowdown),
        refuses=refuses,
    )


QUEUED = 3.0  # first tokens this many times later than the step before: a queue formed


def _refuses(summaries: list[StepSummary]) -> bool:
    """Some step that no longer held all its users failed requests while those it served did
    not wait for a slot (their median first token less than QUEUED times the step before's;
    see the module)."""
    for before, step in zip([None, *summaries], summaries, strict=False):
        if step.failed_share <= 0 or not step.saturated:
            continue
        waited = before is not None and step.ttft_p50_s > QUEUED * before.ttft_p50_s > 0
        if not waited:
            return True
    return False


def next_users(summaries: list[StepSummary], max_users: int) -> int | None:
    """The next step's users (doubling), or None once the server saturated, refused, or
    `max_users` was reached."""
    last = summaries[-1]
    if last.saturated or last.users >= max_users:
        return None
    return min(max_users, 2 * last.users if last.users >= 1 else 1)


def step_requests(users: int) -> int:
    """Requests a step waits for after its first round: enough to average over every user."""
    return max(8, 2 * users)


Characterise = Callable[[list[StepSummary], tuple[float, float], tuple[float, float]], ServerModel]


# A closed-loop step is past the SLO by a margin when some target misses on at least this
# many times the share it allows, and on PAST_MISSES requests or more
PAST_MARGIN = 2.0
PAST_MISSES = 10


def past_slo(taken: Taken, users: int, config: FastConfig) -> bool:
    """The step (after its first round) missed some SLO target on PAST_MARGIN times the share
    the SLO allows or more (and at least 0.05 over it): more users only miss more."""
    records = _after_first_round(taken.records, users)
    if records.height == 0:
        return False
    misses = measured_misses(records, config.slo, now_s=taken.end_s)
    counts = misses.miss.sum(axis=0)
    for target, missed, count in zip(targets(config.slo), share(misses), counts, strict=True):
        bound = max(PAST_MARGIN * target.allowed, target.allowed + 0.05)
        if count >= PAST_MISSES and missed >= bound:
            return True
    return False


def characterised(
    config: FastConfig, characterise: Characterise, *, stop_past_slo: bool = False
) -> Generator[Step, Taken, tuple[Model, np.ndarray, np.ndarray, float, float]]:
    """Phase 1: closed-loop steps of 1, 2, 4, ... users until the server stops taking
    more (`stop_past_slo`: or a step is past the SLO by a margin, `past_slo`: the users'
    answer lies below it, and a server without a slot limit would otherwise be climbed to
    `max_users`). Returns the model, the measured request sizes, the horizon that sizes a
    step's requests (`_sized`) and the seconds it took."""
    started: float | None = None
    closed: list[tuple[int, Taken]] = []
    summaries: list[StepSummary] = []
    users: int | None = 1
    first_s = decode_s = (0.0, 0.0)
    while users is not None:
        taken = yield Closed(users, step_requests(users), min_s=config.step_s)
        started = taken.start_s if started is None else started
        closed.append((users, taken))
        if users == 1:
            first_s, decode_s = solo_costs(taken.records)
        summaries.append(summarise(taken.records, users, taken.end_s, first_s, decode_s))
        users = next_users(summaries, config.max_users)
        if stop_past_slo and past_slo(taken, closed[-1][0], config):
            users = None
    characterise_s = closed[-1][1].end_s - (started or 0.0)
    model = characterise(summaries, first_s, decode_s)
    # A request still running when its step ended is more likely a long one: sizes come
    # only from requests sent long enough before the end for any of them to have ended.
    horizon = 1.5 * max(float(t.records["e2e_s"].max() or 0.0) for _, t in closed)  # type: ignore[arg-type]
    pool = pl.concat([sized(t, horizon) for _, t in closed], how="diagonal_relaxed")
    inputs = floats(pool, "input_tokens")
    outputs = floats(pool, "output_tokens")
    return model, inputs, outputs, horizon, characterise_s


def sized(taken: Taken, horizon_s: float) -> pl.DataFrame:
    """A step's successful requests sent at least `horizon_s` before it was read."""
    records = taken.records.filter(pl.col("ok").fill_null(False))
    early = records.filter(pl.col("sent_s") <= taken.end_s - horizon_s)
    return early if early.height else records


def floats(frame: pl.DataFrame, name: str) -> np.ndarray:
    return frame[name].cast(pl.Float64).to_numpy().astype(float)
