"""The fast search on the concurrency dimension: characterise, then the characterised model's
own closed loop answers how many users the server holds within the SLO.

A concurrency level holds `users` clients that each send the next request as soon as the
last one ends (locustfiles/driver.py, no think time), so its load is set by the server
itself: users beyond the slots wait first come first served, and every wait is as long as
the answers ahead of it. The closed-loop steps that characterise the server (1, 2, 4, ...
users until it stops taking more, or until a step is past the SLO by a margin) are the
measured search's first levels already; the
model then runs the closed loop for every user count (`serve_closed`, common random
numbers: the same request sizes in the same order) and the answer is the most users whose
miss shares stay within what the SLO allows (`closed_limit`). There is no confirmation
phase of its own: the measured levels around the answer (`whole_users_bracket`: about 0.9
and 1.1 of it in whole users, at least one user each side) confirm it, and the measured
search goes on from there where they do not hold it.

A refused request (HTTP 429) returns at once and its user sends again; the model's user
waits `retry_s` (the refusals' own round trip in the steps, else 10 ms) so that a refusing
model's loop advances.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import numpy as np
import polars as pl

from planner.limit.fast.characterise import Characterise, build_model, characterised, past_slo
from planner.limit.fast.engine_model import counted_as_asked
from planner.limit.fast.misses import model_misses, targets, unsupported
from planner.limit.fast.model import Served, ServerModel, run_slots
from planner.limit.fast.steps import Asked, Closed, FastConfig, FastResult, Step, Taken

RETRY_S = 0.01  # a refused request's round trip when the steps showed none
CLOSED_REQUESTS = 20_000  # requests a user count's closed loop sends


def serve_closed(
    model: ServerModel,
    users: int,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    *,
    retry_s: float = RETRY_S,
) -> tuple[np.ndarray, Served]:
    """`users` closed-loop clients on the model (planner.limit.fast.model `run_slots`):
    each request's send time and what the model did with it, in send order."""
    return run_slots(model, input_tokens, output_tokens, users=users, retry_s=retry_s)


