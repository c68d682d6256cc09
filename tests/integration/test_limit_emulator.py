"""`capplan limit` against the emulator lands near the limit the engine model predicts.

The emulator serves the engine model in real time (`--time-scale` times faster); the expected
limit comes from the same engine in virtual time, over the same level design (level length,
warm-up, requests scheduled in the level measured until they finish, an idle engine at each
level's start) and the same request shape (the records' token counts), pooled over many
replicas so its verdict is not noisy. Prefix caching is off so prompts that differ only by
their random text cannot hit the cache in one clock and miss in the other.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from capplan.cli import app
from contracts.limit import load_limit
from contracts.rundir import read_records, read_stages
from planner.emulator import emulator_subprocess
from planner.engine import (
    Engine,
    EngineConfig,
    EngineRequest,
    RequestTimeline,
    build_engine_config,
    simulate,
)
from planner.loadtest.netutil import free_port
from planner.slo.spec import Slo, parse_slo
from planner.slo.verdict import evaluate
from profiles.model import save_profile
from testkit.profiles import make_profile

pytestmark = pytest.mark.integration

SPEED = 8.0  # engine seconds per wall second
LEVEL_S = 10.0  # wall seconds per level
WARMUP_S = 2.0
PROMPT_TOKENS, OUTPUT_TOKENS = 256, 128
REPLICAS = 20  # virtual levels pooled per load when computing the expected verdict


def _engine() -> EngineConfig:
    # A10 + Llama-3.1-8B with 4 sequences at most: with 128-token answers about 0.9 req/s of
    # engine time, 7 req/s of wall time at SPEED; past 4 concurrent users a request waits
    # for a whole answer (~0.6 s wall), far above the SLO's 250 ms.
    return build_engine_config(
        "A10-24GB",
        "llama-3.1-8b",
        max_num_seqs=4,
        prefix_caching=False,
        record_token_times=False,
    )


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    with emulator_subprocess(_engine(), speed=SPEED) as url:
        yield url


@pytest.fixture(scope="module")
def profile_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("profile") / "fixed.json"
    save_profile(make_profile([(PROMPT_TOKENS, OUTPUT_TOKENS)]), path)
    return path


def _frame(timelines: list[RequestTimeline]) -> pl.DataFrame:
    """Per-request results of the engine in the columns planner.slo.verdict.evaluate reads."""
    e2e = [tl.e2e_s for tl in timelines]
    return pl.DataFrame(
        {
            "ttft_s": [tl.ttft_s for tl in timelines],
            "tpot_s": [tl.tpot_s for tl in timelines],
            "e2e_s": e2e,
            "ok": [v is not None for v in e2e],
        },
        schema={"ttft_s": pl.Float64, "tpot_s": pl.Float64, "e2e_s": pl.Float64, "ok": pl.Boolean},
    )


def _wall(frame: pl.DataFrame) -> pl.DataFrame:
    """Engine seconds -> the wall seconds a client of a `SPEED`x emulator measures."""
    return frame.with_columns(pl.col("ttft_s", "tpot_s", "e2e_s") / SPEED)


def _virtual_open_level(
    config: EngineConfig, rate_rps: float, prompt: int, output: int, rng: np.random.Generator
) -> pl.DataFrame:
    """One open-loop level of evenly spaced sends (`--arrival constant`) in engine time; the
    rate is in wall req/s; rows after the warm-up. Sends start at a random phase, as the
    load generator's first send does not line up with the engine's steps."""
    level_s, warm_s = LEVEL_S * SPEED, WARMUP_S * SPEED
    n = int(np.floor(rate_rps * LEVEL_S + 1e-9))
    gap_s = level_s / (rate_rps * LEVEL_S)
    sends = (np.arange(n) + rng.uniform(0.0, 0.1)) * gap_s
    requests = [EngineRequest(f"r{i}", prompt, output, float(t)) for i, t in enumerate(sends)]
    timelines = [tl for tl, t in zip(simulate(requests, config), sends, strict=True) if t >= warm_s]
    return _wall(_frame(timelines))


def _virtual_closed_level(
    config: EngineConfig, users: float, prompt: int, output: int, rng: np.random.Generator
) -> pl.DataFrame:
    """One closed-loop level: `users` loops that send the next request when one ends."""
    level_s, warm_s = LEVEL_S * SPEED, WARMUP_S * SPEED
    engine = Engine(config, token_events=False)
    sends: dict[str, float] = {}
    count = 0

    def send(now_s: float) -> None:
        nonlocal count
        rid = f"r{count}"
        count += 1
        sends[rid] = now_s
        engine.add_request(EngineRequest(rid, prompt, output, now_s), now_s)

    # Users start within the first few milliseconds, as Locust's greenlets do.
    for start_s in np.sort(rng.uniform(0.0, 0.01 * SPEED, int(users))):
        send(float(start_s))
    now = 0.0
    while engine.has_work():
        result = engine.step(now)
        now = result.end_s
        for event in result.events:
            if event.kind == "finished" and event.time_s < level_s:
                send(event.time_s)
    kept = [engine.timeline(rid) for rid, t in sends.items() if t >= warm_s]
    return _wall(_frame(kept))


def _passes(
    level: Callable[..., pl.DataFrame], load: float, slo: Slo, prompt: int, output: int
) -> bool:
    """The pooled verdict of REPLICAS virtual levels at `load`."""
    config = _engine()
    rng = np.random.default_rng(12345)  # common random numbers across loads
    pooled = pl.concat([level(config, load, prompt, output, rng) for _ in range(REPLICAS)])
    duration_s = REPLICAS * (LEVEL_S - WARMUP_S)
    return evaluate(pooled, slo, duration_s=duration_s, resamples=10).passed


def expected_rate_limit(slo: Slo, prompt: int, output: int) -> float:
    """Bisect the wall rate where the engine model's pooled verdict flips (0.5 % apart)."""
    lo, hi = 0.1, 1.0
    while _passes(_virtual_open_level, hi, slo, prompt, output):
        lo, hi = hi, hi * 2
    while hi - lo > 0.005 * lo:
        mid = (lo + hi) / 2
        if _passes(_virtual_open_level, mid, slo, prompt, output):
            lo = mid
        else:
            hi = mid
    return lo


