"""Synthetic calibration probes: what a server that IS a given EngineConfig would measure.

Each probe is run through the engine model itself (`planner.engine.simulate`), not through
the fitting's formulas, and decode steps are read from the simulated token times by the
same function that reads a live server's chunk times.
"""

from __future__ import annotations

import numpy as np

from planner.calibrate.measure import DECODE_TOKENS, Measured, ProbeSpec
from planner.calibrate.probes import Stream, common_step_s
from planner.engine import EngineConfig, EngineRequest, simulate


def simulated_once(spec: ProbeSpec, config: EngineConfig) -> float:
    """One measurement of `spec` on a server that behaves exactly as `config`."""
    if spec.kind in ("prefill", "frontend", "prefix"):
        (tl,) = simulate([EngineRequest("r", spec.prompt_tokens, 1, 0.0)], config)
        assert tl.ttft_s is not None
        return tl.ttft_s
    reqs = [
        EngineRequest(f"r{i}", spec.prompt_tokens, DECODE_TOKENS, 0.0, min_tokens=DECODE_TOKENS)
        for i in range(spec.batch)
    ]
    streams = [
        Stream(
            sent_s=0.0,
            ttft_s=tl.token_times_s[0] + tl.frontend_s,
            chunk_times_s=tuple(t + tl.frontend_s for t in tl.token_times_s),
            completion_tokens=tl.output_tokens,
        )
        for tl in simulate(reqs, config)
    ]
    return common_step_s(streams)


def synthetic(
    specs: list[ProbeSpec],
    config: EngineConfig,
    *,
    rounds: int = 3,
    noise: float = 0.0,
    trend: float = 0.0,
    seed: int = 0,
) -> list[Measured]:
    """Every probe measured `rounds` times on `config`, with relative noise and a linear
    slow-down of `trend` from the first round to the last (0: a steady server)."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        truth = simulated_once(spec, config)
        m = Measured(spec=spec)
        for r in range(rounds):
            drift = 1 + trend * r / max(1, rounds - 1)
            m.values_s.append(truth * drift * (1 + noise * rng.standard_normal()))
            if spec.kind == "prefix":
                m.firsts_s.append(truth)
        if spec.kind == "decode":
            m.context_tokens = spec.prompt_tokens + DECODE_TOKENS / 2
        out.append(m)
    return out
