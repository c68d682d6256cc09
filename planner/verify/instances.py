"""Per-instance evidence of a verify run: what each instance's Prometheus page says it carried.

`InstanceWatch` reads each instance's `/metrics` about once a second while the load runs
(a plain thread beside the load generator, like the run's own scraper) and keeps, per
instance, the series the roles below name. `instance_loads` turns them into `InstanceLoad`
rows and a `Spread`: requests finished during the test (a counter's increase) where the
engine counts them, else the mean requests in flight (running + waiting); the queue; KV-cache
usage and prefix-cache hits where exposed. It flags a serving instance that took more than
its share, one that took nothing (a load balancer that ejected it silently turned N into
N-1), and one taken out of the pool that still took traffic.

Names by engine, newest first: vLLM (`vllm:kv_cache_usage_perc`, and the deprecated
`vllm:gpu_cache_usage_perc`), SGLang, TGI and llama.cpp (`llamacpp:`), the first present used.
"""

from __future__ import annotations

import threading
import time
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from contracts.verify import InstanceLoad, Spread
from locustfiles.metrics import fetch_metrics, parse_metrics

SHARE_TOLERANCE = 0.25  # a share above (1 + this) / serving instances is flagged
IDLE_SHARE = 0.02  # a serving instance below this share of the fair share took nothing

# role -> candidate sample names (as the Prometheus parser names them: counters with _total)
ROLES: dict[str, tuple[str, ...]] = {
    "requests": (
        "vllm:request_success_total",
        "sglang:num_requests_total",
        "tgi_request_success_total",
        "tgi_request_success",
    ),
    "running": (
        "vllm:num_requests_running",
        "sglang:num_running_reqs",
        "tgi_batch_current_size",
        "llamacpp:requests_processing",
    ),
    "waiting": (
        "vllm:num_requests_waiting",
        "sglang:num_queue_reqs",
        "tgi_queue_size",
        "llamacpp:requests_deferred",
    ),
    "kv_usage": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    ),
    "prefix_queries": (
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
    ),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
ENGINE_PREFIXES = (
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("tgi_", "tgi"),
    ("llamacpp:", "llamacpp"),
)


@dataclass
class Series:
    """One instance's sampled values per role: (t_s, value) pairs, and the names it exposes."""

    values: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)

    def add(self, t_s: float, samples: Mapping[str, float]) -> None:
        self.names.update(samples)
        for role, names in ROLES.items():
            name = next((n for n in names if n in samples), None)
            if name is not None:
                self.values.setdefault(role, []).append((t_s, samples[name]))


def read_samples(url: str, timeout_s: float = 2.0) -> dict[str, float]:
    """name -> value summed over label sets, of `url`/metrics; {} when unreadable."""
    try:
        text = fetch_metrics(url.rstrip("/") + "/metrics", timeout_s)
        rows = parse_metrics(text, 0.0)
    except (OSError, ValueError, urllib.error.URLError):
        return {}
    out: dict[str, float] = {}
    for _, name, _, _, value in rows:
        out[name] = out.get(name, 0.0) + value
    return out


class InstanceWatch(threading.Thread):
    """Samples every instance's /metrics each `interval_s` until stopped."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        interval_s: float = 1.0,
        read: Callable[[str], dict[str, float]] = read_samples,
    ) -> None:
        super().__init__(name="capplan-verify-instances", daemon=True)
        self.urls = list(urls)
        self.series = {url: Series() for url in self.urls}
        self._read = read
        self._interval_s = interval_s
        self._stop_event = threading.Event()

    def sample(self) -> None:
        t_s = time.monotonic()
        for url in self.urls:
            samples = self._read(url)
            if samples:
                self.series[url].add(t_s, samples)

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self._interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)
        self.sample()  # the counters' last value, after the load ended


def _increase(points: list[tuple[float, float]]) -> float | None:
    """A counter's increase over the points (resets add their new value)."""
    if len(points) < 2:
        return None
    values = np.array([v for _, v in points])
    steps = np.diff(values)
    return float(np.where(steps < 0, values[1:], steps).sum())