def expected_concurrency_limit(slo: Slo, prompt: int, output: int) -> int:
    """The most users whose pooled closed-loop levels still pass."""
    users = 1
    while _passes(_virtual_closed_level, users + 1, slo, prompt, output):
        users += 1
    return users


def _request_shape(run_dir: Path) -> tuple[int, int]:
    """The prompt and output tokens the endpoint reported (its chat template adds a few)."""
    ok = read_records(run_dir).filter(pl.col("ok"))
    return int(ok["input_tokens"].median()), int(ok["output_tokens"].median())  # type: ignore[arg-type]


def _run_limit(
    emulator: str, profile_path: Path, out: Path, slo: str, *extra: str, method: str = "measured"
) -> tuple[float, str]:
    started = time.perf_counter()
    result = CliRunner().invoke(
        app,
        [
            "limit",
            "--method",
            method,  # measured: the measured search against the engine model's truth
            "--host",
            emulator,
            "--model",
            "llama-3.1-8b",
            "--profile",
            str(profile_path),
            "--slo",
            slo,
            "--level-duration",
            str(LEVEL_S),
            "--warmup",
            str(WARMUP_S),
            # Short levels of the fixed design above: no correlation-time window rule (the
            # steady-state accuracy is checked against the queueing truth elsewhere).
            "--effective-requests",
            "0",
            "--tail-requests",
            "0",
            "-o",
            str(out),
            *extra,
        ],
    )
    wall_s = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    print(result.output)
    return wall_s, result.output


def test_rate_limit_matches_engine_model(emulator: str, profile_path: Path, tmp_path: Path) -> None:
    slo_text = "ttft:p95<=250ms"
    out = tmp_path / "rate"
    wall_s, printed = _run_limit(
        emulator, profile_path, out, slo_text, "--start", "4", "--arrival", "constant"
    )
    limit = load_limit(out)
    prompt, output = _request_shape(out)
    expected = expected_rate_limit(parse_slo(slo_text), prompt, output)
    print(
        f"rate: found {limit.feasible_max} req/s, engine model {expected:.3f} req/s; "
        f"{len(limit.levels)} levels, {sum(len(lv.stages) for lv in limit.levels)} runs, "
        f"wall {wall_s:.0f} s"
    )
    assert limit.dimension == "rate" and limit.binding == "ttft:p95"
    assert limit.feasible_max is not None and limit.infeasible_min is not None
    assert abs(limit.feasible_max - expected) <= 0.10 * expected
    stages = read_stages(out)
    assert [s.role for s in stages] == ["level"] * len(stages)
    assert {s.name for s in stages} == {st for lv in limit.levels for st in lv.stages}
    assert limit.sentence.startswith("one instance holds ") and limit.sentence in printed
    # The endpoint named itself capplan's emulator (capplan_emulator_info on /metrics): the
    # limit is the engine model's, marked predicted with its interval for the GPU it names.
    assert limit.predicted is not None
    assert limit.predicted.low < limit.feasible_max < limit.predicted.high
    assert "predicted, not measured on a GPU" in printed and "on A10-24GB" in printed


