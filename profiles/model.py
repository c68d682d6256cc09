"""The Profile model: the typed form of profile JSON (`"schema": "capplan.profile/1"`).

Written by `capplan profile`, read by the load test, the planner and the report. Key paths
named in the profile issue are a public contract; every count and rate carries its unit in
its name. Prompt text never appears here: only lengths, shares and hashes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contracts.jsonio import read_json, validate, write_model

PROFILE_SCHEMA = "capplan.profile/1"
WINDOWS = ("1s", "10s", "60s")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Bound(_Model):
    """Where the exact value of an estimated statistic lies: a merged profile's whole-log
    value, or a sampled one's (a chunked read past the exact prefix budget)."""

    low: float
    high: float
    method: str


class Chunked(_Model):
    """How a log too large to hold was profiled chunk by chunk (streaming, bounded memory)."""

    chunks: int = Field(ge=1, description="chunks of rows read, one after another")
    chunk_rows: int = Field(ge=1, description="rows per chunk (the last one may hold fewer)")
    estimated: dict[str, str] = Field(
        default_factory=dict,
        description="key path -> how it differs from the in-memory profile's (the rest equal it)",
    )
    bounds: dict[str, Bound] = Field(
        default_factory=dict,
        description="key path -> interval holding the exact value, where a statistic is sampled",
    )


class Limitation(_Model):
    """Something the source cannot tell, and what the profile assumes instead."""

    unknown: str = Field(description="what the source cannot tell")
    assumption: str = Field(description="what the profile assumes in its place")


class MetricsSource(_Model):
    """Where a profile read from a metrics store (Prometheus) came from."""

    url: str = Field(description="the server, without credentials")
    match: str = Field(description='the label selector, e.g. {job="vllm"}')
    engine: str = Field(description="engine whose metric names were read (vllm, sglang, ...)")
    metrics: dict[str, str] = Field(description="role -> metric name read")
    start: str = Field(description="ISO-8601 of the first step")
    end: str = Field(description="ISO-8601 of the end of the last step")
    step_s: float = Field(gt=0, description="query resolution; no rate is finer than this")
    instances: list[str] = Field(description="values of the instance label")
    queries: int = Field(ge=0, description="HTTP queries sent (range queries come in chunks)")


class Source(_Model):
    files: list[str]
    format: str = Field(description="reader kind, or 'preset' for a profile built from a preset")
    rows: int = Field(ge=0, description="rows kept")
    rows_skipped: int = Field(ge=0, description="rows skipped (see skip_reasons)")
    skip_reasons: dict[str, int] = Field(default_factory=dict, description="reason -> count")
    skip_examples: list[str] = Field(default_factory=list, description="first few 'file:line: why'")
    tokens_estimated: bool = Field(description="token counts came from a tokenizer, not usage")
    tokenizer: str | None = None
    warnings: list[str] = Field(default_factory=list)
    first_timestamp: str | None = Field(default=None, description="ISO-8601 of the first request")
    digest: str = Field(
        default="", description="sha256 of the inputs (files' bytes or preset spec)"
    )
    preset: str | None = None
    read_in_chunks: Chunked | None = Field(
        default=None, description="set when the log was profiled in chunks (large logs)"
    )
    derivation: str | None = Field(
        default=None, description="for a preset: where its shape comes from and what was adjusted"
    )
    metrics: MetricsSource | None = Field(
        default=None, description="set when the profile was read from Prometheus metrics"
    )
    limitations: list[Limitation] = Field(
        default_factory=list,
        description="what the source cannot tell and the assumption used instead (metrics; a "
        "table of lengths sent at --rate-rps)",
    )


class GammaShape(_Model):
    moments: float | None = Field(default=None, description="1 / CV^2 of inter-arrival times")
    mle: float | None = Field(default=None, description="maximum-likelihood gamma shape")
    positive_gaps: int = Field(
        default=0, ge=0, description="positive gaps the MLE used (its sufficient statistics)"
    )
    mean_positive_gap_s: float | None = None
    mean_log_positive_gap: float | None = Field(default=None, description="mean of ln(gap / s)")


class Burst(_Model):
    start_s: float
    duration_s: float
    peak_rate_rps: float


class RateSeries(_Model):
    bin_s: float = Field(gt=0)
    rates_rps: list[float]


class ClockHours(_Model):
    """Per UTC clock hour of a log that spans a day or more: the peak rate of the hour."""

    first_hour_epoch_s: float = Field(description="UTC epoch of the top of the first clock hour")
    window_s: float = Field(default=60.0, description="window of the peak rate (clock-aligned)")
    peak_rps: list[float] = Field(
        description="per clock hour from the first: the highest rate over its windows"
    )
    covered_s: list[float] = Field(description="per clock hour: seconds inside the log's span")


