"""Traffic synthesis for virtual time: a profile's requests at a planned rate, as engine requests.

Arrivals (`arrival_kind`):
- `gamma`: a renewal process with gamma inter-arrival times at the planned rate and the
  profile's inter-arrival CV (shape 1/CV^2), so the short-scale burstiness of the trace comes
  along; the hour-scale swing is what the planning peak already takes. A `BurstWindow` raises
  the rate inside one window (a time warp of the same process).
- `poisson`: exponential inter-arrival times (CV 1), for comparison.
The gaps come from `locustfiles.arrivals.gamma_times`, the load test's own generator (here
the free renewal process, not conditioned on its count).
Request shapes come from the load test's own `profiles.workload.WorkloadStream` (the profile's
length pairs, shared system prompts, sessions), with prefix-cache block hashes for shared
content, so the simulated fleet sees the traffic the limit was measured with.
`Traffic` holds one draw's arrival times and shapes only the requests asked for (the fleet
check's shortcut replays a few instances' share, `planner.fleet.sample`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import polars as pl

from contracts.errors import ConfigError
from locustfiles.arrivals import gamma_times
from planner.engine import EngineRequest
from profiles.model import Profile
from profiles.workload import MessageShape, RequestShape, WorkloadStream

ArrivalKind = Literal["gamma", "poisson"]


@dataclass(frozen=True, kw_only=True)
class BurstWindow:
    """A window of the span where the arrival rate is `factor` x the base rate."""

    start_s: float
    duration_s: float
    factor: float


def arrival_times_s(
    rate_rps: float,
    cv: float,
    duration_s: float,
    rng: np.random.Generator,
    burst: BurstWindow | None = None,
) -> np.ndarray:
    """Arrival times in [0, duration_s) of a gamma renewal process with mean rate and CV.

    With `burst`, the process is time-warped so the rate is `burst.factor` x `rate_rps`
    inside the window (the gaps keep their CV in operational time).
    Raises ConfigError for a non-positive rate, CV or duration.
    """
    if burst is not None:
        b0 = min(max(burst.start_s, 0.0), duration_s)
        b1 = min(b0 + burst.duration_s, duration_s)
        knots_t = np.array([0.0, b0, b1, duration_s])
        knots_u = np.cumsum([0.0, b0, (b1 - b0) * burst.factor, duration_s - b1])
        # Operational time runs `factor` times faster inside the window.
        operational = arrival_times_s(rate_rps, cv, float(knots_u[-1]), rng)
        return np.interp(operational, knots_u, knots_t)
    if not (rate_rps > 0 and cv > 0 and duration_s > 0):
        raise ConfigError(
            f"arrivals need a positive rate, CV and duration (got {rate_rps}, {cv}, {duration_s})"
        )
    return gamma_times(rate_rps, 1.0 / cv**2, duration_s, rng, exact_count=False)


def arrival_cv(profile: Profile, arrival_kind: ArrivalKind) -> float:
    """The inter-arrival CV the simulation uses: the profile's for gamma, 1 for poisson."""
    return (profile.arrivals.interarrival_cv or 1.0) if arrival_kind == "gamma" else 1.0


def shape_block_hashes(
    messages: Sequence[MessageShape], block_tokens: int, prompt_tokens: int
) -> tuple[int, ...]:
    """Chained hashes of a request shape's full prompt blocks, without any text.

    A block's content is the run of (message text key, token offsets) it covers, so two
    requests whose prompts start with the same messages (a shared system prompt, the earlier
    turns of a session) share their leading block hashes, as their token ids would.
    """
    hashes: list[int] = []
    wanted = prompt_tokens // block_tokens
    prev = 0
    block: list[tuple[int, int, int, int]] = []
    fill = 0
    for message in messages:
        kind, ident = message.text_key
        offset = 0
        while offset < message.tokens and len(hashes) < wanted:
            take = min(block_tokens - fill, message.tokens - offset)
            block.append((kind, ident, offset, offset + take))
            fill += take
            offset += take
            if fill == block_tokens:
                prev = hash((prev, tuple(block)))
                hashes.append(prev)
                block, fill = [], 0
    return tuple(hashes)