def closed_shares(
    model: ServerModel,
    users: int,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    config: FastConfig,
    *,
    retry_s: float = RETRY_S,
) -> np.ndarray:
    """Per SLO target, the model's miss share at `users` after its warm-up (the first tenth
    of the requests, and at least five rounds of every user)."""
    _, served = serve_closed(model, users, input_tokens, output_tokens, retry_s=retry_s)
    warm = max(input_tokens.size // 10, 5 * users)
    keep = np.arange(input_tokens.size) >= warm
    misses = model_misses(served, config.slo)
    miss, known = misses.miss[keep], misses.known[keep]
    counted = np.maximum(known.sum(axis=0), 1)
    return np.asarray(miss.sum(axis=0) / counted, dtype=float)


def closed_limit(
    model: ServerModel,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    config: FastConfig,
    *,
    retry_s: float = RETRY_S,
) -> int:
    """The most users whose closed loop meets the SLO by the model (0: not even one): up by
    doubling to the first count that misses, then bisected (the shares grow with the users:
    each one more waits behind one more answer)."""
    allowed = np.array([t.allowed for t in targets(config.slo)])
    rng = np.random.default_rng([config.seed, 41])
    pick = rng.integers(0, input_tokens.size, CLOSED_REQUESTS)
    inputs, outputs = input_tokens[pick], output_tokens[pick]

    def holds(users: int) -> bool:
        shares = closed_shares(model, users, inputs, outputs, config, retry_s=retry_s)
        return bool(np.all(shares <= allowed))

    if not holds(1):
        return 0
    low, high = 1, 2
    while high <= config.max_users * 4 and holds(high):
        low, high = high, 2 * high
    if high > config.max_users * 4:
        return low
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if holds(mid) else (low, mid)
    return low


def refusal_round_trip(records: list[pl.DataFrame]) -> float:
    """The median time a refused request took in the steps (RETRY_S when none was)."""
    frames = [
        r.filter(pl.col("error_class") == "refused").select(pl.col("end_s") - pl.col("sent_s"))
        for r in records
        if "error_class" in r.columns
    ]
    took = pl.concat(frames).to_series() if frames else pl.Series([], dtype=pl.Float64)
    took = took.drop_nulls()
    return max(float(took.median()), 1e-3) if took.len() else RETRY_S  # type: ignore[arg-type]


def fast_concurrency(
    config: FastConfig,
    *,
    characterise: Characterise = build_model,
    asked: Asked | None = None,
    note: Callable[[str], None] = lambda _: None,
) -> Generator[Step, Taken, FastResult]:
    """The fast search on users (see the module) as a generator of closed-loop steps; its
    FastResult holds users where the rate search's holds req/s."""
    why = unsupported(config.slo)
    if why is not None:
        return FastResult(
            model=None, predicted=None, limit=None, low=None, high=None, confirmations=(),
            stopped=f"unsupported: {why}", adequate=False, characterise_s=0, confirm_s=0,
        )  # fmt: skip
    steps: list[pl.DataFrame] = []  # each step's records: the refusals' round trip
    gen = characterised(config, characterise, stop_past_slo=True)
    last: tuple[int, Taken] | None = None
    try:
        step = next(gen)
        while True:
            taken = yield step
            steps.append(taken.records)
            last = (step.users, taken) if isinstance(step, Closed) else last
            step = gen.send(taken)
    except StopIteration as stop:
        model, inputs, outputs, _, characterise_s = stop.value
    assert isinstance(model, ServerModel)
    first = pl.DataFrame({"input_tokens": inputs, "output_tokens": outputs})
    profile_sizes = asked is not None and counted_as_asked(
        asked, first, alpha=0.01, answers_below=0.75
    )
    if profile_sizes and asked is not None:
        inputs, outputs = asked.input_tokens, asked.output_tokens
    retry_s = refusal_round_trip(steps) if model.refuses else RETRY_S
    users = closed_limit(model, inputs, outputs, config, retry_s=retry_s)
    if last is not None and past_slo(last[1], last[0], config) and users >= last[0]:
        # Measured past the SLO at that many users: the model cannot hold more. A server
        # without a slot limit, characterised up to the step past the SLO, looks to the model
        # like one whose slots are the users it tried, and users beyond them only wait: at
        # tpot:p95<=25ms on ITL 10 ms x (1 + N / 20) it answered 1024 users (truth 30).
        note(f"the model's {users} users capped below the {last[0]} measured past the SLO")
        users = last[0] - 1
    sizes = "the profile's" if profile_sizes else f"{inputs.size} measured"
    note(f"model: {model.describe()} ({sizes} sizes); its closed loop meets the SLO up to "
         f"{users} users")  # fmt: skip
    adequate = users >= 1
    stopped = "the model's closed loop" if adequate else "model: even 1 user misses the SLO"
    return FastResult(
        model=model,
        predicted=float(users),
        limit=float(users) if adequate else None,
        low=None,
        high=None,
        confirmations=(),
        stopped=stopped,
        adequate=adequate,
        characterise_s=characterise_s,
        confirm_s=0.0,
        sizes="profile" if profile_sizes else "measured",
    )


def whole_users_bracket(answer: float, tolerance: float) -> tuple[int, int]:
    """The measured levels around a concurrency answer of N users, as the rate's 0.9 L and
    1.1 L: N - k must hold with certainty and N + k must fail, k = max(1, round(2 x
    tolerance x N)) (10 % at the default 5 %, at least one user each side; at 1 user, 1
    must hold). A bracket of one user (N holds, N + 1 fails) cost far more than it told: on
    a server whose decode slows with its streams, 29 and 30 users were still being measured
    after 15 minutes (issue 60), and a plan rounds instances up anyway."""
    users = max(1, round(answer))
    step = max(1, round(2 * tolerance * users))
    return max(1, users - step), users + step