class Arrivals(_Model):
    duration_s: float = Field(ge=0)
    mean_rate_rps: float = Field(ge=0)
    interarrival_cv: float | None
    gamma_shape: GammaShape
    peak_rate_rps: dict[str, float] = Field(description='keyed by window: "1s", "10s", "60s"')
    peak_to_mean: dict[str, float]
    fano: dict[str, float] = Field(description="variance / mean of per-window counts")
    window_rate_percentiles: dict[str, list[float]] = Field(
        default_factory=dict,
        description="per window, the 0th..100th percentiles (101 values) of window rates in req/s",
    )
    hour_of_day: list[float] | None = Field(
        default=None, description="24 mean rates (req/s), hour 0..23"
    )
    weekday: list[float] | None = Field(
        default=None, description="7 mean rates (req/s), Monday first"
    )
    clock_hours: ClockHours | None = Field(
        default=None,
        description="peak rate per clock hour, where the log has wall-clock times and spans a "
        "day or more (capacity by hour of day, weekly growth)",
    )
    bursts: list[Burst] = Field(default_factory=list)
    burst_window_s: float = Field(default=10.0, description="window length bursts are detected on")
    burst_rule: str = Field(default="", description="what counts as a burst")
    rate_series: RateSeries


class Histogram(_Model):
    edges: list[float] = Field(description="bin edges (log-spaced), len(counts) + 1")
    counts: list[int]


class QuantileSketch(_Model):
    """A mergeable log-bucket quantile sketch (DDSketch's mapping) of non-negative integers.

    Value v >= 1 falls in bucket ceil(ln v / ln gamma), gamma = (1 + a) / (1 - a); a bucket
    reads back as 2 gamma^k / (gamma + 1), within a relative error a of every value in it.
    Sketches with the same `relative_accuracy` merge by adding counts.
    """

    relative_accuracy: float = Field(gt=0, lt=1)
    zero_count: int = Field(ge=0, description="values equal to 0")
    key_offset: int = Field(description="bucket key of counts[0]")
    counts: list[int]


class LengthStats(_Model):
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    min: float = 0.0
    histogram: Histogram
    sketch: QuantileSketch | None = Field(
        default=None, description="for merging profiles: percentiles within a stated error"
    )
    bucket_edges: list[float] | None = Field(
        default=None,
        description="set when the lengths come from histogram buckets (metrics): the upper "
        "edges; percentiles are interpolated linearly inside a bucket, min and max are edges",
    )


class LengthClasses(_Model):
    basis: str = Field(description="what is classed, e.g. 'input_tokens'")
    short_max_tokens: int
    long_min_tokens: int
    shares: dict[str, float] = Field(description="short, medium, long -> share of requests")


class Sampler(_Model):
    kind: Literal["reservoir", "independent-binned"] = Field(
        default="reservoir",
        description="reservoir: real pairs; independent-binned: input and output drawn apart "
        "from histogram buckets (metrics have no joint distribution)",
    )
    seed: int
    why: str = ""
    pairs: list[tuple[int, int]] = Field(description="(input_tokens, output_tokens) pairs")


class Lengths(_Model):
    input: LengthStats
    output: LengthStats
    classes: LengthClasses
    io_rank_correlation: float | None = Field(description="Spearman rank correlation")
    sampler: Sampler
    requests: int = Field(
        default=0, ge=0, description="requests these lengths describe (the ok ones)"
    )


class LruPoint(_Model):
    cache_tokens: int
    hit_ratio: float


class SharedPrefix(_Model):
    prefix_tokens: int = Field(description="length of the shared prefix in tokens")
    request_share: float = Field(description="share of requests that start with it")
    token_share: float = Field(description="share of all prompt tokens inside this prefix")


class Prefix(_Model):
    available: bool = Field(description="false when the log has neither hashes nor prompt text")
    block_tokens: int
    ideal_hit_ratio: float | None = None
    lru_hit_ratio: list[LruPoint] = Field(default_factory=list)
    top_prefixes: list[SharedPrefix] = Field(default_factory=list)
    top_prefixes_request_share: float | None = None
    top_prefixes_token_share: float | None = None
    reported_cached_token_ratio: float | None = Field(
        default=None,
        description="sum(usage cached_tokens) / sum(prompt_tokens), where the log has it",
    )
    hashes_from: str | None = Field(
        default=None, description="'hash_ids' (log's own block ids), 'prompt text', or 'preset'"
    )
    requests: int = Field(default=0, ge=0, description="requests whose prompt blocks were hashed")
    hashed_tokens: int = Field(default=0, ge=0, description="prompt tokens the hashes cover")