def shape_request(
    shape: RequestShape,
    request_id: str,
    arrival_s: float,
    max_model_len: int,
    block_tokens: int,
) -> EngineRequest:
    """One workload shape as an engine request arriving at `arrival_s`.

    Lengths are clipped to `max_model_len` (prompt first kept, output shortened); shared
    content (a shared system prompt or a session) gets its prefix-cache block hashes.
    """
    prompt = max(1, min(shape.input_tokens, max_model_len - 1))
    output = max(1, min(shape.output_tokens, max_model_len - prompt))
    shared = shape.prefix_index is not None or shape.session_id is not None
    hashes = shape_block_hashes(shape.messages, block_tokens, prompt) if shared else ()
    session = None if shape.session_id is None else str(shape.session_id)
    return EngineRequest(request_id, prompt, output, arrival_s, hashes, session_id=session)


def check_sampler(profile: Profile) -> None:
    """Raise ConfigError when the profile has no (input, output) pairs to draw lengths from."""
    if not profile.lengths.sampler.pairs:
        raise ConfigError("the profile has no (input, output) sample pairs to draw lengths from")


@dataclass(kw_only=True)
class Traffic:
    """One seeded draw of a check's traffic: all arrival times, shapes made as needed.

    `all_requests` is exactly `profile_requests` for the same draw
    (built once, when a point is simulated in full); `sub_requests` shapes only the arrivals
    a sub-fleet replays.
    """

    profile: Profile
    arrival_s: np.ndarray
    stream_seed: int
    max_model_len: int
    block_tokens: int
    _all: list[EngineRequest] | None = field(default=None, repr=False)

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_all": None}  # workers rebuild the full list if they need it

    @property
    def has_sessions(self) -> bool:
        sessions = self.profile.sessions
        return bool(sessions.available and sessions.count > 0)

    @property
    def has_shared_prompts(self) -> bool:
        """Whether any request may carry prefix-cache block hashes: a shared system prompt
        of the profile's, or a session's earlier turns (`shape_request` hashes only those)."""
        prefix = self.profile.prefix
        return self.has_sessions or bool(prefix.available and prefix.top_prefixes)

    def _requests(self, numbers: np.ndarray) -> list[EngineRequest]:
        stream = WorkloadStream(self.profile, seed=self.stream_seed)
        times = self.arrival_s[numbers].tolist()
        return [
            shape_request(next(stream), str(k), t, self.max_model_len, self.block_tokens)
            for k, t in zip(numbers.tolist(), times, strict=True)
        ]

    def all_requests(self) -> list[EngineRequest]:
        if self._all is None:
            self._all = self._requests(np.arange(len(self.arrival_s)))
        return self._all

    def sub_requests(self, numbers: np.ndarray) -> list[EngineRequest]:
        """The requests of arrival `numbers` (sorted) for a sub-fleet (`planner.fleet.sample`)."""
        if self.has_sessions:
            every = self.all_requests()
            return [every[k] for k in numbers.tolist()]
        return self._requests(numbers)

    def request_maker(self) -> Callable[[int, float], EngineRequest]:
        """Requests made as arrivals are routed to a sub-fleet, in arrival order
        (`planner.fleet.rest`): arrival `number` at `arrival_s`, the stream's next shape
        (as `sub_requests` gives them), or with sessions the full draw's request."""
        if self.has_sessions:
            every = self.all_requests()
            return lambda number, arrival_s: every[number]
        stream = WorkloadStream(self.profile, seed=self.stream_seed)
        cap, block = self.max_model_len, self.block_tokens

        def make(number: int, arrival_s: float) -> EngineRequest:
            return shape_request(next(stream), str(number), arrival_s, cap, block)

        return make