def _mean(points: list[tuple[float, float]] | None) -> float | None:
    return float(np.mean([v for _, v in points])) if points else None


def _max(points: list[tuple[float, float]] | None) -> float | None:
    return float(np.max([v for _, v in points])) if points else None


def _engine(names: set[str]) -> str | None:
    return next((e for p, e in ENGINE_PREFIXES if any(n.startswith(p) for n in names)), None)


def _row(url: str, serving: bool, series: Series) -> InstanceLoad:
    v = series.values
    queries = _increase(v.get("prefix_queries", []))
    hits = _increase(v.get("prefix_hits", []))
    return InstanceLoad(
        url=url,
        serving=serving,
        source="metrics" if series.names else "none",
        engine=_engine(series.names),
        requests=_increase(v.get("requests", [])),
        running_mean=_mean(v.get("running")),
        waiting_mean=_mean(v.get("waiting")),
        waiting_max=_max(v.get("waiting")),
        kv_usage_mean=_mean(v.get("kv_usage")),
        kv_usage_max=_max(v.get("kv_usage")),
        prefix_hit_ratio=hits / queries if hits is not None and queries else None,
        flag="unread" if not series.names else "ok",
    )


def _load(row: InstanceLoad) -> tuple[str, float] | None:
    """(what is measured, how much) of one instance's load."""
    if row.requests is not None:
        return "finished requests", row.requests
    if row.running_mean is not None:
        return "mean requests in flight", row.running_mean + (row.waiting_mean or 0.0)
    return None


def instance_loads(
    series: Mapping[str, Series],
    down: Sequence[str],
    *,
    routed: Mapping[str, int] | None = None,
    tolerance: float = SHARE_TOLERANCE,
) -> tuple[list[InstanceLoad], Spread]:
    """Each instance's load and flags, and the spread over the serving ones.

    `down`: the instances taken out of the pool; `routed`: requests per instance counted by
    capplan's own router (exact: it replaces the metrics' request count)."""
    rows = [_row(url, url not in down, s) for url, s in series.items()]
    if routed is not None:
        rows = [
            r.model_copy(update={"requests": float(routed.get(r.url, 0)), "source": "router"})
            for r in rows
        ]
    if any(r.requests is not None for r in rows):
        # An engine creates a labelled counter at its first request: a readable instance
        # without it, beside others that have it, finished none.
        rows = [
            r.model_copy(update={"requests": 0.0})
            if r.requests is None and r.source == "metrics"
            else r
            for r in rows
        ]
    loads = {r.url: _load(r) for r in rows}
    measures = {m for m, _ in (x for x in loads.values() if x is not None)}
    measure = "finished requests" if "finished requests" in measures else next(iter(measures), None)
    total = sum(x for m, x in (y for y in loads.values() if y is not None) if m == measure)
    serving = sum(1 for r in rows if r.serving) or 1
    fair = 1.0 / serving
    out, flagged, top = [], [], None
    for r in rows:
        load = loads[r.url]
        if load is None or load[0] != measure or total <= 0:
            out.append(r)
            continue
        share = load[1] / total
        flag = r.flag
        if not r.serving and share > 0:
            flag = "not_down"
        elif r.serving and share > (1.0 + tolerance) * fair:
            flag = "over_share"
        elif r.serving and share < IDLE_SHARE * fair:
            flag = "idle"
        if r.serving:
            top = share if top is None else max(top, share)
        if flag != "ok":
            flagged.append(f"{r.url}: {flag} ({share:.0%} of the {measure})")
        out.append(r.model_copy(update={"share": share, "load_measure": measure, "flag": flag}))
    spread = Spread(
        measure=measure,
        max_over_fair=None if top is None else top * serving,
        tolerance=tolerance,
        flagged=flagged,
    )
    return out, spread
