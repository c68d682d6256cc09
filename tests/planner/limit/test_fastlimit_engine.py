"""The fast search with a known engine model (planner.limit.fast.engine_model): the grid
root against an M/M/c queue solved by Erlang's formula, the offsets one user measures, and
`capplan limit --calibration`'s errors. The live path runs in tests/integration/test_demo.py
(the demo's emulator is the engine model of its own configuration)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from planner.engine import build_engine_config
from planner.limit.fast import misses
from planner.limit.fast.engine_model import EngineModel, measured_offset
from planner.limit.fast.misses import MissCurve
from planner.limit.fast.model import Offset, ServerModel
from planner.limit.fast.steps import Taken
from planner.slo.spec import parse_slo


def _erlang_c(servers: int, load: float) -> float:
    """P(wait > 0) in M/M/c with offered load `load` (arrival rate x mean service)."""
    term = sum(load**k / math.factorial(k) for k in range(servers))
    top = load**servers / math.factorial(servers) * servers / (servers - load)
    return top / (term + top)


def _mmc_limit(servers: int, mean_s: float, wait_s: float, allowed: float) -> float:
    """The arrival rate at which P(wait > wait_s) = allowed: P = C e^{-(c mu - lambda) t}."""
    low, high = 0.01, servers / mean_s * 0.9999
    for _ in range(200):
        rate = (low + high) / 2
        p = _erlang_c(servers, rate * mean_s) * math.exp(-(servers / mean_s - rate) * wait_s)
        low, high = (rate, high) if p <= allowed else (low, rate)
    return low


@dataclass(frozen=True)
class _Gridded(ServerModel):
    """A slot model whose curve roots run on the engine model's grid."""

    @property
    def grid_step(self) -> float | None:
        return 0.02


