"""Scraping a target's Prometheus /metrics: parse samples into server_metrics rows.

`parse_metrics` turns one scrape into rows (t_s, name, labels JSON, type, value).
`MetricsScraper` is a plain thread that scrapes every second into part files; `capplan
loadtest` runs it in its own process, next to (not inside) the load generator, so a scrape
never delays a scheduled send.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from contracts.rundir import metrics_writer

log = logging.getLogger("capplan.metrics")

MetricRow = tuple[float, str, str, str, float]


def parse_metrics(text: str, t_s: float) -> list[MetricRow]:
    """Rows of one scrape; raises ValueError on text that is not Prometheus exposition."""
    rows: list[MetricRow] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = json.dumps(sample.labels, sort_keys=True) if sample.labels else ""
            rows.append((t_s, sample.name, labels, family.type, float(sample.value)))
    return rows


def fetch_metrics(url: str, timeout_s: float = 2.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return str(resp.read().decode("utf-8", "replace"))


class MetricsScraper(threading.Thread):
    """Scrapes `host`/metrics every `interval_s` into `<run_dir>/server_metrics.parts/`.

    Stops scraping for good when the target has no metrics page (HTTP 404/405/501); keeps
    trying while the target is unreachable (it may come back). `clock()` gives run seconds.
    """

    def __init__(
        self, host: str, run_dir: Path, clock: Callable[[], float], interval_s: float = 1.0
    ) -> None:
        super().__init__(name="capplan-metrics", daemon=True)
        self._url = host.rstrip("/") + "/metrics"
        self._writer = metrics_writer(run_dir)
        self._clock = clock
        self._interval_s = interval_s
        self._stop_event = threading.Event()
        self.scrapes = 0

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)

    def run(self) -> None:
        while not self._stop_event.is_set():
            t_s = self._clock()
            try:
                rows = parse_metrics(fetch_metrics(self._url), t_s)
            except urllib.error.HTTPError as err:
                if err.code in (404, 405, 501):
                    log.warning("no Prometheus metrics at %s (HTTP %s)", self._url, err.code)
                    return
                rows = []
            except (OSError, ValueError):
                rows = []  # down for now, or a page that is not Prometheus text
            if rows:
                self._writer.write(rows)
                self.scrapes += 1
            self._stop_event.wait(max(0.0, self._interval_s - (self._clock() - t_s)))
