"""A Profile from a serving fleet's Prometheus metrics: `build_prometheus_profile(PromSource)`.

The fleet's profile (every instance summed) with one group per `instance` label. Everything
metrics cannot tell is listed in `source.limitations` with the assumption used instead; the
CLI prints them. Raises InputError (exit 2) for a bad source, time range or selector, an
unreachable server, a refused query, a match with no series, or missing engine metrics.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from contracts import __version__
from contracts.duration import duration_s
from contracts.errors import InputError
from profiles.model import (
    Limitation,
    MetricsSource,
    Observed,
    Prefix,
    Profile,
    ProfileBody,
    Sessions,
    Source,
)
from profiles.prometheus.client import MAX_POINTS, Grid, PromClient, auth_header
from profiles.prometheus.engines import detect_engine, engine_by_kind, resolve
from profiles.prometheus.read import (
    SHARE_GAUGES,
    WINDOW_S,
    HistogramTotals,
    InstanceMetrics,
    read_metrics,
)
from profiles.prometheus.stats import (
    arrivals_from_steps,
    gauge_stats,
    latency_from_buckets,
    lengths_from_buckets,
    observed_windows,
)

SCHEME = "prometheus:"
_PROM_UNITS = ("s", "m", "h", "d", "w")


@dataclass(frozen=True, kw_only=True)
class PromSource:
    """What to read: `url` (after 'prometheus:'), a label selector, a time range and step."""

    url: str
    match: str = ""
    since: str = "7d"
    until: str | None = None
    step: str = "15s"
    engine: str = "auto"
    token_env: str | None = None
    basic_auth_env: str | None = None
    chunk_steps: int = MAX_POINTS  # steps per range query (Prometheus allows 11,000)


def is_prometheus(text: str) -> bool:
    return text.startswith(SCHEME)


def parse_duration_s(text: str, what: str) -> float:
    seconds = duration_s(text, _PROM_UNITS)
    if seconds is None:
        raise InputError(f"{what}: {text!r} is not a duration (e.g. 15s, 5m, 12h, 7d, 13w)")
    return seconds


def parse_time_s(text: str, now_s: float, what: str) -> float:
    """'now', a duration before now (7d), an ISO-8601 time or epoch seconds -> epoch seconds."""
    t = text.strip()
    if t == "now":
        return now_s
    if duration_s(t, _PROM_UNITS) is not None:
        return now_s - parse_duration_s(t, what)
    try:
        return float(t)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError as err:
        raise InputError(
            f"{what}: {text!r} is not a time (now, 7d ago as '7d', ISO-8601 or epoch seconds)"
        ) from err
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def selector_of(match: str) -> str:
    """The `{...}` label selector (empty for none); InputError for anything else."""
    m = match.strip()
    if not m:
        return ""
    if not (m.startswith("{") and m.endswith("}")):
        raise InputError(f"--match {match!r}: expected a label selector like '{{job=\"vllm\"}}'")
    return m


def grid_of(src: PromSource, now_s: float) -> Grid:
    """The query grid: from `since` (down to a whole minute) to `until`, a point per step."""
    step = parse_duration_s(src.step, "--step")
    if step < 1 or 60 % step != 0:
        raise InputError(f"--step {src.step}: must divide a minute (1s .. 60s, e.g. 15s)")
    end = parse_time_s(src.until or "now", now_s, "--until")
    start_text = src.since
    start = (
        end - parse_duration_s(start_text, "--since")
        if duration_s(start_text, _PROM_UNITS) is not None
        else parse_time_s(start_text, now_s, "--since")
    )
    start = math.floor(start / 60.0) * 60.0
    steps = int((end - start) // step)
    if steps < 1:
        raise InputError(f"the range {src.since} .. {src.until or 'now'} holds no whole step")
    if not 1 <= src.chunk_steps <= MAX_POINTS:
        raise InputError(f"chunk_steps must be 1 .. {MAX_POINTS} (got {src.chunk_steps})")
    return Grid(start_s=start, step_s=step, points=steps + 1, chunk_points=src.chunk_steps)


def build_prometheus_profile(
    src: PromSource, *, seed: int = 0, now_s: float | None = None
) -> Profile:
    """The fleet's profile from its engines' metrics, one group per instance."""
    now = time.time() if now_s is None else now_s
    grid = grid_of(src, now)
    selector = selector_of(src.match)
    client = PromClient(src.url, auth_header(src.token_env, src.basic_auth_env))
    end_s = grid.start_s + (grid.points - 1) * grid.step_s
    names = client.metric_names(selector or '{__name__=~".+"}', grid.start_s, end_s)
    if not names:
        raise InputError(
            f"no series match {src.match or '(any)'} at {src.url} between "
            f"{_iso(grid.start_s)} and {_iso(end_s)}; check --match and --since/--until"
        )
    engine = detect_engine(names) if src.engine == "auto" else engine_by_kind(src.engine)
    roles = resolve(engine, names)
    per = read_metrics(client, roles, selector, grid)
    if not per or sum(float(m.requests.sum()) for m in per.values()) <= 0:
        raise InputError(
            f"{roles['requests']}{selector}: no requests counted between {_iso(grid.start_s)} "
            f"and {_iso(end_s)}"
        )
    step_s = int(grid.step_s)
    fleet = _fleet(per)
    groups = {k: _body(m, step_s, grid.start_s, seed, windows=True) for k, m in sorted(per.items())}
    body = _body(fleet, step_s, grid.start_s, seed, windows=False)
    spec = f"{src.url}|{selector}|{grid.start_s}|{end_s}|{step_s}|{engine.kind}"
    digest = hashlib.sha256(spec.encode() + fleet.requests.tobytes()).hexdigest()
    source = Source(
        files=[SCHEME + src.url],
        format="prometheus",
        rows=body.requests,
        rows_skipped=0,
        tokens_estimated=False,
        first_timestamp=_iso(grid.start_s),
        digest=digest,
        metrics=MetricsSource(
            url=src.url,
            match=selector,
            engine=engine.kind,
            metrics=roles,
            start=_iso(grid.start_s),
            end=_iso(end_s),
            step_s=float(step_s),
            instances=sorted(per),
            queries=client.queries,
        ),
        limitations=limitations(roles, step_s, body),
    )
    return Profile(
        **body.model_dump(),
        name="prometheus",
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        capplan_version=__version__,
        source=source,
        group_by="instance",
        groups=groups,
    )


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat(timespec="seconds")


def _fleet(per: dict[str, InstanceMetrics]) -> InstanceMetrics:
    """Every instance summed: requests per step, histogram totals, gauges, prefix counters."""
    ms = list(per.values())
    fleet = InstanceMetrics(requests=np.sum([m.requests for m in ms], axis=0))
    reporting: dict[str, np.ndarray] = {}  # per gauge: instances with a value at each point
    for m in ms:
        for role, h in m.histograms.items():
            fleet.histograms.setdefault(role, HistogramTotals()).add(h)
        for role, g in m.gauges.items():
            acc = fleet.gauges.setdefault(role, np.zeros_like(g))
            acc += np.nan_to_num(g)
            seen = reporting.setdefault(role, np.zeros_like(g))
            seen += ~np.isnan(g)
        fleet.prefix_queries += m.prefix_queries
        fleet.prefix_hits += m.prefix_hits
        fleet.prefix_hit_rate.extend(m.prefix_hit_rate)
    for role in SHARE_GAUGES:
        if role in fleet.gauges:  # a share: the mean over the instances reporting it
            fleet.gauges[role] = fleet.gauges[role] / np.maximum(reporting[role], 1)
    return fleet


def _body(
    m: InstanceMetrics, step_s: int, start_s: float, seed: int, *, windows: bool
) -> ProfileBody:
    """One set of statistics; `windows` adds latency against load per hour (an instance's)."""
    h_in = m.histograms.get("input_tokens", HistogramTotals())
    h_out = m.histograms.get("output_tokens", HistogramTotals())
    if not h_in.buckets or not h_out.buckets:
        raise InputError("the token-length histograms returned no buckets for this match")
    lengths = lengths_from_buckets(*h_in.arrays(), h_in.sum, *h_out.arrays(), h_out.sum, seed)
    ratio = None
    if m.prefix_queries > 0:
        ratio = m.prefix_hits / m.prefix_queries
    elif m.prefix_hit_rate:
        ratio = float(np.mean(m.prefix_hit_rate))
    latency = {
        role: latency_from_buckets(*h.arrays(), h.sum)
        for role in ("ttft", "tpot", "e2e")
        if (h := m.histograms.get(role)) is not None and h.buckets
    }
    per_window = {
        role: h.window_arrays()
        for role in ("ttft", "tpot", "e2e")
        if (h := m.histograms.get(role)) is not None and h.windows
    }
    observed = Observed(
        latency=latency,
        windows=observed_windows(m.requests, step_s, start_s, WINDOW_S, per_window)
        if windows and per_window
        else None,
        running=gauge_stats(m.gauges["running"]) if "running" in m.gauges else None,
        waiting=gauge_stats(m.gauges["waiting"]) if "waiting" in m.gauges else None,
        kv_usage=gauge_stats(m.gauges["kv_usage"]) if "kv_usage" in m.gauges else None,
    )
    return ProfileBody(
        arrivals=arrivals_from_steps(m.requests, step_s, start_s),
        lengths=lengths,
        prefix=Prefix(available=False, block_tokens=16, reported_cached_token_ratio=ratio),
        sessions=Sessions(available=False),
        ok_share=None,
        requests=int(round(float(m.requests.sum()))),
        observed=observed,
    )


def limitations(roles: dict[str, str], step_s: int, body: ProfileBody) -> list[Limitation]:
    """What these metrics cannot tell, and the assumption the profile uses instead."""
    e2e = body.observed.latency.get("e2e") if body.observed else None
    lag = f" (mean {e2e.mean_s:.1f} s)" if e2e is not None and e2e.mean_s is not None else ""
    out = [
        Limitation(
            unknown="the joint distribution of input and output lengths",
            assumption="independent: the sampler draws them apart (io_rank_correlation unset)",
        ),
        Limitation(
            unknown="exact token lengths (only histogram bucket counts)",
            assumption="linear inside a bucket: percentiles are good to the bucket's width "
            "(lengths.*.bucket_edges); min and max are bucket edges",
        ),
        Limitation(
            unknown=f"arrivals within a {step_s} s step (burstiness below the step)",
            assumption=f"Poisson inside a step: windows shorter than {step_s} s read the step's "
            "rate (their peaks are lower bounds), Fano 1, inter-arrival CV unset (Poisson); "
            "bursts are not detected",
        ),
        Limitation(
            unknown="arrival times (the request counter counts completions)",
            assumption=f"a request arrives in the step it completes; rates lag by the E2E "
            f"latency{lag}",
        ),
        Limitation(
            unknown="sessions and prompt prefixes (no request ids, no prompt hashes)",
            assumption="no sessions; prefix reuse only as the servers' reported hit ratio "
            "(no LRU curve, no top prefixes)",
        ),
    ]
    for role in ("ttft", "tpot", "e2e"):
        if role not in roles:
            out.append(
                Limitation(
                    unknown=f"observed {role.upper()} (no such histogram for this engine/match)",
                    assumption="not reported",
                )
            )
    if "prefix_queries" not in roles and "prefix_hit_rate" not in roles:
        out.append(Limitation(unknown="prefix-cache hits (no counters)", assumption="not reported"))
    elif "prefix_queries" not in roles:
        out.append(
            Limitation(
                unknown="prefix-cache hit counts (only a hit-rate gauge)",
                assumption="the gauge's mean over the span, not weighted by traffic",
            )
        )
    return out