def test_the_grid_root_lands_on_an_mmc_queue_solved_by_erlangs_formula(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exponential service (decode cost linear in an exponential answer length), no first
    token cost: TTFT is the wait, whose tail Erlang's C formula gives. The grid's root,
    interpolated between rates 2 % apart, lands within 0.5 % of bisection on the same curve
    (the grid rate below it is 1.7 % off here) and within the curve's own noise of the
    formula. Run two rates at a time in two processes (thirds), it is the same root."""
    servers, mean_s = 4, 0.5
    rng = np.random.default_rng(3)
    outputs = 1.0 + rng.exponential(mean_s / 0.01, 50_000)
    inputs = np.zeros(outputs.size)
    slo = parse_slo("ttft:p95<=0.3s")
    truth = _mmc_limit(servers, mean_s, 0.3, 0.05)
    roots = {}
    for name, cls, pairs in (("bisection", ServerModel, False), ("grid", _Gridded, False),
                             ("grid in pairs", _Gridded, True)):  # fmt: skip
        monkeypatch.setattr(misses, "_side_by_side", lambda pairs=pairs: pairs)
        model = cls(servers, (0.0, 0.0), (0.0, 0.01), (1.0,) * servers)
        curve = MissCurve(model=model, input_tokens=inputs, output_tokens=outputs, slo=slo,
                          requests=60_000, seed=2)  # fmt: skip
        roots[name] = curve.root(np.zeros(1))
        if name == "grid":
            evaluated = len(curve._cache)
    assert roots["grid"] == pytest.approx(roots["bisection"], rel=0.005)
    assert roots["grid"] == pytest.approx(truth, rel=0.02)
    assert evaluated <= 10  # bisection to 0.3 % takes about as many; offsets then reuse them
    assert roots["grid in pairs"] == roots["grid"]


def test_one_users_requests_measure_what_the_client_adds_to_the_engine() -> None:
    """A server whose every first token comes 40 ms and every end 70 ms after the engine
    model's, for the same requests sent one at a time: the offsets are found, and the
    offset model adds them (TPOT by the difference over the answer's gaps)."""
    engine = EngineModel(build_engine_config("H100-80GB", "llama-3.1-8b"))
    rng = np.random.default_rng(0)
    inputs = rng.integers(100, 2000, 12).astype(float)
    outputs = rng.integers(20, 300, 12).astype(float)
    alone = engine.serve(np.arange(12) * 1e5, inputs, outputs)
    sent = np.cumsum(alone.e2e_s + 0.07) - alone.e2e_s[0]  # one user: the next after the end

    def taken(ttft_extra: float, e2e_extra: float) -> Taken:
        records = pl.DataFrame({
            "sent_s": sent, "ttft_s": alone.ttft_s + ttft_extra, "e2e_s": alone.e2e_s + e2e_extra,
            "ok": [True] * 12, "input_tokens": inputs, "output_tokens": outputs,
        })  # fmt: skip
        return Taken(records=records, start_s=0.0, end_s=float(sent[-1] + 100))

    found = measured_offset(engine, taken(0.04, 0.07))
    assert isinstance(found, Offset)
    assert (found.ttft_s, found.e2e_s) == pytest.approx((0.04, 0.07), abs=1e-9)
    served = found.serve(np.array([0.0]), inputs[:1], outputs[:1])
    assert served.ttft_s[0] == pytest.approx(alone.ttft_s[0] + 0.04)
    assert served.tpot_s[0] == pytest.approx(alone.tpot_s[0] + 0.03 / (outputs[0] - 1))
    nothing = measured_offset(engine, taken(0.0, 0.0))
    assert isinstance(nothing, Offset)
    assert (nothing.ttft_s, nothing.e2e_s) == pytest.approx((0.0, 0.0), abs=1e-9)


def test_the_engine_models_capacity_is_its_throughput_when_always_busy() -> None:
    """The capacity the root's bracket rests on: above it the engine's queue grows without
    end (the last of 3,000 requests sent at 1.3x waits far longer than at 0.7x)."""
    engine = EngineModel(build_engine_config("H100-80GB", "llama-3.1-8b"))
    rng = np.random.default_rng(1)
    inputs = rng.integers(200, 1500, 3000).astype(float)
    outputs = rng.integers(50, 400, 3000).astype(float)
    capacity = engine.capacity_rps(inputs, outputs)
    gaps = np.cumsum(rng.exponential(1.0, 3000))
    under = engine.serve(gaps / (0.7 * capacity), inputs, outputs)
    over = engine.serve(gaps / (1.3 * capacity), inputs, outputs)
    assert np.nanmean(under.ttft_s[-300:]) < 1.0
    assert np.nanmean(over.ttft_s[-300:]) > 20 * np.nanmean(under.ttft_s[-300:])


def test_calibration_is_for_the_fast_search_and_a_bad_file_is_named(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["limit", "--host", "http://127.0.0.1:9", "--model", "m", "--slo", "ttft:p95<=2s",
            "-o", str(tmp_path / "run"), "--no-preflight"]  # fmt: skip
    bad = tmp_path / "cal.json"
    bad.write_text('{"schema": "capplan.calibration/v1"}')
    result = runner.invoke(app, [*base, "--method", "measured", "--calibration", str(bad)])
    assert result.exit_code == 2
    assert "--calibration is for --method fast" in result.output
    result = runner.invoke(app, [*base, "--calibration", str(bad)])  # fast: the default
    assert result.exit_code == 2
    assert "cal.json" in result.output
    assert "Traceback" not in result.output


def test_the_profiles_sizes_serve_only_a_server_that_counts_them_as_asked() -> None:
    """llama.cpp's tokenizer and chat template counted the load generator's prompts about
    1.5x plus a constant: the fast search then sizes its model's requests as the server
    returns them, not by the profile. Counts drawn from the profile itself keep the profile's
    sizes (the load test's, no sample). One user's 16 requests from a heavy-tailed mix do not
    show 1.5x; a chunk's few hundred do."""
    from planner.limit.fast.engine_model import counted_as_asked
    from planner.limit.fast.steps import KnownModel

    rng = np.random.default_rng(4)
    asked_in = np.round(rng.lognormal(6.5, 0.8, 20_000))
    asked_out = np.round(rng.lognormal(5.0, 0.5, 20_000))
    engine = EngineModel(build_engine_config("H100-80GB", "llama-3.1-8b"))
    known = KnownModel(model=engine, input_tokens=asked_in, output_tokens=asked_out)

    def served(n: int, scale: float = 1.0, cut: float | None = None) -> pl.DataFrame:
        pick = rng.integers(0, asked_in.size, n)
        outputs = asked_out[pick] if cut is None else np.minimum(asked_out[pick], cut)
        return pl.DataFrame({"input_tokens": scale * asked_in[pick] + (scale - 1.0) * 40,
                             "output_tokens": outputs})  # fmt: skip

    assert counted_as_asked(known, served(16), alpha=0.01)
    assert counted_as_asked(known, served(400), alpha=0.001)
    assert not counted_as_asked(known, served(400, scale=1.5), alpha=0.001)
    assert not counted_as_asked(known, served(400, cut=64.0), alpha=0.001)  # answers cut short
    preset = np.array([[40, 48], [120, 64], [200, 80]] * 6_000, dtype=float)
    chat = KnownModel(model=engine, input_tokens=preset[:, 0], output_tokens=preset[:, 1])
    counted = pl.DataFrame({"input_tokens": 1.5 * preset[:16, 0] + 30,
                            "output_tokens": preset[:16, 1]})  # fmt: skip
    assert not counted_as_asked(chat, counted, alpha=0.01)  # a preset's few lengths: at once
    assert not counted_as_asked(known, served(7), alpha=0.01)  # too few to tell
    # Closed-loop steps see their longest answers end less often: compared up to the asked
    # 75th percentile, such a sample is as asked, an answer cut short still is not
    # (control: compared in full, the same sample is told otherwise)
    steps = served(400)
    long = steps["output_tokens"].to_numpy() > np.quantile(asked_out, 0.85)
    steps = steps.filter(~pl.Series(long & (rng.random(long.size) < 0.7)))
    assert counted_as_asked(known, steps, alpha=0.01, answers_below=0.75)
    assert not counted_as_asked(known, steps, alpha=0.01)
    assert not counted_as_asked(known, served(400, cut=64.0), alpha=0.01, answers_below=0.75)


def test_the_roots_of_a_curves_parts_measure_its_roots_noise() -> None:
    """The noise of one curve's root, from the roots of five consecutive parts of its run
    (all from the rates it evaluated: no run more), against the spread of the roots of
    twelve curves with their own random numbers: within a factor of two."""
    servers, mean_s = 4, 0.5
    rng = np.random.default_rng(5)
    outputs = 1.0 + rng.exponential(mean_s / 0.01, 50_000)
    inputs = np.zeros(outputs.size)
    slo = parse_slo("ttft:p95<=0.3s")
    model = _Gridded(servers, (0.0, 0.0), (0.0, 0.01), (1.0,) * servers)
    roots, errors = [], []
    for seed in range(12):
        curve = MissCurve(model=model, input_tokens=inputs, output_tokens=outputs, slo=slo,
                          requests=10_000, seed=seed)  # fmt: skip
        roots.append(curve.root(np.zeros(1)))
        parts = curve.batch_roots(np.zeros(1))
        errors.append(float(np.std(parts, ddof=1)) / math.sqrt(len(parts)))
    spread = float(np.std(roots, ddof=1))
    assert 0.5 * spread <= float(np.median(errors)) <= 2.0 * spread, (spread, errors)
