"""The Prometheus source with SGLang's metric names: detected from the series, counted against
the generator's truth, and the control (vLLM's names asked of an SGLang fleet) fails with the
names it expected. Three hours of one instance: promtool backfills it in about a second."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from profiles.model import load_profile
from testkit.prom_fleet import (
    SGLANG_NAMES,
    PromServer,
    Truth,
    generate,
    served,
)
from tests.helpers.prom_fixture import NEEDS_PROMETHEUS

pytestmark = NEEDS_PROMETHEUS


@pytest.fixture(scope="module")
def sglang(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PromServer, Truth, Path]]:
    root = tmp_path_factory.mktemp("prom-sglang")
    truth = generate(
        root / "sglang.om", days=3 / 24, instances=1, rename=SGLANG_NAMES, job="sglang"
    )
    with served(root / "sglang.om", root) as server:
        yield server, truth, root


def _run(server: PromServer, truth: Truth, out: Path, *extra: str) -> tuple[int, str]:
    args = ["profile", f"prometheus:{server.url}", "--match", '{job="sglang"}', "-q"]
    args += ["--since", str(truth.start_epoch_s), "--until", str(truth.end_epoch_s)]
    result = CliRunner().invoke(app, [*args, *extra, "-o", str(out)])
    return result.exit_code, result.output


def test_sglang_names_are_detected_and_counted(sglang: tuple[PromServer, Truth, Path]) -> None:
    server, truth, root = sglang
    code, output = _run(server, truth, root / "p.json")
    assert code == 0, output
    p = load_profile(root / "p.json")
    assert p.source.metrics is not None and p.source.metrics.engine == "sglang"
    assert p.source.metrics.metrics["tpot"] == "sglang:inter_token_latency_seconds"
    inputs = np.concatenate(list(truth.inputs.values()))
    assert p.requests == sum(int(c.sum()) for c in truth.counts.values())
    assert p.lengths.input.mean == pytest.approx(inputs.mean(), rel=1e-9)
    # SGLang has no prefix-cache counters here (and no hit-rate gauge): said, not invented.
    assert p.prefix.reported_cached_token_ratio is None
    assert any("prefix-cache hits" in lim.unknown for lim in p.source.limitations)


def test_the_wrong_engine_names_what_it_expected(sglang: tuple[PromServer, Truth, Path]) -> None:
    server, truth, root = sglang
    code, output = _run(server, truth, root / "bad.json", "--metric-names", "vllm")
    assert code == 2
    assert "vllm:request_success_total" in output and "Traceback" not in output
