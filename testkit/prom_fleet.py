"""A synthetic vLLM fleet's Prometheus metrics with a known truth, and a real Prometheus for them
(the tests' fixtures and bench/prometheus_speed.py).

`generate(...)` draws requests per scrape (15 s by default) for a few instances over days or a
quarter from a stated traffic pattern (diurnal rate, quieter weekends, weekly growth, lognormal
prompt and answer lengths, a fixed prefix-hit share, load-dependent TTFT) and writes them as
OpenMetrics text with vLLM's metric names (counters, histograms with `_bucket`/`_sum`/`_count`,
gauges), a family at a time so memory holds one instance's draws; the returned `Truth` holds
what was drawn, so a test checks capplan's profile against the generator, never against capplan.
`PromServer` backfills that file with `promtool tsdb create-blocks-from openmetrics` and runs
`prometheus` on it (retention long enough to keep the past blocks), polling /-/ready.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

STEP_S = 15
LEN_EDGES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
TTFT_EDGES_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
TPOT_EDGES_S = (0.01, 0.02, 0.04, 0.06, 0.1, 0.3)
E2E_EDGES_S = (1.0, 2.5, 5.0, 10.0, 20.0, 60.0)
INPUT_LOGNORMAL = (6.0, 0.8)  # ln-tokens mean and sigma: median e^6 = 403 tokens
OUTPUT_LOGNORMAL = (5.0, 0.6)  # median e^5 = 148 tokens
PREFIX_HIT_SHARE = 0.4
# The fixtures end here (2023-11-14 22:00 UTC): the same truth and figures on every run, and
# far enough in the past for any clock (backfilled blocks are kept by a ten-year retention).
END_EPOCH_S = 1_700_000_000 // 3600 * 3600


def RESTART_AT(n: int) -> int:  # noqa: N802  (a constant's rule, as a function of the span)
    """The step at which the second instance restarts: 37 steps into an hour, a third in."""
    return (n // 3) // 240 * 240 + 37


@dataclass
class Truth:
    """What the generator drew: per instance, requests per scrape step, every request's lengths."""

    start_epoch_s: int
    step_s: int
    instances: list[str]
    counts: dict[str, np.ndarray] = field(default_factory=dict)  # requests per step (ending at t)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    ttft_s: dict[str, np.ndarray] = field(default_factory=dict)
    prefix_queries: int = 0
    prefix_hits: int = 0
    restart_step: int | None = None  # the step at which the second instance's counters reset
    kv_usage: dict[str, np.ndarray] = field(default_factory=dict)  # KV used share per step

    @property
    def end_epoch_s(self) -> int:
        n = next(iter(self.counts.values())).size
        return self.start_epoch_s + n * self.step_s


