"""vLLM's metric names old and new: a fleet exporting today's names (vllm:kv_cache_usage_perc,
vllm:prefix_cache_queries / _hits) and one exporting the deprecated ones
(vllm:gpu_cache_usage_perc, vllm:gpu_prefix_cache_*) give the same profile, counted against
the generator's truth. Three hours of two instances in a real Prometheus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from profiles.model import Profile, load_profile
from profiles.prometheus.engines import ENGINES, resolve
from testkit.prom_fleet import PromServer, Truth, generate, served
from tests.helpers.prom_fixture import NEEDS_PROMETHEUS

OLD_NAMES: dict[str, str | None] = {
    "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
    "vllm:prefix_cache_queries": "vllm:gpu_prefix_cache_queries",
    "vllm:prefix_cache_hits": "vllm:gpu_prefix_cache_hits",
}


def test_each_role_takes_the_new_name_first_and_the_old_one_otherwise() -> None:
    base = {"vllm:request_success_total"} | {
        f"{n}_{s}"
        for n in ("vllm:request_prompt_tokens", "vllm:request_generation_tokens")
        for s in ("bucket", "sum", "count")
    }
    new = base | {
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
    }
    old = base | {
        "vllm:gpu_cache_usage_perc",
        "vllm:gpu_prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_hits_total",
    }
    got_new, got_old = resolve(ENGINES["vllm"], new), resolve(ENGINES["vllm"], old)
    assert got_new["kv_usage"] == "vllm:kv_cache_usage_perc"
    assert got_new["prefix_queries"] == "vllm:prefix_cache_queries_total"
    assert got_old["kv_usage"] == "vllm:gpu_cache_usage_perc"
    assert got_old["prefix_hits"] == "vllm:gpu_prefix_cache_hits_total"


@pytest.fixture(scope="module")
def fleets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Truth, Profile]]]:
    root = tmp_path_factory.mktemp("prom-names")
    out: dict[str, tuple[Truth, Profile]] = {}
    for name, rename in (("new", None), ("old", OLD_NAMES)):
        truth = generate(root / f"{name}.om", days=3 / 24, instances=2, rename=rename, job=name)
        with served(root / f"{name}.om", root / name) as server:
            out[name] = (truth, _profile(server, truth, name, root / f"{name}.json"))
    yield out


def _profile(server: PromServer, truth: Truth, job: str, path: Path) -> Profile:
    args = ["profile", f"prometheus:{server.url}", "--match", f'{{job="{job}"}}', "-q"]
    args += ["--since", str(truth.start_epoch_s), "--until", str(truth.end_epoch_s)]
    result = CliRunner().invoke(app, [*args, "-o", str(path)])
    assert result.exit_code == 0, result.output
    return load_profile(path)


@pytest.mark.parametrize("names", ["new", "old"])
@NEEDS_PROMETHEUS[1]
@NEEDS_PROMETHEUS[0]
def test_kv_usage_and_prefix_hits_read_under_either_name(
    fleets: dict[str, tuple[Truth, Profile]], names: str
) -> None:
    truth, profile = fleets[names]
    assert profile.source.metrics is not None
    kv_name = "vllm:kv_cache_usage_perc" if names == "new" else "vllm:gpu_cache_usage_perc"
    assert profile.source.metrics.metrics["kv_usage"] == kv_name
    assert profile.observed is not None and profile.observed.kv_usage is not None
    # The fleet's KV usage: the mean over instances at each point, then over the span.
    fleet_kv = np.mean([truth.kv_usage[i] for i in truth.instances], axis=0)
    assert profile.observed.kv_usage.mean == pytest.approx(float(fleet_kv.mean()), rel=0.01)
    assert profile.observed.kv_usage.max <= 1.0
    expected = truth.prefix_hits / truth.prefix_queries
    assert profile.prefix.reported_cached_token_ratio == pytest.approx(expected, rel=1e-9)
