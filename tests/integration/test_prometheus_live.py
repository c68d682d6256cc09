"""A real Prometheus scraping the emulator every second while requests of known lengths run,
then `capplan profile prometheus:...` on what it scraped: the request count and the mean
lengths are exact, percentiles lie in the bucket of the true ones, and the server's TTFT
histogram counts every request."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import openai
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from planner.emulator import running_emulator
from planner.emulator.metrics import LENGTH_BUCKETS_TOKENS
from planner.engine import build_engine_config
from profiles.tokenize import synthetic_text
from testkit.prom_fleet import served
from tests.helpers.prom_fixture import NEEDS_PROMETHEUS

pytestmark = NEEDS_PROMETHEUS

MODEL = "llama-3.1-8b"
REQUESTS = 24


def _poll(condition: Callable[[], bool], deadline_s: float) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)  # polling the condition with a deadline
    return False


def test_a_live_scrape_of_the_emulator(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    inputs = rng.integers(20, 3000, REQUESTS)
    outputs = rng.integers(2, 300, REQUESTS)
    config = build_engine_config("H100-80GB", MODEL)
    with running_emulator(config, speed=20.0, seed=3) as url:
        scrape = (
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: emu\n"
            f"    static_configs:\n      - targets: ['{url.removeprefix('http://')}']\n"
        )
        with served(None, tmp_path, scrape) as prom:
            assert _poll(lambda: bool(prom.query('up{job="emu"} == 1')), 30), "no scrape"
            since = int(time.time())
            client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
            for n_in, n_out in zip(inputs, outputs, strict=True):
                client.completions.create(
                    model=MODEL,
                    prompt=synthetic_text(int(n_in), rng),
                    max_tokens=int(n_out),
                    extra_body={"ignore_eos": True},
                )

            def all_scraped() -> bool:
                got = prom.query('sum(vllm:request_success_total{job="emu"})')
                return bool(got) and float(got[0]["value"][1]) == REQUESTS

            assert _poll(all_scraped, 30), "Prometheus never saw every request"
            until = int(time.time()) + 1
            out = tmp_path / "live.json"
            result = CliRunner().invoke(
                app,
                ["profile", f"prometheus:{prom.url}", "--match", '{job="emu"}', "--step", "1s",
                 "--since", str(since), "--until", str(until), "-o", str(out), "-q"],
            )  # fmt: skip
    assert result.exit_code == 0, result.output
    p = json.loads(out.read_text())
    # The counters first appear inside the range (the first request creates them): from 0.
    assert p["requests"] == REQUESTS
    assert p["lengths"]["input"]["mean"] == pytest.approx(inputs.mean(), rel=1e-9)
    assert p["lengths"]["output"]["mean"] == pytest.approx(outputs.mean(), rel=1e-9)
    edges = (0.0, *LENGTH_BUCKETS_TOKENS)
    for key, values in (("input", inputs), ("output", outputs)):
        true = float(np.percentile(values, 50))
        i = int(np.searchsorted(edges, true, side="left"))
        assert edges[i - 1] <= p["lengths"][key]["p50"] <= edges[i], (key, true)
    assert p["observed"]["latency"]["ttft"]["requests"] == REQUESTS
    assert p["source"]["metrics"]["engine"] == "vllm"