class Quantiles(_Model):
    mean: float
    p50: float
    p90: float
    p99: float
    max: float


class Sessions(_Model):
    available: bool
    count: int = 0
    turns: Quantiles | None = None
    think_time_s: Quantiles | None = None
    context_growth_tokens: Quantiles | None = Field(
        default=None, description="input-token growth from one turn to the next"
    )
    multi_turn_request_share: float | None = None
    sample_share: float = Field(
        default=1.0,
        description="share of sessions measured (a hash sample on very large logs; 1 = all)",
    )


class LatencyStats(_Model):
    """A latency the server observed: from its histogram (metrics sources), or exact over the
    requests' own values (traces; then `bucket_edges_s` is empty)."""

    requests: int = Field(ge=0, description="observations in the histogram over the span")
    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p95_s: float | None
    p99_s: float | None
    bucket_edges_s: list[float] = Field(description="upper edges; percentiles interpolate inside")


class Gauge(_Model):
    """A gauge over every step of the span (metrics sources)."""

    mean: float
    p50: float
    p99: float
    max: float


class ObservedWindows(_Model):
    """One instance's load and observed latency percentiles per window (metrics sources)."""

    window_s: float = Field(gt=0, description="window length (from the span's start)")
    start_epoch_s: float
    rate_rps: list[float] = Field(description="per window: requests / window length")
    latency_s: dict[str, dict[str, list[float | None]]] = Field(
        description="ttft, tpot, e2e -> p50, p90, p95, p99 -> per window (None: no requests)"
    )


class Observed(_Model):
    """What the serving engine itself reported (metrics sources, traces): latencies, queue,
    batch."""

    latency: dict[str, LatencyStats] = Field(
        default_factory=dict,
        description="ttft, tpot, e2e (and queue, from traces) -> the server's histogram, or "
        "the requests' own values (traces)",
    )
    windows: ObservedWindows | None = Field(
        default=None, description="per instance: load and latency percentiles per window"
    )
    running: Gauge | None = None
    waiting: Gauge | None = None
    kv_usage: Gauge | None = Field(
        default=None,
        description="KV cache used share, 0-1 (vllm:kv_cache_usage_perc, or the deprecated "
        "vllm:gpu_cache_usage_perc; sglang:token_usage)",
    )


class ProfileBody(_Model):
    """Statistics of one set of requests (the whole source or one group)."""

    arrivals: Arrivals
    lengths: Lengths
    prefix: Prefix
    sessions: Sessions
    ok_share: float | None = Field(default=None, description="share of requests the log marks ok")
    requests: int = Field(default=0, ge=0, description="requests these statistics describe")
    observed: Observed | None = Field(
        default=None,
        description="server-reported latencies and queue (metrics sources; latencies from traces)",
    )


class MergeInfo(_Model):
    """How a profile was merged from partial profiles of file shards."""

    shards: list[str] = Field(description="the partial profiles, in timeline order")
    timeline: str = Field(description="how the shards' arrival timelines were joined")
    exact: list[str] = Field(description="statistics equal to the whole log's (to float rounding)")
    bounds: dict[str, Bound] = Field(
        default_factory=dict, description="key path -> interval holding the whole-log value"
    )
    estimated: dict[str, str] = Field(
        default_factory=dict, description="key path -> how it was estimated (no proven bound)"
    )


class Profile(ProfileBody):
    """A whole profile: source, statistics, and the same statistics per group."""

    schema_: str = Field(default=PROFILE_SCHEMA, alias="schema")
    name: str = ""
    created_at: str = ""
    capplan_version: str = ""
    source: Source
    group_by: str | None = None
    groups: dict[str, ProfileBody] = Field(default_factory=dict)
    merge: MergeInfo | None = Field(
        default=None, description="set when merged from partial profiles (capplan profile --merge)"
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)

    def digest(self) -> str:
        """sha256 of the profile's JSON: the profile's one identity. Every file made from a
        profile (run, limit, plan, what-if, verify, review) records this digest, and every
        command that pairs a file with a profile compares it. `source.digest` (the log's
        bytes) is provenance only: two profiles of one log with other options share it."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()


def load_profile(path: str | Path) -> Profile:
    """Read profile JSON; raises InputError naming the file and the first bad field."""
    p = Path(path)
    return validate(Profile, read_json(p, "profile"), p, PROFILE_SCHEMA)


def save_profile(profile: Profile, path: str | Path) -> None:
    """Write profile JSON atomically, creating the parent folder."""
    write_model(Path(path), profile, "profile")