def rate_rps(
    t_epoch: np.ndarray,
    base_rps: float,
    *,
    weekend: float = 1.0,
    weekly_growth: float = 0.0,
    start_epoch_s: float = 0.0,
) -> np.ndarray:
    """The rate: base x (1 + 0.6 sin) with its peak at 14:00 UTC, x `weekend` on Saturdays and
    Sundays (UTC), x (1 + weekly_growth) per week since `start_epoch_s` (exponential growth)."""
    hour = (t_epoch % 86400) / 3600.0
    rate = base_rps * (1.0 + 0.6 * np.sin(2 * np.pi * (hour - 8.0) / 24.0))
    weekday = (t_epoch // 86400 + 3) % 7  # 1970-01-01 was a Thursday: Monday is 0
    rate = np.where(weekday >= 5, rate * weekend, rate)
    weeks = (t_epoch - start_epoch_s) / (7 * 86400.0)
    return rate * (1.0 + weekly_growth) ** weeks


def _cumulative_buckets(
    values: np.ndarray, step_of: np.ndarray, edges: tuple, n: int
) -> np.ndarray:
    """Cumulative (over time and le) bucket counts, shape (steps, len(edges) + 1 for +Inf)."""
    b = np.searchsorted(np.asarray(edges, dtype=float), values, side="left")  # value <= le
    per = np.zeros((n, len(edges) + 1), dtype=np.int64)
    np.add.at(per, (step_of, b), 1)
    return np.cumsum(np.cumsum(per, axis=1), axis=0)


def _fmt(v: float) -> str:
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


class _Families:
    """OpenMetrics output a family at a time: each family's series go to their own temporary
    file as instances are drawn (memory holds one instance), joined under their TYPE lines at
    the end (OpenMetrics wants a family's series together)."""

    def __init__(self, path: Path, times: np.ndarray, slow_every: int) -> None:
        self.path, self.dir = path, path.parent / (path.name + ".parts")
        self.dir.mkdir(exist_ok=True)
        self.ts = [str(int(t)) for t in times]
        # Histograms and prefix counters every `slow_every` steps (their first and last
        # samples kept): the reader reads them at hour bounds only.
        keep = np.zeros(times.size, dtype=bool)
        keep[::slow_every] = True
        keep[-1] = True
        self.slow = np.flatnonzero(keep)
        self.slow_ts = [self.ts[i] for i in self.slow]
        self.files: dict[str, TextIO] = {}
        self.kinds: dict[str, str] = {}

    def series(self, family: str, kind: str, name: str, labels: str, values: np.ndarray,
               slow: bool) -> None:  # fmt: skip
        if family not in self.files:
            self.files[family] = (self.dir / f"{len(self.files)}.om").open("w")
            self.kinds[family] = kind
        ts = self.slow_ts if slow else self.ts
        vals = values[self.slow] if slow else values
        prefix = f"{name}{{{labels}}} "
        self.files[family].write(
            "".join(f"{prefix}{_fmt(v)} {t}\n" for v, t in zip(vals, ts, strict=True))
        )

    def close(self) -> None:
        with self.path.open("w") as out:
            for family, fh in self.files.items():
                fh.close()
                out.write(f"# TYPE {family} {self.kinds[family]}\n")
                part = Path(fh.name)
                with part.open() as text:
                    shutil.copyfileobj(text, out)
                part.unlink()
            out.write("# EOF\n")
        self.dir.rmdir()


def generate(
    path: Path,
    *,
    days: float = 2.0,
    instances: int = 2,
    base_rps: float = 2.0,
    seed: int = 7,
    end_epoch_s: int | None = None,
    rename: dict[str, str | None] | None = None,
    job: str = "vllm",
    step_s: int = STEP_S,
    weekend: float = 1.0,
    weekly_growth: float = 0.0,
    slow_every: int = 1,
    restart: bool = True,
    keep_requests: bool = True,
    families: set[str] | None = None,
) -> Truth:
    """Write the OpenMetrics file and return the truth it was drawn from.

    The span ends at `end_epoch_s` (default END_EPOCH_S) and starts `days` earlier; scrapes at
    every multiple of `step_s`; instance i's rate is rate_rps(base_rps x (1 + 0.25 i), weekend,
    weekly_growth). `rename` maps vLLM's metric families to another engine's (None leaves one
    out), `families` keeps only those vLLM families, `job` is the job label. With `restart` the
    second instance restarts (every counter back to 0) a third of the way through, in the
    middle of an hour (the hourly histogram reads must find it and read that hour again).
    Histograms and prefix counters are written every `slow_every` scrapes (a divisor of an
    hour's; no restart then: a restart between samples would lose counts). Without
    `keep_requests` the truth keeps the counts per step but not every request's lengths.
    """
    assert slow_every == 1 or not restart, "a restart between sparse samples loses counts"
    rng = np.random.default_rng(seed)
    end = end_epoch_s if end_epoch_s is not None else END_EPOCH_S
    n = int(days * 86400) // step_s
    start = end - n * step_s
    # The sample at start + (j + 1) step_s counts steps 0..j; the one at start is the counters' 0.
    times = start + step_s * np.arange(0, n + 1)
    names = [f"10.0.0.{i + 1}:8000" for i in range(instances)]
    truth = Truth(start_epoch_s=start, step_s=step_s, instances=names,
                  restart_step=RESTART_AT(n) if restart else None)  # fmt: skip
    out = _Families(path, times, slow_every)

    def add(family: str, name: str, labels: str, values: np.ndarray, restarts: bool) -> None:
        if families is not None and family not in families:
            return
        if rename is not None and family in rename:
            new = rename[family]
            if new is None:
                return
            family, name = new, new + name.removeprefix(family)
        if restarts:  # counters of a restarted process start again from 0
            values = values.copy()
            at = RESTART_AT(n)
            values[at:] -= values[at - 1]
        kind = (
            "gauge" if name == family
            else "counter" if name == family + "_total" else "histogram"
        )  # fmt: skip
        values = np.concatenate(([values[0] if kind == "gauge" else 0], values))
        slow = kind == "histogram" or "prefix_cache" in family
        out.series(family, kind, name, labels, values, slow and slow_every > 1)

    for i, inst in enumerate(names):
        lam = (
            rate_rps(times[1:] - step_s / 2, base_rps * (1 + 0.25 * i), weekend=weekend,
                     weekly_growth=weekly_growth, start_epoch_s=start)
            * step_s
        )  # fmt: skip
        counts = rng.poisson(lam)
        total = int(counts.sum())
        step_of = np.repeat(np.arange(n), counts)
        inp = np.maximum(1, rng.lognormal(*INPUT_LOGNORMAL, size=total).astype(np.int64))
        out_len = np.maximum(1, rng.lognormal(*OUTPUT_LOGNORMAL, size=total).astype(np.int64))
        load = (lam / step_s)[step_of] / (base_rps * 1.6)  # 0..1.x: TTFT grows with the load
        ttft = rng.lognormal(np.log(0.12 * (1 + 2 * load**3)), 0.5)
        tpot = rng.lognormal(np.log(0.03 * (1 + load)), 0.3)
        e2e = ttft + tpot * (out_len - 1)
        truth.counts[inst] = counts
        if keep_requests:
            truth.inputs[inst], truth.outputs[inst], truth.ttft_s[inst] = inp, out_len, ttft
        hits = np.round(inp * PREFIX_HIT_SHARE).astype(np.int64)
        truth.prefix_queries += int(inp.sum())
        truth.prefix_hits += int(hits.sum())
        lab = f'instance="{inst}",job="{job}",model_name="llama"'
        rs = restart and i == 1

        def per_step(v: np.ndarray, step_of: np.ndarray = step_of) -> np.ndarray:
            return np.cumsum(np.bincount(step_of, weights=v, minlength=n))

        add("vllm:request_success", "vllm:request_success_total",
            lab + ',finished_reason="stop"', np.cumsum(counts), rs)  # fmt: skip
        add("vllm:prompt_tokens", "vllm:prompt_tokens_total", lab, per_step(inp), rs)
        add("vllm:generation_tokens", "vllm:generation_tokens_total", lab, per_step(out_len), rs)
        add("vllm:prefix_cache_queries", "vllm:prefix_cache_queries_total", lab, per_step(inp), rs)
        add("vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total", lab, per_step(hits), rs)
        for fam, vals, edges in (
            ("vllm:request_prompt_tokens", inp, LEN_EDGES),
            ("vllm:request_generation_tokens", out_len, LEN_EDGES),
            ("vllm:time_to_first_token_seconds", ttft, TTFT_EDGES_S),
            ("vllm:time_per_output_token_seconds", tpot, TPOT_EDGES_S),
            ("vllm:e2e_request_latency_seconds", e2e, E2E_EDGES_S),
        ):
            if families is not None and fam not in families:
                continue
            cum = _cumulative_buckets(vals.astype(float), step_of, edges, n)
            for j, le in enumerate([*map(_fmt, edges), "+Inf"]):
                add(fam, fam + "_bucket", lab + f',le="{le}"', cum[:, j], rs)
            add(fam, fam + "_count", lab, cum[:, -1], rs)
            add(fam, fam + "_sum", lab, per_step(vals.astype(float)), rs)
        running = rng.poisson(lam / step_s * 3.0)
        add("vllm:num_requests_running", "vllm:num_requests_running", lab, running, False)
        add("vllm:num_requests_waiting", "vllm:num_requests_waiting", lab, running // 10, False)
        # KV usage follows the load smoothly (no noise): a gauge read once a minute averages it.
        kv = np.minimum(1.0, 0.2 + 0.5 * (lam / step_s) / (base_rps * 1.6))
        truth.kv_usage[inst] = kv
        add("vllm:kv_cache_usage_perc", "vllm:kv_cache_usage_perc", lab, kv, False)
    out.close()
    return truth


SGLANG_NAMES: dict[str, str | None] = {
    "vllm:request_success": "sglang:num_requests",
    "vllm:prompt_tokens": "sglang:prompt_tokens",
    "vllm:generation_tokens": "sglang:generation_tokens",
    "vllm:prefix_cache_queries": None,
    "vllm:prefix_cache_hits": None,
    "vllm:request_prompt_tokens": "sglang:prompt_tokens_histogram",
    "vllm:request_generation_tokens": "sglang:generation_tokens_histogram",
    "vllm:time_to_first_token_seconds": "sglang:time_to_first_token_seconds",
    "vllm:time_per_output_token_seconds": "sglang:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds": "sglang:e2e_request_latency_seconds",
    "vllm:num_requests_running": "sglang:num_running_reqs",
    "vllm:num_requests_waiting": "sglang:num_queue_reqs",
    "vllm:kv_cache_usage_perc": "sglang:token_usage",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(openmetrics: Path | None, workdir: Path, config: str = "") -> Iterator[PromServer]:
    """A Prometheus over the backfilled file (or scraping per `config`), stopped on the way out."""
    server = PromServer(openmetrics, workdir, config)
    try:
        yield server
    finally:
        server.stop()


class PromServer:
    """A real Prometheus over a backfilled TSDB (`openmetrics`) or scraping what `config` names;
    stop() ends only the process it started."""

    def __init__(
        self,
        openmetrics: Path | None,
        workdir: Path,
        config: str = "",
        backfill_timeout_s: float = 300,
    ) -> None:
        self.data = workdir / "tsdb"
        self.data.mkdir(parents=True, exist_ok=True)
        if openmetrics is not None:
            # Blocks of up to 31 days (a flag promtool hides): its default 2-hour blocks make
            # a quarter 1,080 blocks, and the backfill about ten times slower.
            subprocess.run(
                ["promtool", "tsdb", "create-blocks-from", "openmetrics",
                 "--max-block-duration=744h", str(openmetrics), str(self.data)],
                check=True, capture_output=True, timeout=backfill_timeout_s,
            )  # fmt: skip
        config_file = workdir / "prometheus.yml"
        config_file.write_text(config or "global:\n  scrape_interval: 15s\nscrape_configs: []\n")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (workdir / "prometheus.log").open("w")
        # Backfilled blocks are in the past: a retention shorter than their age would delete
        # them at start-up, so keep ten years.
        self.proc = subprocess.Popen(
            ["prometheus", f"--storage.tsdb.path={self.data}",
             f"--web.listen-address=127.0.0.1:{self.port}", f"--config.file={config_file}",
             "--storage.tsdb.retention.time=10y"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self._wait_ready(deadline_s=60)

    def query(self, promql: str) -> list[dict]:  # type: ignore[type-arg]
        """An instant query's result vector."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)["data"]["result"]  # type: ignore[no-any-return]

    def _wait_ready(self, deadline_s: float) -> None:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)  # polling the condition, not waiting for it to happen
        raise RuntimeError("prometheus was not ready within the deadline")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