def profile_requests(
    profile: Profile,
    rate_rps: float,
    duration_s: float,
    rng: np.random.Generator,
    max_model_len: int,
    arrival_kind: ArrivalKind = "gamma",
    burst: BurstWindow | None = None,
    block_tokens: int = 16,
) -> list[EngineRequest]:
    """Requests at `rate_rps` for `duration_s`, shaped as the load test shapes them.

    Shapes come from `profiles.workload.WorkloadStream` (the load test's own stream): lengths
    from the profile's sample pairs, its shared system prompts with their request shares, and
    its multi-turn sessions (`shape_request`). `burst` raises the rate inside one window
    (`arrival_times_s`). Raises ConfigError when the profile has no sample pairs or an unknown
    arrival kind.
    """
    return draw_traffic(
        profile, rate_rps, duration_s, rng, max_model_len, arrival_kind, burst, block_tokens
    ).all_requests()


def draw_traffic(
    profile: Profile,
    rate_rps: float,
    duration_s: float,
    rng: np.random.Generator,
    max_model_len: int,
    arrival_kind: ArrivalKind = "gamma",
    burst: BurstWindow | None = None,
    block_tokens: int = 16,
) -> Traffic:
    """`profile_requests`'s draw with the shapes left for later (`Traffic`); same errors."""
    check_sampler(profile)
    if arrival_kind not in ("gamma", "poisson"):
        raise ConfigError(f"unknown arrival kind {arrival_kind!r}; known: gamma, poisson")
    times = arrival_times_s(rate_rps, arrival_cv(profile, arrival_kind), duration_s, rng, burst)
    return Traffic(
        profile=profile,
        arrival_s=times,
        stream_seed=int(rng.integers(2**31)),
        max_model_len=max_model_len,
        block_tokens=block_tokens,
    )


def trace_requests(
    frame: pl.DataFrame,
    source_block_tokens: int,
    block_tokens: int,
    max_model_len: int,
    speed: float = 1.0,
) -> list[EngineRequest]:
    """A log's own requests (the canonical request table) as engine requests, in its order.

    Arrivals are the log's, `speed` times faster; lengths are clipped as `shape_request`
    clips them. The log's block hashes (of `source_block_tokens` tokens: 512 for Mooncake)
    become the engine's blocks of `block_tokens`: engine block k lies in source block
    k * block_tokens // source_block_tokens, and its hash chains the one before with (that
    source hash, its place in it), so two prompts share an engine block exactly when they
    share every source block up to it. A `session_id` column goes with the requests.
    Raises ConfigError when the source blocks are no whole number of engine blocks or the
    speed is not positive.
    """
    if source_block_tokens % block_tokens or speed <= 0:
        raise ConfigError(
            f"a trace's {source_block_tokens}-token blocks must split into the engine's "
            f"{block_tokens}-token blocks, at a positive speed (got {speed})"
        )
    per = source_block_tokens // block_tokens
    has_hashes = "block_hashes" in frame.columns
    sessions = frame["session_id"].to_list() if "session_id" in frame.columns else None
    out: list[EngineRequest] = []
    for k, row in enumerate(frame.iter_rows(named=True)):
        prompt = max(1, min(int(row["input_tokens"] or 1), max_model_len - 1))
        output = max(1, min(int(row["output_tokens"] or 1), max_model_len - prompt))
        source = (row["block_hashes"] or ()) if has_hashes else ()
        hashes: list[int] = []
        prev = 0
        for j in range(min(prompt // block_tokens, len(source) * per)):
            prev = hash((prev, source[j // per], j % per))
            hashes.append(prev)
        session = sessions[k] if sessions is not None else None
        out.append(
            EngineRequest(
                str(k),
                prompt,
                output,
                float(row["arrival_s"]) / speed,
                tuple(hashes),
                session_id=None if session is None else str(session),
            )
        )
    return out
