"""What the engine model takes and gives: requests, token events, step results, gauges, timelines.

Plain values shared by the scheduler (`planner.engine.engine`), the emulator and the fleet
simulator; token counts only, never text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from contracts.errors import InputError

TokenKind = Literal["first_token", "token", "finished", "preempted"]


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """One request as the engine sees it: token counts only, never text.

    `block_hashes` are the chained hashes of the prompt's full blocks of `block_tokens`
    tokens (profiles.tokenize.chained_block_hashes), used by the prefix cache.
    `kv_ready_tokens` models prefill/decode disaggregation (see the field). `session_id`
    is for the fleet's router only (session affinity); the engine never reads it.
    """

    request_id: str
    prompt_tokens: int
    max_tokens: int
    arrival_s: float
    block_hashes: tuple[int, ...] = ()
    min_tokens: int = 0
    # Prompt tokens whose KV arrives with the request, computed elsewhere (the prefill pool
    # of a disaggregated fleet): taken as computed at first admission, recomputed after a
    # preemption. At most prompt_tokens - 1 count: the last is computed to sample the first.
    kv_ready_tokens: int = 0
    session_id: str | None = None


def check_request(request: EngineRequest, max_model_len: int) -> None:
    """Raise InputError for non-positive lengths, min_tokens > max_tokens, or prompt +
    max_tokens beyond `max_model_len`."""
    rid = request.request_id
    if request.prompt_tokens < 1 or request.max_tokens < 1:
        raise InputError(
            f"request {rid!r}: prompt_tokens and max_tokens must be >= 1 "
            f"(got {request.prompt_tokens}, {request.max_tokens})"
        )
    if request.min_tokens > request.max_tokens:
        raise InputError(
            f"request {rid!r}: min_tokens ({request.min_tokens}) > max_tokens "
            f"({request.max_tokens})"
        )
    total = request.prompt_tokens + request.max_tokens
    if total > max_model_len:
        raise InputError(
            f"request {rid!r}: prompt ({request.prompt_tokens}) + max_tokens "
            f"({request.max_tokens}) = {total} tokens exceeds the engine's maximum "
            f"model length of {max_model_len} tokens"
        )


class TokenEvent(NamedTuple):
    """Something that happened to a request at the end of a step (`n_tokens` new tokens)."""

    request_id: str
    kind: TokenKind
    time_s: float
    n_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StepResult:
    """One scheduler step: when it ran and what it produced."""

    start_s: float
    duration_s: float
    end_s: float
    events: tuple[TokenEvent, ...]
    prefill_tokens: int = 0
    decode_tokens: int = 0
    batch_size: int = 0


@dataclass(frozen=True, slots=True)
class EngineGauges:
    """The engine's state now, as vLLM exports it on /metrics (kv_usage_perc is a 0-1 fraction)."""

    running: int
    waiting: int
    kv_usage_perc: float
    kv_used_blocks: int
    kv_total_blocks: int
    prefix_cache_queries_tokens: int
    prefix_cache_hits_tokens: int
    num_preemptions: int
    finished: int
    prompt_tokens_total: int
    generation_tokens_total: int


@dataclass(slots=True, kw_only=True)
class RequestTimeline:
    """What happened to one request, in engine seconds.

    `token_times_s` holds every output token's time when the engine records them
    (EngineConfig.record_token_times); `last_token_s` and `output_tokens` are always kept, so
    TTFT, E2E and TPOT are exact either way. `cached_tokens` are the prompt tokens the prefix
    cache served at first admission. `frontend_s` is the time the request spent in the
    engine's front end (API server: HTTP, tokenisation, queueing for it) before the scheduler
    saw it; TTFT and E2E include it, as they are measured from arrival.
    """

    request_id: str
    arrival_s: float
    prompt_tokens: int
    scheduled_s: float | None = None
    first_token_s: float | None = None
    last_token_s: float | None = None
    token_times_s: list[float] = field(default_factory=list)
    finished_s: float | None = None
    preemptions: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    aborted: bool = False
    frontend_s: float = 0.0

    @property
    def queued_s(self) -> float | None:
        """Arrival to first admission."""
        return None if self.scheduled_s is None else self.scheduled_s - self.arrival_s

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float | None:
        return None if self.last_token_s is None else self.last_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        """(last token - first token) / (output_tokens - 1), for more than one token."""
        if self.output_tokens < 2 or self.first_token_s is None or self.last_token_s is None:
            return None
        return (self.last_token_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def itl_s(self) -> list[float]:
        """Gaps between consecutive tokens (empty when token times were not recorded)."""
        t = self.token_times_s
        return [b - a for a, b in zip(t, t[1:], strict=False)]