def test_concurrency_limit_matches_engine_model(
    emulator: str, profile_path: Path, tmp_path: Path
) -> None:
    slo_text = "ttft:p95<=250ms"
    out = tmp_path / "concurrency"
    wall_s, _ = _run_limit(
        emulator, profile_path, out, slo_text, "--dimension", "concurrency", "--start", "4"
    )
    limit = load_limit(out)
    prompt, output = _request_shape(out)
    expected = expected_concurrency_limit(parse_slo(slo_text), prompt, output)
    print(
        f"concurrency: found {limit.feasible_max} users, engine model {expected} users; "
        f"{len(limit.levels)} levels, wall {wall_s:.0f} s"
    )
    assert limit.feasible_max is not None
    assert abs(limit.feasible_max - expected) <= 0.10 * expected
    assert limit.littles_law is not None
    assert math.isclose(limit.littles_law.concurrency, limit.feasible_max, rel_tol=0.25)


def test_default_concurrency_limit_rests_on_measured_users(
    emulator: str, profile_path: Path, tmp_path: Path
) -> None:
    """The default search on users (planner.limit.fast.closed): closed-loop steps, the
    characterised model's closed loop, then about 0.9 N must hold and 1.1 N fail, measured; against
    the engine model's own closed-loop levels (`expected_concurrency_limit`)."""
    slo_text = "ttft:p95<=250ms"
    out = tmp_path / "concurrency-fast"
    wall_s, printed = _run_limit(
        emulator, profile_path, out, slo_text, "--dimension", "concurrency", method="fast"
    )
    limit = load_limit(out)
    prompt, output = _request_shape(out)
    expected = expected_concurrency_limit(parse_slo(slo_text), prompt, output)
    print(f"concurrency (fast): found {limit.feasible_max} users, engine model {expected}; "
          f"{len(limit.levels)} measured levels, wall {wall_s:.0f} s")  # fmt: skip
    assert limit.fast is not None and limit.fast.slots is not None
    assert "characterise" in printed and "its closed loop meets the SLO up to" in printed
    assert limit.feasible_max is not None and limit.infeasible_min is not None
    assert abs(limit.feasible_max - expected) <= 0.10 * expected
    assert limit.failed_load == limit.infeasible_min
    if limit.answer_held:  # N users between the level that held and the one that failed
        assert limit.method == "fast" and "closed loop said" in limit.sentence
        assert limit.held_load is not None and limit.held_load < limit.feasible_max
        assert limit.feasible_max < limit.infeasible_min
        assert f"measured bracket {limit.held_load:g}-{limit.infeasible_min:g}" in limit.sentence
    else:
        assert limit.held_load == limit.feasible_max


def test_unreachable_endpoint_is_a_target_error(profile_path: Path, tmp_path: Path) -> None:
    """The preflight refuses it at once (exit 2); past a skipped preflight, the first level
    that reaches nothing stops the search (exit 1)."""
    port = free_port()  # a port nobody listens on
    args = [
        "limit",
        "--host", f"http://127.0.0.1:{port}",
        "--model", "m",
        "--profile", str(profile_path),
        "--slo", "ttft:p95<=1s",
        "--level-duration", "2",
        "--start", "4",
        "-o", str(tmp_path / "run"),
    ]  # fmt: skip
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2, refused.output
    assert "the target does not answer" in refused.output
    assert not (tmp_path / "run").exists()
    result = CliRunner().invoke(app, [*args, "--no-preflight"])
    assert result.exit_code == 1, result.output
    # the default search's first stage is the fast search's first closed-loop step
    assert "no request of characterise-01 reached the endpoint" in result.output
    assert "connect_refused" in result.output
